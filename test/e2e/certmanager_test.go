//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// envCertMode is how the installation got its serving certificate:
// "cert-manager" (cert-manager's chain, cainjector's caBundle) or anything
// else. The cert-manager scenarios need "cert-manager".
const envCertMode = "SPREADGUARD_E2E_CERT_MODE"

// injectAnnotation is cainjector's annotation on the webhook configurations:
// the Certificate whose CA goes into their caBundle.
const injectAnnotation = "cert-manager.io/inject-ca-from"

// Renewals under load run for renewLoadDuration at renewLoadRate creates/s,
// the renewal triggered after renewAfter.
const (
	renewLoadRate     = 20
	renewLoadDuration = 2 * time.Minute
	renewAfter        = 15 * time.Second
)

func init() {
	// The suite reads cert-manager's objects with its own API types.
	utilruntime.Must(cmapi.AddToScheme(scheme))
}

// pki is the chart's cert-manager chain as found in the cluster, from the
// webhook configurations' inject annotation: the serving Certificate, and
// the CA Certificate behind the CA Issuer that signs it.
type pki struct {
	serving, ca client.ObjectKey
	// service is the webhook's Service, by which the API server calls it.
	service *admissionregistrationv1.ServiceReference
}

func skipUnlessCertManager(t *testing.T) {
	t.Helper()
	if mode := os.Getenv(envCertMode); mode != "cert-manager" {
		t.Skipf("%s=%q: the serving certificate is not cert-manager's", envCertMode, mode)
	}
}

func findPKI(t *testing.T) pki {
	t.Helper()
	ctx := t.Context()
	var conf admissionregistrationv1.MutatingWebhookConfiguration
	if err := k8s.Get(ctx, client.ObjectKey{Name: cluster.mutating[0].configuration}, &conf); err != nil {
		t.Fatal(err)
	}
	ns, name, ok := strings.Cut(conf.Annotations[injectAnnotation], "/")
	if !ok {
		t.Fatalf("%s has no %s annotation: cainjector does not fill its caBundle", conf.Name, injectAnnotation)
	}
	p := pki{serving: client.ObjectKey{Namespace: ns, Name: name}, service: cluster.mutating[0].clientConfig.Service}
	if p.service == nil {
		t.Fatalf("%s calls a URL, not a Service", conf.Name)
	}
	var serving cmapi.Certificate
	if err := k8s.Get(ctx, p.serving, &serving); err != nil {
		t.Fatalf("the serving Certificate %s: %v", p.serving, err)
	}
	var issuer cmapi.Issuer
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: serving.Spec.IssuerRef.Name}, &issuer); err != nil {
		t.Fatalf("the serving Certificate's Issuer: %v", err)
	}
	if issuer.Spec.CA == nil {
		t.Fatalf("Issuer %s is not a CA Issuer", issuer.Name)
	}
	var certs cmapi.CertificateList
	if err := k8s.List(ctx, &certs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, c := range certs.Items {
		if c.Spec.SecretName == issuer.Spec.CA.SecretName {
			p.ca = client.ObjectKeyFromObject(&c)
		}
	}
	if p.ca.Name == "" {
		t.Fatalf("no Certificate writes the CA Issuer's Secret %s", issuer.Spec.CA.SecretName)
	}
	return p
}

// ready says whether crt is Ready and up to date with its spec.
func ready(crt *cmapi.Certificate) error {
	for _, c := range crt.Status.Conditions {
		if c.Type == cmapi.CertificateConditionReady {
			if c.Status == cmmeta.ConditionTrue && c.ObservedGeneration == crt.Generation {
				return nil
			}
			return fmt.Errorf("certificate %s: Ready=%s (%s: %s)", crt.Name, c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Errorf("certificate %s has no Ready condition", crt.Name)
}

// secretPEM returns the PEM blocks of key in the Secret of crt.
func secretPEM(ctx context.Context, crt client.ObjectKey, key string) ([]byte, error) {
	var c cmapi.Certificate
	if err := k8s.Get(ctx, crt, &c); err != nil {
		return nil, err
	}
	var s v1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: crt.Namespace, Name: c.Spec.SecretName}, &s); err != nil {
		return nil, err
	}
	if len(s.Data[key]) == 0 {
		return nil, fmt.Errorf("secret %s has no %s", s.Name, key)
	}
	return s.Data[key], nil
}

// publicKey is the DER public key of the certificate in crt's Secret.
func publicKey(ctx context.Context, crt client.ObjectKey) ([]byte, error) {
	data, err := secretPEM(ctx, crt, "tls.crt")
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("certificate %s: no PEM block in tls.crt", crt)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, err
	}
	return x509.MarshalPKIXPublicKey(c.PublicKey)
}

