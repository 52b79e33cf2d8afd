package perf

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// streamRV is the resource version of the initial-events-end bookmark,
// above every fixture object's.
const streamRV = "99999999"

// memorySource hands the webhook's informers a generated cluster. It is
// installed through app.WithCacheOptions as the cache's NewInformer, so
// everything above the list-watch is the production code: controller-
// runtime's informer cache with pkg/cache's transforms, the tracker feeding
// spread.Index, the lookups with their live-read fallback.
//
// Each informer gets the stream kube-apiserver serves a client-go v0.37
// reflector, which lists through watch-list by default: every object as an
// ADDED event, then a bookmark carrying k8s.io/initial-events-end. Objects
// are generated as they are sent, so the source itself holds nothing and a
// measurement of the process's memory is the server's.
type memorySource struct {
	cluster fixture.Cluster
	// sent counts the objects streamed, by kind.
	mu   sync.Mutex
	sent map[string]*atomic.Int64
}

func newMemorySource(c fixture.Cluster) *memorySource {
	return &memorySource{cluster: c, sent: map[string]*atomic.Int64{}}
}

// install is the app.WithCacheOptions hook.
func (s *memorySource) install(o *crcache.Options) {
	o.NewInformer = s.newInformer
	o.Mapper = restMapper()
}

func (s *memorySource) newInformer(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(s.listWatch(obj), obj, resync, indexers)
}

// Sent reports how many objects of kind (for example "Pod") were streamed.
func (s *memorySource) Sent(kind string) int64 { return s.counter(kind).Load() }

func (s *memorySource) counter(kind string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent[kind] == nil {
		s.sent[kind] = &atomic.Int64{}
	}
	return s.sent[kind]
}

// objects calls yield with every object of obj's type, in the order the
// apiserver would stream them, until yield returns false.
func objects(c fixture.Cluster, obj runtime.Object, yield func(runtime.Object) bool) {
	switch obj.(type) {
	case *v1.Node:
		for i := range c.Nodes {
			if !yield(c.Node(i)) {
				return
			}
		}
	case *v1.Pod:
		for w := range c.Workloads() {
			for r := range c.Replicas {
				if !yield(c.Pod(w, r)) {
					return
				}
			}
		}
	case *v1.Service:
		for w := range c.Workloads() {
			if !yield(c.Service(w)) {
				return
			}
		}
	case *appsv1.ReplicaSet:
		if c.Owner == fixture.OwnerReplicaSet {
			for w := range c.Workloads() {
				if !yield(c.ReplicaSet(w)) {
					return
				}
			}
		}
	case *appsv1.Deployment:
		if c.Owner == fixture.OwnerReplicaSet {
			for w := range c.Workloads() {
				if !yield(c.Deployment(w)) {
					return
				}
			}
		}
	case *v1.ReplicationController:
		if c.Owner == fixture.OwnerReplicationController {
			for w := range c.Workloads() {
				if !yield(c.ReplicationController(w)) {
					return
				}
			}
		}
	case *v1.Namespace:
		names := append([]string{"default", app.KubeSystem}, c.NamespaceNames()...)
		for i, name := range names {
			if !yield(fixture.NamespaceObject(name, i)) {
				return
			}
		}
	case *v1alpha1.ClusterSpreadPolicy:
		yield(fixture.Policy())
	}
	// StatefulSets and SpreadPolicies: none.
}

// kindOf is the Go type name of obj: "Pod" for a *v1.Pod.
func kindOf(obj runtime.Object) string { return reflect.TypeOf(obj).Elem().Name() }

