//go:build integration

package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
	"github.com/spreadguard/spreadguard/pkg/health"
)

// requestCounter counts the requests a replica sends to the API server, by
// verb and resource ("LIST pods", "PATCH spreadpolicies/status"). Watches
// are left out (they are long-running, opened by the informers at start)
// and so are Leases (the election renews its own every two seconds).
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if key, ok := requestKey(req); ok {
			c.mu.Lock()
			c.counts[key]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// snapshot returns the counts so far.
func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKey names a request as "VERB resource[/subresource]", parsing
// /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and its /apis/GROUP/VERSION
// form; false for watches, Leases and what is not a resource (discovery).
func requestKey(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 || parts[0] == "leases" || req.URL.Query().Get("watch") == "true" {
		return "", false
	}
	resource := parts[0]
	if len(parts) == 3 {
		resource += "/" + parts[2]
	}
	verb := req.Method
	switch {
	case req.Method == http.MethodGet && len(parts) == 1:
		verb = "LIST"
	case req.Method == http.MethodPost:
		verb = "CREATE"
	case req.Method == http.MethodPut:
		verb = "UPDATE"
	}
	return verb + " " + resource, true
}

// diffCounts returns what after counted beyond before.
func diffCounts(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range after {
		if d := n - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// countedPasses records, for each audit pass of one replica, the requests
// the replica sent since the pass before it ended.
type countedPasses struct {
	counter *requestCounter
	mu      sync.Mutex
	last    map[string]int
	passes  []map[string]int
}

func (p *countedPasses) observe(spreadhealth.Pass) {
	now := p.counter.snapshot()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passes = append(p.passes, diffCounts(p.last, now))
	p.last = now
}

func (p *countedPasses) record() []map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.passes)
}

// waitPasses waits until n passes are recorded, and returns them.
func (p *countedPasses) waitPasses(t *testing.T, n int) []map[string]int {
	t.Helper()
	eventually(t, fmt.Sprintf("%d audit passes", n), func(context.Context) (bool, error) {
		return len(p.record()) >= n, nil
	})
	return p.record()
}

func TestHealthPassAtFiveHundredWorkloadsListsNothingAndWritesOnlyWhatChanged(t *testing.T) {
	const workloads = 500
	ensureZoneNodes(t)
	if _, err := envtest.InstallCRDs(suite.restConfig, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("testdata", "openreports")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("installing the openreports CRD: %v", err)
	}
	ns := newNamespace(t, "audit-requests")
	leases := newNamespace(t, "audit-requests-leases")
	create(t, zonePolicy(ns).Obj())
	// One-replica ReplicaSets whose template declares no constraint, each
	// pod carrying the constraint the webhook injected: the normal case.
	// Their pods alternate between zone-a and zone-b, each within maxSkew.
	for i := range workloads {
		app := fmt.Sprintf("web-%d", i)
		create(t, replicaSet(ns, app, map[string]string{"app": app}))
		create(t, boundPodOf(ns, app, app+"-1", []string{"a1", "b1"}[i%2]))
	}

	counter := &requestCounter{counts: map[string]int{}}
	restConfig := rest.CopyConfig(suite.restConfig)
	restConfig.Wrap(counter.wrap)
	passes := &countedPasses{counter: counter}
	startHealthControllersWith(t, leases, 1, app.WithRESTConfig(restConfig),
		// A full pass every 2 s, so that the test sees several.
		app.WithHealthPeriods(2*time.Second, 200*time.Millisecond),
		app.WithHealthObserver(passes.observe))

	// The first pass's window holds the informers' own lists, made once
	// when the replica starts: the passes after it are the audit's alone.
	steady := passes.waitPasses(t, 4)[2:4]
	t.Run("a full pass that finds what the last one found sends no request", func(t *testing.T) {
		for i, got := range steady {
			if diff := cmp.Diff(map[string]int{}, got); diff != "" {
				t.Errorf("pass %d requests (-want +got):\n%s", i+3, diff)
			}
		}
	})

	t.Run("one workload piling into zone-a costs one status patch and one Report update, and no list", func(t *testing.T) {
		seen := len(passes.record())
		create(t, boundPodOf(ns, "web-0", "web-0-2", "a1"))
		waitForStatus(t, ns, readyStatus(workloads-1, 1))
		// A full pass after the one that wrote: everything has settled.
		eventually(t, "two more passes", func(context.Context) (bool, error) {
			return len(passes.record()) >= seen+3, nil
		})
		total := map[string]int{}
		for _, p := range passes.record()[seen:] {
			for k, n := range p {
				total[k] += n
			}
		}
		want := map[string]int{"PATCH spreadpolicies/status": 1, "UPDATE reports": 1}
		if diff := cmp.Diff(want, total); diff != "" {
			t.Errorf("requests of the passes after the change (-want +got):\n%s", diff)
		}
	})

	t.Run("a Report deleted by someone else is created again by the pass its watch event asks for, with no list", func(t *testing.T) {
		seen := len(passes.record())
		before := counter.snapshot()
		report := &unstructured.Unstructured{}
		report.SetGroupVersionKind(schema.GroupVersionKind{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"})
		report.SetNamespace(ns)
		report.SetName(health.ReportName)
		if err := suite.client.Delete(t.Context(), report); err != nil {
			t.Fatalf("deleting the Report: %v", err)
		}
		eventually(t, "the Report written again", func(ctx context.Context) (bool, error) {
			err := suite.client.Get(ctx, client.ObjectKeyFromObject(report), report)
			return err == nil, client.IgnoreNotFound(err)
		})
		// Full passes after the one that wrote: nothing more is sent.
		eventually(t, "two more passes", func(context.Context) (bool, error) {
			return len(passes.record()) >= seen+3, nil
		})
		want := map[string]int{"CREATE reports": 1}
		if diff := cmp.Diff(want, diffCounts(before, counter.snapshot())); diff != "" {
			t.Errorf("requests of the replica since the deletion (-want +got):\n%s", diff)
		}
	})
	t.Logf("requests of each pass since the replica started: %v", passes.record())
}