// leafSerial is the serial number of the first certificate in data.
func leafSerial(data []byte) (string, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return "", errors.New("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "", err
	}
	return c.SerialNumber.String(), nil
}

// caBundles checks that the caBundle of every spreadguard pod webhook holds
// each CA certificate of cas. cainjector merges a new CA into the bundle
// (cert-manager's CAInjectorMerging, on by default) and drops a CA only
// once it has expired, so the bundle may hold more.
func caBundles(ctx context.Context, cas ...[]byte) error {
	var bundles []namedBundle
	for _, nw := range cluster.mutating {
		var c admissionregistrationv1.MutatingWebhookConfiguration
		if err := k8s.Get(ctx, client.ObjectKey{Name: nw.configuration}, &c); err != nil {
			return err
		}
		for _, w := range c.Webhooks {
			bundles = append(bundles, namedBundle{c.Name + "/" + w.Name, w.ClientConfig.CABundle})
		}
	}
	for _, nw := range cluster.validating {
		var c admissionregistrationv1.ValidatingWebhookConfiguration
		if err := k8s.Get(ctx, client.ObjectKey{Name: nw.configuration}, &c); err != nil {
			return err
		}
		for _, w := range c.Webhooks {
			bundles = append(bundles, namedBundle{c.Name + "/" + w.Name, w.ClientConfig.CABundle})
		}
	}
	for _, b := range bundles {
		have := certsDER(b.bundle)
		for _, ca := range cas {
			for der := range certsDER(ca) {
				if !have[der] {
					return fmt.Errorf("webhook %s: the caBundle (%d certificates) lacks a CA certificate it should carry", b.name, len(have))
				}
			}
		}
	}
	return nil
}

type namedBundle struct {
	name   string
	bundle []byte
}

// certsDER is the set of the DER certificates of the PEM data.
func certsDER(data []byte) map[string]bool {
	out := map[string]bool{}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type == "CERTIFICATE" {
			out[string(b.Bytes)] = true
		}
	}
}

// webhookPods lists the Running pods behind the webhook's Service.
func (p pki) webhookPods(ctx context.Context) ([]v1.Pod, error) {
	var svc v1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: p.service.Namespace, Name: p.service.Name}, &svc); err != nil {
		return nil, err
	}
	var pods v1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(svc.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(svc.Spec.Selector)}); err != nil {
		return nil, err
	}
	var running []v1.Pod
	for _, pod := range pods.Items {
		if pod.Status.Phase == v1.PodRunning && pod.DeletionTimestamp == nil {
			running = append(running, pod)
		}
	}
	if len(running) == 0 {
		return nil, fmt.Errorf("no Running pod behind Service %s", svc.Name)
	}
	return running, nil
}

