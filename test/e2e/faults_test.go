//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const (
	// envWebhookURL is the webhook's address when it runs as a local
	// process; envRenewCertCmd renews its serving certificate on disk, as
	// cert-manager does. The renewal scenario needs both.
	envWebhookURL   = "SPREADGUARD_E2E_WEBHOOK_URL"
	envRenewCertCmd = "SPREADGUARD_E2E_RENEW_CERT_CMD"
)

// loadResult counts what a stream of pod creates met.
type loadResult struct {
	sent, failed, unmutated, slow int64
}

// createStream dry-runs pods selected by the Service "load" at rate per
// second for d: each must be admitted and mutated, which proves the API
// server reached the webhook (under failurePolicy Ignore a failed call
// would admit the pod unmutated). A create slower than slowAfter counts as
// slow.
func (f *framework) createStream(ctx context.Context, rate int, d, slowAfter time.Duration) loadResult {
	var r loadResult
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			atomic.AddInt64(&r.sent, 1)
			start := time.Now()
			p, err := f.dryRunCreate(ctx, k8s, pod(spreadtest.MakePod().Name(fmt.Sprintf("load-%d", i)).Label("app", "load")))
			if time.Since(start) > slowAfter {
				atomic.AddInt64(&r.slow, 1)
			}
			switch {
			case err != nil:
				atomic.AddInt64(&r.failed, 1)
				f.t.Logf("create %d failed: %v", i, err)
			case p.Annotations[policyAnnotation] == "":
				atomic.AddInt64(&r.unmutated, 1)
			}
		}()
	}
	wg.Wait()
	return r
}

// servedSerial is the serial number of the certificate the webhook presents.
func servedSerial(t *testing.T, webhookURL string) string {
	t.Helper()
	u, err := url.Parse(webhookURL)
	if err != nil {
		t.Fatal(err)
	}
	// Only the certificate is read; the API server verifies it for real.
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec
	if err != nil {
		t.Fatalf("TLS to %s: %v", u.Host, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func certificateRenewedUnderLoad(t *testing.T) {
	webhookURL := os.Getenv(envWebhookURL)
	if webhookURL == "" || os.Getenv(envRenewCertCmd) == "" {
		t.Skipf("%s/%s unset: the serving certificate is not on this machine's disk", envWebhookURL, envRenewCertCmd)
	}
	f := newFramework(t)
	f.create(hardZonePolicy(v1alpha1.ActionDeny))
	f.create(service(spreadtest.MakeService().Name("load").Selector("app", "load")))
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	f.eventually(policyChangeTimeout, "the webhook is serving", f.serving)
	before := servedSerial(t, webhookURL)

	const rate, duration = 20, 6 * time.Second
	renewed := make(chan error, 1)
	go func() {
		time.Sleep(duration / 3)
		renewed <- runHook(t.Context(), t, envRenewCertCmd)
	}()
	r := f.createStream(t.Context(), rate, duration, time.Second)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	t.Logf("serving certificate renewed under %d creates/s for %s: %d creates, %d failed, %d admitted without the webhook, %d slower than 1s",
		rate, duration, r.sent, r.failed, r.unmutated, r.slow)
	if r.failed != 0 || r.unmutated != 0 {
		t.Errorf("%d creates failed and %d missed the webhook while its certificate was renewed, want none", r.failed, r.unmutated)
	}
	f.eventually(10*time.Second, "the webhook presents the renewed certificate without a restart", func(context.Context) error {
		if after := servedSerial(t, webhookURL); after == before {
			return fmt.Errorf("still serial %s", before)
		}
		return nil
	})
}

const (
	// envExtraStartCmd starts a second webhook replica (arguments: its
	// port and its probe port); envExtraKillCmd kills it (argument: the
	// port). The replica scenario needs both, and envWebhookURL.
	envExtraStartCmd = "SPREADGUARD_E2E_EXTRA_START_CMD"
	envExtraKillCmd  = "SPREADGUARD_E2E_EXTRA_KILL_CMD"
)

// roundRobin forwards each TCP connection to the next of backends, as a
// Service spreads connections over its endpoints.
type roundRobin struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	// conns counts the connections forwarded to each backend.
	conns []atomic.Int64
}

func newRoundRobin(t *testing.T, backends ...string) *roundRobin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &roundRobin{ln: ln, backends: backends, conns: make([]atomic.Int64, len(backends))}
	go p.serve()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *roundRobin) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			i := p.next.Add(1) % uint64(len(p.backends))
			out, err := net.DialTimeout("tcp", p.backends[i], 2*time.Second)
			if err != nil {
				return
			}
			p.conns[i].Add(1)
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			<-done
		}()
	}
}

func freeLocalPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func replicaKilledMidBurst(t *testing.T) {
	webhookURL := os.Getenv(envWebhookURL)
	if webhookURL == "" || os.Getenv(envExtraStartCmd) == "" || os.Getenv(envExtraKillCmd) == "" {
		t.Skipf("%s/%s/%s unset: no second local replica can be started", envWebhookURL, envExtraStartCmd, envExtraKillCmd)
	}
	f := newFramework(t)
	// The namespace is left out of spreadguard's own configurations and
	// sent, through copies of them, to two replicas behind one address.
	var ns v1.Namespace
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: f.ns}, &ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["spreadguard.io/ignore"] = "true"
	if err := k8s.Update(t.Context(), &ns); err != nil {
		t.Fatal(err)
	}
	port, probe := freeLocalPort(t), freeLocalPort(t)
	if err := runHook(t.Context(), t, envExtraStartCmd, strconv.Itoa(port), strconv.Itoa(probe)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := runHook(context.Background(), t, envExtraKillCmd, strconv.Itoa(port)); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(webhookURL)
	if err != nil {
		t.Fatal(err)
	}
	lb := newRoundRobin(t, u.Host, fmt.Sprintf("127.0.0.1:%d", port))
	f.create(hardZonePolicy(v1alpha1.ActionDeny))
	f.create(service(spreadtest.MakeService().Name("load").Selector("app", "load")))
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	f.copiesAt("replicas", "https://"+lb.ln.Addr().String())
	f.eventually(policyChangeTimeout, "the two replicas are serving", f.serving)

	const rate, duration = 20, 6 * time.Second
	killed := make(chan error, 1)
	var beforeKill int64
	go func() {
		time.Sleep(duration / 3)
		beforeKill = lb.conns[1].Load()
		killed <- runHook(context.Background(), t, envExtraKillCmd, strconv.Itoa(port))
	}()
	r := f.createStream(t.Context(), rate, duration, time.Second)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if beforeKill == 0 {
		t.Errorf("the second replica had been sent no connection before it was killed; the scenario tested nothing")
	}
	t.Logf("one of two replicas killed under %d creates/s for %s: %d creates, %d failed, %d admitted without the webhook, %d slower than 1s; connections to the replicas: %d and %d (%d to the killed one before it died)",
		rate, duration, r.sent, r.failed, r.unmutated, r.slow, lb.conns[0].Load(), lb.conns[1].Load(), beforeKill)
	if r.failed != 0 {
		t.Errorf("%d creates failed while a replica died, want none under failurePolicy Ignore", r.failed)
	}
}

// envRestartAPIServerCmd restarts the cluster's kube-apiserver and returns
// once it is ready again; the restart scenario needs it.
const envRestartAPIServerCmd = "SPREADGUARD_E2E_RESTART_APISERVER_CMD"

func apiServerRestarted(t *testing.T) {
	if os.Getenv(envRestartAPIServerCmd) == "" {
		t.Skipf("%s unset: this cluster's API server cannot be restarted from here", envRestartAPIServerCmd)
	}
	f := newFramework(t)
	// The probe's own constraint: zones, maxSkew 1, minDomains 4 over 3
	// zones, so the global minimum is 0. With no pod of its kind it fits
	// anywhere (0 + 1 - 0 <= 1); with one in each zone nowhere (1 + 1 - 0).
	probe := pod(spreadtest.MakePod().Namespace(f.ns).Name("probe").Label("app", "restart").
		SpreadConstraint(spreadtest.Constraint(1, zoneKey).DoNotSchedule().MinDomains(4).MatchLabel("app", "restart").Obj()))
	if _, err := f.dryRunCreate(t.Context(), k8s, probe); err != nil {
		t.Fatalf("before the restart, with no pod of its kind: %v, want the probe admitted", err)
	}

	start := time.Now()
	if err := runHook(t.Context(), t, envRestartAPIServerCmd); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted and ready in %s", time.Since(start).Round(time.Millisecond))

	// Pods the webhook can only know of from events after the restart.
	for _, zone := range cluster.zones {
		f.create(pod(spreadtest.MakePod().Name("restart-"+zone).Label("app", "restart").Node(cluster.nodesByZone[zone][0])))
	}
	var webhookErr error
	created := time.Now()
	f.eventually(30*time.Second, "the webhook's informers resync: the probe is now denied", func(ctx context.Context) error {
		_, webhookErr = f.dryRunCreate(ctx, k8s, probe)
		if !deniedByWebhook(webhookErr) {
			return fmt.Errorf("want a denial, got %v", webhookErr)
		}
		return nil
	})
	t.Logf("the webhook denied the probe %s after the pods that make it unplaceable were created", time.Since(created).Round(time.Millisecond))

	// The same question, offline, on a dump of the cluster as it is now.
	dump, podFile := f.dumpCluster(), filepath.Join(t.TempDir(), "probe.yaml")
	stored := probe.DeepCopy()
	stored.APIVersion, stored.Kind = "v1", "Pod"
	writeYAML(t, podFile, stored)
	cmd := exec.CommandContext(t.Context(), kubectlSpread(t), "check", "--cluster", dump, "--pod", podFile, "-o", "json")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var got struct {
		Allowed bool `json:"allowed"`
	}
	if jerr := json.Unmarshal([]byte(stdout.String()), &got); jerr != nil {
		t.Fatalf("%s: %v (exit %v)\nstdout: %s\nstderr: %s", cmd, jerr, err, stdout.String(), stderr.String())
	}
	if got.Allowed {
		t.Errorf("kubectl-spread check on a dump allows the probe the webhook denies after the restart (%v)", webhookErr)
	}
}

// dumpCluster writes what the webhook reads for a pod of the test
// namespace (lookup.Read, as kubectl-spread explain reads it) as a v1 List,
// the file kubectl-spread check reads, and returns its path.
func (f *framework) dumpCluster() string {
	t := f.t
	t.Helper()
	objs, err := lookup.Read(t.Context(), k8s, f.ns)
	if err != nil {
		t.Fatal(err)
	}
	list := v1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, obj := range objs {
		o := obj.(client.Object)
		kind, _ := cache.KindOf(o)
		o.SetManagedFields(nil)
		o.GetObjectKind().SetGroupVersionKind(kind.GVK)
		list.Items = append(list.Items, runtime.RawExtension{Object: o})
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	writeYAML(t, path, &list)
	return path
}

func writeYAML(t *testing.T, path string, obj any) {
	t.Helper()
	data, err := sigsyaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
