//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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
	var s loadStream
	return s.run(ctx, f, rate, time.After(d), slowAfter)
}

// loadStream is a stream of creates as createStream sends them, until a
// channel says stop, which also tells how many are in flight at a moment
// and how many have been sent so far.
type loadStream struct {
	inFlight, started atomic.Int64
}

func (s *loadStream) run(ctx context.Context, f *framework, rate int, stop <-chan time.Time, slowAfter time.Duration) loadResult {
	var r loadResult
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			wg.Wait()
			r.sent = int64(i)
			return r
		case <-tick.C:
		}
		wg.Add(1)
		s.inFlight.Add(1)
		s.started.Add(1)
		go func() {
			defer wg.Done()
			defer s.inFlight.Add(-1)
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
				f.t.Logf("create %d admitted without the webhook's mutation", i)
			}
		}()
	}
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
	// port and its probe port) with the chart's configuration as
	// installed; envExtraKillCmd kills it (argument: the port). The
	// replica scenario needs them, envExtraStopCmd and envWebhookURL.
	envExtraStartCmd = "SPREADGUARD_E2E_EXTRA_START_CMD"
	envExtraKillCmd  = "SPREADGUARD_E2E_EXTRA_KILL_CMD"
	// envExtraStopCmd stops it as the kubelet stops a pod (argument: the
	// port): SIGTERM, and it must exit within the grace period.
	envExtraStopCmd = "SPREADGUARD_E2E_EXTRA_STOP_CMD"
)

// roundRobin forwards each TCP connection to the next of its backends that
// is ready, as a Service spreads connections over its endpoints: a backend
// with a readiness URL is an endpoint only while that URL answers 200, as
// kube-proxy keeps only the ready endpoints of a Service, and checked every
// probePeriod. With no backend ready, a connection is closed at once.
type roundRobin struct {
	ln   net.Listener
	mu   sync.Mutex
	all  []*backend
	next atomic.Uint64
}

// probePeriod is how often the front asks each backend's /readyz.
const probePeriod = 100 * time.Millisecond

// backend is one endpoint of a roundRobin.
type backend struct {
	addr  string
	ready atomic.Bool
	// conns counts the connections forwarded to it; open, those of them
	// not yet closed.
	conns, open atomic.Int64
	// dialFailures counts the connections it was chosen for and refused.
	dialFailures atomic.Int64
	// unready lists when its readiness was seen failing after it had
	// passed, and why.
	mu      sync.Mutex
	unready []unreadySpell
}

// unreadySpell is a readiness check that failed after one had passed.
type unreadySpell struct {
	at  time.Time
	why string
	// serving says whether the backend's port still accepted a
	// connection right after: a replica that stops well is not ready
	// while it still serves, not only once its listener has closed (which
	// fails every readiness check anyway).
	serving bool
}

// unreadyServingFrom returns when it was first seen not ready while still
// serving, at or after from, or the zero time. A spell before from (a
// probe that timed out on a busy machine) says nothing of how the replica
// stops.
func (b *backend) unreadyServingFrom(from time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.unready {
		if u.serving && !u.at.Before(from) {
			return u.at
		}
	}
	return time.Time{}
}

// unreadyBefore returns the spells seen before t, for the log.
func (b *backend) unreadyBefore(t time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, u := range b.unready {
		if u.at.Before(t) {
			out = append(out, fmt.Sprintf("%s before: %s", t.Sub(u.at).Round(time.Millisecond), u.why))
		}
	}
	return out
}

// newRoundRobin starts a front for backends that are always ready (no
// readiness URL).
func newRoundRobin(t *testing.T, addrs ...string) *roundRobin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &roundRobin{ln: ln}
	for _, a := range addrs {
		b := &backend{addr: a}
		b.ready.Store(true)
		p.all = append(p.all, b)
	}
	go p.serve()
	t.Cleanup(func() { ln.Close() })
	return p
}