// presented returns the chain the webhook container of pod presents, over a
// port-forward to the port the Service sends the API server's calls to.
func (p pki) presented(ctx context.Context, pod *v1.Pod) ([]*x509.Certificate, error) {
	port, err := p.targetPort(ctx, pod)
	if err != nil {
		return nil, err
	}
	transport, upgrader, err := spdy.RoundTripperFor(restConfig)
	if err != nil {
		return nil, err
	}
	req := clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	stop, readyCh := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.New(dialer, []string{"0:" + strconv.Itoa(port)}, stop, readyCh, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	errCh := make(chan error, 1)
	go func() { errCh <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-errCh:
		return nil, fmt.Errorf("port-forward to %s: %w", pod.Name, err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // the chain is verified by the caller
	conn, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(int(ports[0].Local)))
	if err != nil {
		return nil, fmt.Errorf("TLS to %s: %w", pod.Name, err)
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates, nil
}

func (p pki) targetPort(ctx context.Context, pod *v1.Pod) (int, error) {
	var svc v1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: p.service.Namespace, Name: p.service.Name}, &svc); err != nil {
		return 0, err
	}
	want := int32(443)
	if p.service.Port != nil {
		want = *p.service.Port
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Port != want {
			continue
		}
		if sp.TargetPort.IntVal != 0 {
			return int(sp.TargetPort.IntVal), nil
		}
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == sp.TargetPort.StrVal {
					return int(cp.ContainerPort), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("service %s has no port %d that resolves on pod %s", svc.Name, want, pod.Name)
}

// verifyServed checks that every webhook pod presents a certificate for the
// Service's name that chains to caPEM, and returns the serials they present.
func (p pki) verifyServed(ctx context.Context, caPEM []byte) (map[string]string, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in the bundle")
	}
	pods, err := p.webhookPods(ctx)
	if err != nil {
		return nil, err
	}
	serials := map[string]string{}
	for i := range pods {
		chain, err := p.presented(ctx, &pods[i])
		if err != nil {
			return nil, err
		}
		inter := x509.NewCertPool()
		for _, c := range chain[1:] {
			inter.AddCert(c)
		}
		dns := p.service.Name + "." + p.service.Namespace + ".svc"
		if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: dns}); err != nil {
			return nil, fmt.Errorf("pod %s presents serial %s, which does not verify for %s against the caBundle: %w", pods[i].Name, chain[0].SerialNumber, dns, err)
		}
		serials[pods[i].Name] = chain[0].SerialNumber.String()
	}
	return serials, nil
}

// restarts sums the container restarts of the webhook's pods, by pod.
func (p pki) restarts(ctx context.Context) (map[string]int32, error) {
	pods, err := p.webhookPods(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, pod := range pods {
		for _, cs := range pod.Status.ContainerStatuses {
			out[pod.Name] += cs.RestartCount
		}
	}
	return out, nil
}

// renew asks cert-manager to reissue crt now, as `cmctl renew` does: by
// setting its Issuing condition. It returns the revision to wait for.
func renew(ctx context.Context, key client.ObjectKey) (int, error) {
	var crt cmapi.Certificate
	if err := k8s.Get(ctx, key, &crt); err != nil {
		return 0, err
	}
	next := 1
	if crt.Status.Revision != nil {
		next = *crt.Status.Revision + 1
	}
	now := metav1.Now()
	crt.Status.Conditions = append(crt.Status.Conditions, cmapi.CertificateCondition{
		Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, LastTransitionTime: &now,
		Reason: "ManuallyTriggered", Message: "Certificate re-issuance manually triggered", ObservedGeneration: crt.Generation,
	})
	if err := k8s.Status().Update(ctx, &crt); err != nil {
		return 0, fmt.Errorf("set the Issuing condition of %s: %w", key, err)
	}
	return next, nil
}

// issued checks that crt reached revision and is Ready again.
func issued(ctx context.Context, key client.ObjectKey, revision int) error {
	var crt cmapi.Certificate
	if err := k8s.Get(ctx, key, &crt); err != nil {
		return err
	}
	if crt.Status.Revision == nil || *crt.Status.Revision < revision {
		return fmt.Errorf("certificate %s not yet at revision %d", key, revision)
	}
	return ready(&crt)
}

func certManagerChain(t *testing.T) {
	skipUnlessCertManager(t)
	f := newFramework(t)
	p := findPKI(t)
	for _, key := range []client.ObjectKey{p.ca, p.serving} {
		f.eventually(2*time.Minute, "Certificate "+key.String()+" is Ready", func(ctx context.Context) error {
			var crt cmapi.Certificate
			if err := k8s.Get(ctx, key, &crt); err != nil {
				return err
			}
			return ready(&crt)
		})
	}
	caPEM, err := secretPEM(t.Context(), p.serving, "ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	f.eventually(time.Minute, "cainjector fills the caBundle of both webhook configurations", func(ctx context.Context) error {
		return caBundles(ctx, caPEM)
	})
	var served map[string]string
	f.eventually(2*time.Minute, "the webhook presents a certificate that chains to the caBundle", func(ctx context.Context) error {
		served, err = p.verifyServed(ctx, caPEM)
		return err
	})
	t.Logf("serving Certificate %s Ready, CA %s; pods present serials %v", p.serving, p.ca, served)
	f.create(hardZonePolicy(v1alpha1.ActionDeny))
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	f.eventually(policyChangeTimeout, "the first pod goes through the webhook over that chain", f.serving)
}

