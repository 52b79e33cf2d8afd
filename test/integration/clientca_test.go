//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	"github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/test/pki"
)

// answers reports whether the webhook server on port answers a caller that
// presents certs, straight over HTTPS: a review without a request is
// answered 400, a caller it does not trust fails the TLS handshake.
func answers(t *testing.T, port int, certs ...tls.Certificate) error {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(suite.caPEM)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12,
	}}}
	defer c.CloseIdleConnections()
	resp, err := c.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, server.PathValidatePod), "application/json",
		bytes.NewReader([]byte(`{}`)))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		return fmt.Errorf("status %d, want 400 for an empty review", resp.StatusCode)
	}
	return nil
}

// replaceFile writes data to path as the kubelet and cert-manager do: a new
// file renamed into place, never a half-written one.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestClientCAFileAdmitsOnlyTheAPIServersCertificate(t *testing.T) {
	trusted, other := pki.NewCA("apiserver-client-ca"), pki.NewCA("other-ca")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, trusted.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	port, _, _ := runServer(t, "webhook-client-ca", func(cfg *app.Config) {
		cfg.ClientCAFile = caFile
		cfg.MetricsSecure = false
	})
	if err := answers(t, port); err == nil {
		t.Error("a caller without a client certificate was answered")
	}
	if err := answers(t, port, other.ClientCert("kube-apiserver")); err == nil {
		t.Error("a caller with a certificate from another CA was answered")
	}
	if err := answers(t, port, trusted.ClientCert("kube-apiserver")); err != nil {
		t.Errorf("the API server's certificate was refused: %v", err)
	}
}

// createStream creates pods in a namespace from a few clients at once, as
// a cluster's controllers do, and records what the API server refused,
// by the step of the test it was in.
type createStream struct {
	ns     string
	client client.Client
	// gate is held for reading by every create, and for writing by pause.
	gate sync.RWMutex
	mu   sync.Mutex
	step string
	// created counts the creates that passed, failed those that failed,
	// by step.
	created, failed map[string]int
	errs            map[string][]string
}

func newCreateStream(t *testing.T, ns string) *createStream {
	t.Helper()
	cfg := rest.CopyConfig(suite.restConfig)
	cfg.QPS, cfg.Burst = -1, 0 // the stream is the load; no client-side limit
	c, err := client.New(cfg, client.Options{Scheme: suite.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &createStream{ns: ns, client: c, created: map[string]int{}, failed: map[string]int{}, errs: map[string][]string{}}
}

// enter starts counting under step.
func (s *createStream) enter(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step = step
}

// create creates a pod and returns the error, which it records unless ctx
// ended meanwhile.
func (s *createStream) create(ctx context.Context) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	pod := podObj(spreadtest.MakePod().Namespace(s.ns).Label("app", "stream"))
	pod.GenerateName = "stream-"
	err := s.client.Create(ctx, pod)
	if ctx.Err() != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed[s.step]++
		s.errs[s.step] = append(s.errs[s.step], err.Error())
	} else {
		s.created[s.step]++
	}
	return err
}

// run creates pods from workers clients until ctx is done.
func (s *createStream) run(ctx context.Context, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = s.create(ctx)
			}
		})
	}
	return &wg
}

// pause waits for the creates in flight to end and holds the next ones
// until resume.
func (s *createStream) pause()  { s.gate.Lock() }
func (s *createStream) resume() { s.gate.Unlock() }