func (s *memorySource) listWatch(obj runtime.Object) *toolscache.ListWatch {
	kind := kindOf(obj)
	sent := s.counter(kind)
	return &toolscache.ListWatch{
		// A reflector lists only when watch-list is off or refused;
		// serve it anyway, as one unpaginated list.
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			list, err := listOf(obj)
			if err != nil {
				return nil, err
			}
			var items []runtime.Object
			objects(s.cluster, obj, func(o runtime.Object) bool { items = append(items, o); return true })
			if err := meta.SetList(list, items); err != nil {
				return nil, err
			}
			list.(metav1.ListInterface).SetResourceVersion(streamRV)
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w := newStreamWatch()
			if opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
				return w, nil // nothing ever changes
			}
			go func() {
				complete := true
				objects(s.cluster, obj, func(o runtime.Object) bool {
					if !w.send(watch.Event{Type: watch.Added, Object: o}) {
						complete = false
						return false
					}
					sent.Add(1)
					return true
				})
				if !complete {
					return
				}
				bookmark := obj.DeepCopyObject()
				m, err := meta.Accessor(bookmark)
				if err != nil {
					w.send(watch.Event{Type: watch.Error, Object: &metav1.Status{Message: err.Error()}})
					return
				}
				m.SetResourceVersion(streamRV)
				m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
				w.send(watch.Event{Type: watch.Bookmark, Object: bookmark})
			}()
			return w, nil
		},
	}
}

// listOf returns an empty list of obj's type.
func listOf(obj runtime.Object) (runtime.Object, error) {
	switch obj.(type) {
	case *v1.Node:
		return &v1.NodeList{}, nil
	case *v1.Pod:
		return &v1.PodList{}, nil
	case *v1.Service:
		return &v1.ServiceList{}, nil
	case *appsv1.ReplicaSet:
		return &appsv1.ReplicaSetList{}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSetList{}, nil
	case *appsv1.Deployment:
		return &appsv1.DeploymentList{}, nil
	case *v1.ReplicationController:
		return &v1.ReplicationControllerList{}, nil
	case *v1.Namespace:
		return &v1.NamespaceList{}, nil
	case *v1alpha1.SpreadPolicy:
		return &v1alpha1.SpreadPolicyList{}, nil
	case *v1alpha1.ClusterSpreadPolicy:
		return &v1alpha1.ClusterSpreadPolicyList{}, nil
	}
	return nil, fmt.Errorf("no list type for %T", obj)
}

// streamWatch is a watch.Interface whose sender stops as soon as the
// reflector stops watching; its channel is unbuffered, so objects are
// generated no faster than the informer takes them.
type streamWatch struct {
	ch   chan watch.Event
	done chan struct{}
	once sync.Once
}

func newStreamWatch() *streamWatch {
	return &streamWatch{ch: make(chan watch.Event), done: make(chan struct{})}
}

func (w *streamWatch) send(ev watch.Event) bool {
	select {
	case w.ch <- ev:
		return true
	case <-w.done:
		return false
	}
}

func (w *streamWatch) Stop()                          { w.once.Do(func() { close(w.done) }) }
func (w *streamWatch) ResultChan() <-chan watch.Event { return w.ch }

// restMapper knows every type the webhook caches, so that nothing asks an
// apiserver for discovery.
func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk, scope := range map[schema.GroupVersionKind]meta.RESTScope{
		v1.SchemeGroupVersion.WithKind("Pod"):                   meta.RESTScopeNamespace,
		v1.SchemeGroupVersion.WithKind("Node"):                  meta.RESTScopeRoot,
		v1.SchemeGroupVersion.WithKind("Service"):               meta.RESTScopeNamespace,
		v1.SchemeGroupVersion.WithKind("ReplicationController"): meta.RESTScopeNamespace,
		v1.SchemeGroupVersion.WithKind("Namespace"):             meta.RESTScopeRoot,
		appsv1.SchemeGroupVersion.WithKind("ReplicaSet"):        meta.RESTScopeNamespace,
		appsv1.SchemeGroupVersion.WithKind("StatefulSet"):       meta.RESTScopeNamespace,
		appsv1.SchemeGroupVersion.WithKind("Deployment"):        meta.RESTScopeNamespace,
		v1alpha1.GroupVersion.WithKind("SpreadPolicy"):          meta.RESTScopeNamespace,
		v1alpha1.GroupVersion.WithKind("ClusterSpreadPolicy"):   meta.RESTScopeRoot,
	} {
		m.Add(gvk, scope)
	}
	return m
}