// failOnError sets failurePolicy Fail on spreadguard's pod webhooks until
// the test ends, so that a TLS failure shows as a failed create instead of
// a skipped webhook. kube-system and cert-manager's namespace stay
// excluded by the namespaceSelector; the scenarios run one at a time, so
// only the test's namespace sends pods meanwhile.
func (f *framework) failOnError() {
	t := f.t
	t.Helper()
	// A strategic merge patch finds the webhook by name (its merge key) in
	// either kind of configuration.
	setPolicy := func(ctx context.Context, fail bool) error {
		patch := func(conf client.Object, nw namedWebhook) error {
			body := fmt.Sprintf(`{"webhooks":[{"name":%q,"failurePolicy":%q}]}`, nw.name, *policyOf(fail, nw.failurePolicy))
			conf.SetName(nw.configuration)
			return k8s.Patch(ctx, conf, client.RawPatch(types.StrategicMergePatchType, []byte(body)))
		}
		for _, nw := range cluster.mutating {
			if err := patch(&admissionregistrationv1.MutatingWebhookConfiguration{}, nw); err != nil {
				return err
			}
		}
		for _, nw := range cluster.validating {
			if err := patch(&admissionregistrationv1.ValidatingWebhookConfiguration{}, nw); err != nil {
				return err
			}
		}
		return nil
	}
	if err := setPolicy(t.Context(), true); err != nil {
		t.Fatalf("set failurePolicy Fail: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := poll(ctx, 30*time.Second, func(ctx context.Context) error { return setPolicy(ctx, false) }); err != nil {
			t.Errorf("restore failurePolicy: %v", err)
		}
	})
}

func policyOf(fail bool, original admissionregistrationv1.FailurePolicyType) *admissionregistrationv1.FailurePolicyType {
	if fail {
		return new(admissionregistrationv1.Fail)
	}
	return new(original)
}