// add makes addr a backend, routed to while readyz answers 200, which is
// checked until the test ends.
func (p *roundRobin) add(t *testing.T, addr, readyz string) *backend {
	t.Helper()
	b := &backend{addr: addr}
	p.mu.Lock()
	p.all = append(p.all, b)
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		// The kubelet's default probe timeout.
		c := &http.Client{Timeout: time.Second}
		tick := time.NewTicker(probePeriod)
		defer tick.Stop()
		for {
			resp, err := c.Get(readyz)
			ok := err == nil && resp.StatusCode == http.StatusOK
			why := ""
			switch {
			case err != nil:
				why = err.Error()
			case !ok:
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				why = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
			}
			if resp != nil {
				resp.Body.Close()
			}
			if b.ready.Swap(ok) && !ok {
				spell := unreadySpell{at: time.Now(), why: why}
				if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					conn.Close()
					spell.serving = true
				}
				b.mu.Lock()
				b.unready = append(b.unready, spell)
				b.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return b
}

// pick returns the next ready backend, or nil.
func (p *roundRobin) pick() *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.all {
		b := p.all[p.next.Add(1)%uint64(len(p.all))]
		if b.ready.Load() {
			return b
		}
	}
	return nil
}

func (p *roundRobin) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			b := p.pick()
			if b == nil {
				return
			}
			out, err := net.DialTimeout("tcp", b.addr, 2*time.Second)
			if err != nil {
				b.dialFailures.Add(1)
				return
			}
			b.conns.Add(1)
			b.open.Add(1)
			defer b.open.Add(-1)
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

// extraReplica is a second local replica of the webhook, started with the
// chart's configuration as it is installed.
type extraReplica struct {
	port, probe int
}

func (r extraReplica) addr() string   { return fmt.Sprintf("127.0.0.1:%d", r.port) }
func (r extraReplica) readyz() string { return fmt.Sprintf("http://127.0.0.1:%d/readyz", r.probe) }

// startExtraReplica starts one with envExtraStartCmd, of binary when given
// (a released webhook; this checkout's otherwise), killed when the test
// ends if it still runs.
func startExtraReplica(t *testing.T, binary ...string) extraReplica {
	t.Helper()
	r := extraReplica{port: freeLocalPort(t), probe: freeLocalPort(t)}
	if err := runHook(t.Context(), t, envExtraStartCmd, append([]string{strconv.Itoa(r.port), strconv.Itoa(r.probe)}, binary...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := runHook(context.Background(), t, envExtraKillCmd, strconv.Itoa(r.port)); err != nil {
			t.Error(err)
		}
	})
	return r
}