// server is the production webhook server, running in this process over a
// memorySource.
type server struct {
	cluster fixture.Cluster
	source  *memorySource
	// url is https://127.0.0.1:<port>.
	url    string
	caFile string
	// fill is how long the caches took to sync.
	fill   time.Duration
	cancel context.CancelFunc
	done   chan error
}

// startServer runs app.Run over cluster c with certificates in dir, and
// returns once the caches have synced and the webhook answers TLS.
func startServer(ctx context.Context, c fixture.Cluster, dir string) (*server, error) {
	caFile, err := writeCerts(dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := app.NewConfig()
	cfg.Port = port
	cfg.CertDir = dir
	cfg.MetricsBindAddress = "0"
	cfg.HealthProbeBindAddress = "0"
	// The memory source serves no ConfigMap, and no cluster-autoscaler
	// runs here.
	cfg.ClusterAutoscalerStatus = ""

	reg := prometheus.NewRegistry()
	src := newMemorySource(c)
	cacheOpts := []app.Option{app.WithCacheOptions(src.install)}
	ctx, cancel := context.WithCancel(ctx)
	s := &server{cluster: c, source: src, url: fmt.Sprintf("https://127.0.0.1:%d", port), caFile: caFile,
		cancel: cancel, done: make(chan error, 1)}
	start := time.Now()
	go func() {
		s.done <- app.Run(ctx, cfg, append([]app.Option{
			// Nothing listens there: a live read (a cache miss) fails
			// the request, and the benchmark with it.
			app.WithRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}),
			app.WithHost("127.0.0.1"),
			app.WithLogger(logr.Discard()),
			app.WithMetricsRegistry(reg),
		}, cacheOpts...)...)
	}()
	if err := s.waitReady(reg, 15*time.Minute); err != nil {
		s.Stop()
		return nil, err
	}
	s.fill = time.Since(start)
	return s, nil
}

// waitReady waits for what the server's /readyz checks: the caches synced
// (its spreadguard_cache_synced gauge) and the webhook serving TLS.
func (s *server) waitReady(reg prometheus.Gatherer, timeout time.Duration) error {
	tlsCfg, err := clientTLS(s.caFile)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-s.done:
			return fmt.Errorf("the server stopped before it was ready: %v", err)
		default:
		}
		if synced(reg) {
			conn, err := tls.Dial("tcp", s.url[len("https://"):], tlsCfg)
			if err == nil {
				conn.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server was not ready after %s (pods streamed: %d of %d)",
				timeout, s.source.Sent("Pod"), s.cluster.Pods())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// synced reads the server's spreadguard_cache_synced gauge.
func synced(reg prometheus.Gatherer) bool {
	families, err := reg.Gather()
	if err != nil {
		return false
	}
	for _, f := range families {
		if f.GetName() == "spreadguard_cache_synced" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	return false
}

// Stop shuts the server down and waits for it.
func (s *server) Stop() error {
	s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-time.After(time.Minute):
		return errors.New("the server did not stop within a minute")
	}
}

// freePort returns a port on 127.0.0.1 that nothing listens on.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeCerts writes a CA (ca.crt) and a serving certificate for 127.0.0.1
// signed by it (tls.crt, tls.key) into dir, with the ECDSA P-256 keys the
// chart's cert-manager Certificate asks for, and returns the CA's path.
func writeCerts(dir string) (string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generating the CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spreadguard-perf-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", fmt.Errorf("signing the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generating the serving key: %w", err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "spreadguard-webhook"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", fmt.Errorf("parsing the CA: %w", err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("encoding the serving key: %w", err)
	}
	files := map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: leafDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	}
	for name, block := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return filepath.Join(dir, "ca.crt"), nil
}

// clientTLS is the TLS configuration of kube-apiserver calling a webhook:
// the CA bundle, TLS 1.2 at least, HTTP/1.1.
func clientTLS(caFile string) (*tls.Config, error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}