// renewedUnderLoad renews the Certificates keys, in order, under a stream of
// pod creates with failurePolicy Fail, and checks that no create fails and
// that every webhook pod ends up presenting the serving Secret's new
// certificate, chaining to the new caBundle, without a restart.
func renewedUnderLoad(t *testing.T, what string, keys func(pki) []client.ObjectKey) {
	skipUnlessCertManager(t)
	f := newFramework(t)
	p := findPKI(t)
	f.create(hardZonePolicy(v1alpha1.ActionDeny))
	f.create(service(spreadtest.MakeService().Name("load").Selector("app", "load")))
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	f.failOnError()
	f.eventually(policyChangeTimeout, "the webhook is serving", f.serving)
	ctx := t.Context()
	restartsBefore, err := p.restarts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldCA, err := secretPEM(ctx, p.serving, "ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.verifyServed(ctx, oldCA)
	if err != nil {
		t.Fatal(err)
	}

	renewed := make(chan error, 1)
	go func() {
		time.Sleep(renewAfter)
		for _, key := range keys(p) {
			start := time.Now()
			oldKey, err := publicKey(ctx, key)
			var revision int
			if err == nil {
				revision, err = renew(ctx, key)
			}
			if err == nil {
				err = poll(ctx, time.Minute, func(ctx context.Context) error { return issued(ctx, key, revision) })
			}
			var newKey []byte
			if err == nil {
				newKey, err = publicKey(ctx, key)
			}
			if err != nil {
				renewed <- err
				return
			}
			t.Logf("%s reissued (revision %d) in %v", key, revision, time.Since(start).Round(time.Millisecond))
			// Both Certificates rotate their key (rotationPolicy Always, cert-manager's default).
			if bytes.Equal(oldKey, newKey) {
				t.Errorf("%s was reissued with the same key, want a new one", key)
			}
		}
		renewed <- nil
	}()
	watchCtx, stopWatch := context.WithCancel(ctx)
	switched := make(chan string, 1)
	go func() { switched <- p.switchover(watchCtx, oldCA, before) }()
	r := f.createStream(ctx, renewLoadRate, renewLoadDuration, time.Second)
	stopWatch()
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	t.Logf("seconds after the load started: %s", <-switched)
	t.Logf("%s under %d creates/s for %s with failurePolicy Fail: %d creates, %d failed, %d admitted without the webhook, %d slower than 1s",
		what, renewLoadRate, renewLoadDuration, r.sent, r.failed, r.unmutated, r.slow)
	if r.failed != 0 || r.unmutated != 0 {
		t.Errorf("%d creates failed and %d missed the webhook while %s, want none", r.failed, r.unmutated, what)
	}

	newCert, err := secretPEM(ctx, p.serving, "tls.crt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := leafSerial(newCert)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := secretPEM(ctx, p.serving, "ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	// With a new CA, the old one must stay trusted until every replica
	// presents a certificate of the new one: cainjector keeps both.
	if !bytes.Equal(oldCA, newCA) {
		if err := caBundles(ctx, oldCA, newCA); err != nil {
			t.Errorf("after the CA renewal: %v", err)
		}
	}
	f.eventually(2*time.Minute, "every webhook pod presents the new serial "+want+", chaining to the new caBundle", func(ctx context.Context) error {
		served, err := p.verifyServed(ctx, newCA)
		if err != nil {
			return err
		}
		for pod, serial := range served {
			if serial != want {
				return fmt.Errorf("pod %s presents serial %s (before the renewal: %s)", pod, serial, before[pod])
			}
		}
		return nil
	})
	restartsAfter, err := p.restarts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for pod, n := range restartsBefore {
		if restartsAfter[pod] != n {
			t.Errorf("pod %s restarted %d times during the renewal, want 0", pod, restartsAfter[pod]-n)
		}
	}
	if len(restartsAfter) != len(restartsBefore) {
		t.Errorf("webhook pods before the renewal %v, after %v: want the same pods", restartsBefore, restartsAfter)
	}
}

// switchover polls, until ctx ends, when the caBundle of the first pod
// webhook stops being oldCA and when each webhook pod stops presenting its
// serial of before, in seconds from its start: between the two, the API
// server's trust and the served certificate may disagree.
func (p pki) switchover(ctx context.Context, oldCA []byte, before map[string]string) string {
	start := time.Now()
	seen := map[string]time.Duration{}
	for ctx.Err() == nil {
		var c admissionregistrationv1.MutatingWebhookConfiguration
		if _, ok := seen["caBundle"]; !ok && k8s.Get(ctx, client.ObjectKey{Name: cluster.mutating[0].configuration}, &c) == nil &&
			!bytes.Equal(c.Webhooks[0].ClientConfig.CABundle, oldCA) {
			seen["caBundle"] = time.Since(start)
		}
		pods, _ := p.webhookPods(ctx)
		for i := range pods {
			if _, ok := seen[pods[i].Name]; ok {
				continue
			}
			if chain, err := p.presented(ctx, &pods[i]); err == nil && chain[0].SerialNumber.String() != before[pods[i].Name] {
				seen[pods[i].Name] = time.Since(start)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	if _, ok := seen["caBundle"]; !ok {
		seen["caBundle unchanged until"] = time.Since(start)
	}
	var out []string
	for what, d := range seen {
		out = append(out, fmt.Sprintf("%s %.1fs", what, d.Seconds()))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func servingRenewedByCertManager(t *testing.T) {
	renewedUnderLoad(t, "the serving certificate was renewed", func(p pki) []client.ObjectKey {
		return []client.ObjectKey{p.serving}
	})
}

// caRenewedByCertManager renews the CA with a new key, then the serving
// certificate, which is when the new CA reaches the serving Secret's ca.crt
// and so the caBundle.
func caRenewedByCertManager(t *testing.T) {
	renewedUnderLoad(t, "the CA and then the serving certificate were renewed", func(p pki) []client.ObjectKey {
		return []client.ObjectKey{p.ca, p.serving}
	})
}