func replicaStoppedMidBurst(t *testing.T) {
	webhookURL := os.Getenv(envWebhookURL)
	if webhookURL == "" || os.Getenv(envExtraStartCmd) == "" || os.Getenv(envExtraKillCmd) == "" || os.Getenv(envExtraStopCmd) == "" {
		t.Skipf("%s/%s/%s/%s unset: no second local replica can be started", envWebhookURL, envExtraStartCmd, envExtraKillCmd, envExtraStopCmd)
	}
	u, err := url.Parse(webhookURL)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// stop is the hook that ends the second replica.
		stop string
		// graceful says whether it goes as a rollout stops a pod
		// (SIGTERM): not ready first, then drained, so that no create
		// may miss the webhook; a kill (SIGKILL) may cost at most the
		// creates in flight at that moment.
		graceful bool
	}{
		{name: "killed with SIGKILL, as a crash -> none fails, none misses the webhook beyond the creates in flight at the kill", stop: envExtraKillCmd},
		{name: "stopped with SIGTERM, as a rollout or a drain -> not ready before its port closes; none fails, none misses the webhook", stop: envExtraStopCmd, graceful: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFramework(t)
			// The namespace is left out of spreadguard's own
			// configurations and sent, through copies of them, to two
			// replicas behind one address.
			f.hideFromOwnWebhooks()
			second := startExtraReplica(t)
			// The first replica is the suite's own, which the front takes
			// for always ready; the second is routed to while ready.
			lb := newRoundRobin(t, u.Host)
			stopped := lb.add(t, second.addr(), second.readyz())
			f.create(hardZonePolicy(v1alpha1.ActionDeny))
			f.create(service(spreadtest.MakeService().Name("load").Selector("app", "load")))
			f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
			f.copiesAt("replicas", "https://"+lb.ln.Addr().String())
			f.eventually(policyChangeTimeout, "the two replicas are serving", f.serving)

			const rate, duration = 20, 8 * time.Second
			var stream loadStream
			type ended struct {
				err                     error
				inFlight, conns         int64
				signalled, exited       time.Time
				started, startedByClose int64
				// closeErr says the front's connections to the replica
				// did not close after it ended.
				closeErr error
			}
			done := make(chan ended, 1)
			go func() {
				time.Sleep(duration / 4)
				e := ended{inFlight: stream.inFlight.Load(), started: stream.started.Load(), conns: stopped.conns.Load(), signalled: time.Now()}
				e.err = runHook(context.Background(), t, tc.stop, strconv.Itoa(second.port))
				e.exited = time.Now()
				// A crash loses what the API server had sent, or sends
				// before it reads the close, on a connection to the dead
				// replica: every create in flight at the signal or sent
				// until the front has closed those connections.
				// If they never close, the creates sent meanwhile would
				// all count as that cost, and the bound would hold nothing.
				e.closeErr = waitClosed(stopped.open.Load, 5*time.Second, 5*time.Millisecond)
				e.startedByClose = stream.started.Load()
				done <- e
			}()
			r := stream.run(t.Context(), f, rate, time.After(duration), time.Second)
			e := <-done
			if e.err != nil {
				t.Fatal(e.err)
			}
			t.Logf("one of two replicas %s under %d creates/s for %s: %d creates, %d failed, %d admitted without the webhook, %d slower than 1s, %d in flight when it was signalled and %d sent until its connections were seen closed; connections to the replicas: %d and %d (%d to the second before the signal, %d refused to it)",
				map[bool]string{true: "stopped", false: "killed"}[tc.graceful], rate, duration, r.sent, r.failed, r.unmutated, r.slow, e.inFlight, e.startedByClose-e.started,
				lb.all[0].conns.Load(), stopped.conns.Load(), e.conns, stopped.dialFailures.Load())
			if e.conns == 0 {
				t.Errorf("the second replica had been sent no connection before it was stopped; the scenario tested nothing")
			}
			if r.failed != 0 {
				t.Errorf("%d creates failed, want none under failurePolicy Ignore", r.failed)
			}
			if e.closeErr != nil {
				t.Errorf("after the replica was %s: %v; the creates that may have met it cannot be bounded", map[bool]string{true: "stopped", false: "killed"}[tc.graceful], e.closeErr)
			}
			if !tc.graceful {
				// What a crash may cost: the creates in flight while the
				// replica died (at the signal, or sent before its
				// connections were seen closed), and one for each
				// connection routed to it before it was seen not ready.
				sentByClose := e.startedByClose - e.started
				dialed := stopped.dialFailures.Load()
				if may := e.inFlight + sentByClose + dialed; r.unmutated > may {
					t.Errorf("%d creates admitted without the webhook, more than the %d that may have met the dead replica: %d in flight at the SIGKILL, %d sent before its connections were closed, %d connections routed to it after it died",
						r.unmutated, may, e.inFlight, sentByClose, dialed)
				}
				return
			}
			if r.unmutated != 0 {
				t.Errorf("%d creates admitted without the webhook while a replica stopped gracefully, want none", r.unmutated)
			}
			if n := stopped.dialFailures.Load(); n != 0 {
				t.Errorf("%d connections were sent to the stopping replica after its port closed: it closed before it stopped being ready", n)
			}
			if before := stopped.unreadyBefore(e.signalled); len(before) > 0 {
				t.Logf("the stopping replica was seen not ready before its SIGTERM: %s", strings.Join(before, "; "))
			}
			if unready := stopped.unreadyServingFrom(e.signalled); unready.IsZero() || unready.After(e.exited) {
				t.Errorf("the stopping replica was not seen not ready while it still served, between its SIGTERM and its exit (first seen so at %v, exited at %v)", unready, e.exited)
			} else {
				t.Logf("the stopping replica was not ready %s after SIGTERM and exited %s after it",
					unready.Sub(e.signalled).Round(time.Millisecond), e.exited.Sub(e.signalled).Round(time.Millisecond))
			}
		})
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