// burst creates n pods at once and returns the errors.
func (s *createStream) burst(ctx context.Context, n int) []error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := s.create(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// connProxy forwards TCP connections to a backend and drops them all on
// demand, as a load balancer or a network fault does. TLS runs end to end
// through it, so every connection the API server opens again is a
// handshake with the backend: the client certificate it presents then,
// against the CAs the backend trusts then. The API server otherwise keeps
// up to 25 idle connections per webhook host (client-go's transport
// defaults) and may open none for a long time.
type connProxy struct {
	l       net.Listener
	backend string
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
}

func startProxy(t *testing.T, backend string) *connProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connProxy{l: l, backend: backend, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { l.Close(); p.dropAll() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", backend)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = struct{}{}, struct{}{}
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
	return p
}

func (p *connProxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

// dropAll closes every connection through the proxy.
func (p *connProxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// throughProxy points the webhook configurations named name at the proxy,
// and waits for the API server to call through it.
func throughProxy(t *testing.T, name string, serverPort, proxyPort int) {
	t.Helper()
	from, to := fmt.Sprintf("127.0.0.1:%d/", serverPort), fmt.Sprintf("127.0.0.1:%d/", proxyPort)
	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	for _, obj := range []client.Object{&m, &v} {
		if err := suite.client.Get(t.Context(), client.ObjectKey{Name: name}, obj); err != nil {
			t.Fatal(err)
		}
	}
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig.URL = new(strings.Replace(*m.Webhooks[i].ClientConfig.URL, from, to, 1))
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.URL = new(strings.Replace(*v.Webhooks[i].ClientConfig.URL, from, to, 1))
	}
	for _, obj := range []client.Object{&m, &v} {
		if err := suite.client.Update(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	// The API server picks changed configurations up asynchronously.
	time.Sleep(2 * time.Second)
}

// closedByTheAPIServer says that a create failed because kube-apiserver
// closed its own connection to the webhook while the call was on it: it
// closes every connection of a transport when it finds its client
// certificate changed (k8s.io/client-go v0.37.1,
// transport/cert_rotation.go), in-flight calls included, whichever webhook
// is called. A TLS refusal by the webhook reads "remote error: tls: ...".
func closedByTheAPIServer(err string) bool {
	return strings.Contains(err, "use of closed network connection") && !strings.Contains(err, "tls:")
}

// The API server's client CA rotates as a real rotation goes: the webhook's
// bundle gains the new CA, the API server moves to a certificate of the
// new CA, the bundle drops the old one. Through a webhook with
// failurePolicy Fail, under a stream of creates from 4 clients, and after
// each step over new connections and a burst of 40 creates: no create
// fails while the webhook's bundle changes, none fails TLS when the API
// server changes its certificate, and at the end the old certificate is
// refused, straight and through the API server.
func TestClientCARotationUnderAStreamOfCreates(t *testing.T) {
	old, next := pki.NewCA("apiserver-client-old"), pki.NewCA("apiserver-client-new")
	oldCert, newCert := old.ClientCert("kube-apiserver"), next.ClientCert("kube-apiserver")
	presents := func(cert tls.Certificate) {
		replaceFile(t, suite.webhookClientCert, pki.PEM(cert))
		// It reads the file again at most once a second.
		time.Sleep(1500 * time.Millisecond)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	trusts := func(cas ...*pki.CA) {
		var bundle []byte
		for _, ca := range cas {
			bundle = append(bundle, ca.PEM...)
		}
		replaceFile(t, caFile, bundle)
	}
	presents(oldCert)
	trusts(old)
	var stream *createStream
	labels := map[string]string{"integration.spreadguard.io/client-ca": "rotation"}
	srv := startServer(t, admissionregistrationv1.Fail, labels, func(cfg *app.Config) { cfg.ClientCAFile = caFile })
	proxy := startProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.port))
	throughProxy(t, "spreadguard-fail", srv.port, proxy.port())
	handshakes := func() float64 { return registryValue(t, srv.reg, "spreadguard_webhook_tls_handshakes_total ") }
	// reconnect makes the API server open new connections to the webhook,
	// so that what is verified next is what it presents now against what
	// the webhook trusts now: the proxy drops them while no create is in
	// flight, and the API server, whose reader sees them closed, no longer
	// picks them.
	reconnect := func() {
		stream.pause()
		proxy.dropAll()
		time.Sleep(500 * time.Millisecond)
		stream.resume()
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "client-ca-rotation-", Labels: labels}}
	create(t, ns)
	stream = newCreateStream(t, ns.Name)
	stream.enter("warm-up")
	eventually(t, "a create passes the webhook that checks the API server's certificate", func(ctx context.Context) (bool, error) {
		err := stream.create(ctx)
		return err == nil, err
	})

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	workers := stream.run(ctx, 4)
	step := func(name string, do func()) {
		t.Helper()
		stream.enter(name)
		h := handshakes()
		do()
		reconnect()
		stream.burst(ctx, 40)
		if handshakes() == h {
			t.Fatalf("%s: no new connection to the webhook; the step proves nothing", name)
		}
		stream.mu.Lock()
		t.Logf("%s: %d creates passed, %d failed; %v TLS handshakes", name, stream.created[name], stream.failed[name], handshakes()-h)
		stream.mu.Unlock()
	}
	bundleBoth, switched, bundleNew := "1. the bundle holds the old and the new CA", "2. the API server presents the new certificate",
		"3. the bundle holds the new CA alone"
	step(bundleBoth, func() {
		trusts(old, next)
		eventually(t, "the webhook trusts the new CA", func(context.Context) (bool, error) {
			return answers(t, srv.port, newCert) == nil, nil
		})
	})
	step(switched, func() { presents(newCert) })
	step(bundleNew, func() {
		trusts(next)
		eventually(t, "the webhook refuses the old certificate", func(context.Context) (bool, error) {
			return answers(t, srv.port, oldCert) != nil, nil
		})
	})
	stop()
	workers.Wait()

	for _, name := range []string{bundleBoth, bundleNew} {
		if n := stream.failed[name]; n != 0 {
			t.Errorf("%s: %d of %d creates failed, want 0; errors:\n%s", name, n, n+stream.created[name], strings.Join(stream.errs[name], "\n"))
		}
	}
	closed := 0
	for _, err := range stream.errs[switched] {
		if !closedByTheAPIServer(err) {
			t.Errorf("%s: a create failed otherwise than by the API server closing its connections: %s", switched, err)
		}
		closed++
	}
	t.Logf("%s: %d calls in flight failed when kube-apiserver closed its connections on finding its new certificate; none failed TLS",
		switched, closed)
	if got := registryValue(t, srv.reg, `spreadguard_webhook_client_ca_reloads_total{result="loaded"} `); got != 2 {
		t.Errorf("spreadguard_webhook_client_ca_reloads_total{result=\"loaded\"} = %v, want 2 (two new bundles)", got)
	}
	if err := answers(t, srv.port, newCert); err != nil {
		t.Errorf("the new certificate was refused: %v", err)
	}

	// An API server presenting the old certificate again is refused: its
	// first call after finding its certificate changed fails as above, the
	// next fail TLS.
	presents(oldCert)
	stream.enter("the old certificate")
	var refused error
	for range 5 {
		reconnect()
		err := stream.create(t.Context())
		if err != nil && strings.Contains(err.Error(), "failed calling webhook") && strings.Contains(err.Error(), "tls: ") {
			refused = err
			break
		}
	}
	if refused == nil {
		t.Errorf("no create through an API server presenting the old certificate failed TLS; errors: %q", stream.errs["the old certificate"])
	} else {
		t.Logf("refused: %v", refused)
	}
}
