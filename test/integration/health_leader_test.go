//go:build integration

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// healthController is one replica of the webhook with the audit on, run in-process
// beside the suite's, recording its audit passes.
type healthController struct {
	name   string
	mu     sync.Mutex
	passes []spreadhealth.Pass
	done   chan error
	// stop stops the replica, as a rollout stops a pod.
	stop func()
}

func (a *healthController) observe(p spreadhealth.Pass) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.passes = append(a.passes, p)
}

// record returns the passes so far.
func (a *healthController) record() []spreadhealth.Pass {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.passes)
}

// startHealthControllers runs n replicas competing for the Lease in leaseNS, with
// short audit periods, until the test ends.
func startHealthControllers(t *testing.T, leaseNS string, n int) []*healthController {
	t.Helper()
	return startHealthControllersWith(t, leaseNS, n)
}

// startHealthControllersWith is startHealthControllers with opts after the replicas' own.
func startHealthControllersWith(t *testing.T, leaseNS string, n int, opts ...app.Option) []*healthController {
	t.Helper()
	var out []*healthController
	for i := range n {
		port := freePort()
		if port == 0 {
			t.Fatal("finding a free port")
		}
		ctx, cancel := context.WithCancel(context.Background())
		a := &healthController{name: fmt.Sprintf("replica-%d", i), done: make(chan error, 1), stop: cancel}
		cfg := app.NewConfig()
		cfg.Port = port
		cfg.CertDir = suite.certDir
		cfg.HealthProbeBindAddress = "0"
		cfg.MetricsBindAddress = "0"
		cfg.LeaderElectionNamespace = leaseNS
		// The audit's replicas: the keeper's pod patches (TestDeletionCostKeeper)
		// would mix with the audit's own requests these tests count.
		cfg.DeletionCost = false
		go func() {
			a.done <- app.Run(ctx, cfg, append([]app.Option{
				app.WithRESTConfig(suite.restConfig),
				app.WithHost("127.0.0.1"),
				app.WithLogger(ctrl.Log.WithName(a.name)),
				app.WithMetricsRegistry(prometheus.NewRegistry()),
				app.WithHealthPeriods(time.Minute, 200*time.Millisecond),
				app.WithHealthObserver(a.observe),
			}, opts...)...)
		}()
		out = append(out, a)
	}
	t.Cleanup(func() {
		for _, a := range out {
			a.stop()
		}
		for _, a := range out {
			select {
			case err := <-a.done:
				if err != nil {
					t.Errorf("%s stopped with: %v", a.name, err)
				}
			case <-time.After(time.Minute):
				t.Errorf("%s did not stop within a minute", a.name)
			}
		}
	})
	return out
}

// boundPod is a pod of app=web already bound to node, carrying a hard
// zone constraint that leaves cordoned nodes out.
func boundPod(ns, name, node string) *v1.Pod { return boundPodOf(ns, "web", name, node) }

// boundPodOf is boundPod for the pods of app.
func boundPodOf(ns, app, name, node string) *v1.Pod {
	honor := v1.NodeInclusionPolicyHonor
	c := spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", app).Obj()
	c.NodeTaintsPolicy = &honor
	return podObj(spreadtest.MakePod().Namespace(ns).Name(name).Label("app", app).Node(node).SpreadConstraint(c))
}

func policyStatus(ctx context.Context, ns string) (*v1alpha1.SpreadPolicy, error) {
	p := &v1alpha1.SpreadPolicy{}
	err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "zones"}, p)
	return p, err
}

// waitForStatus waits until the policy's status, less the condition's
// transition time, is want.
func waitForStatus(t *testing.T, ns string, want v1alpha1.PolicyStatus) *v1alpha1.SpreadPolicy {
	t.Helper()
	var got *v1alpha1.SpreadPolicy
	var diff string
	eventually(t, "the policy's status", func(ctx context.Context) (bool, error) {
		p, err := policyStatus(ctx, ns)
		if err != nil {
			return false, err
		}
		got = p
		diff = cmp.Diff(want, p.Status, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"))
		return diff == "", nil
	})
	if diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}
	// kubectl shows a count the API server never stored as an empty
	// column: every count must be there, 0 included.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(v1alpha1.KindSpreadPolicy))
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "zones"}, u); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"workloads", "spread", "skewed", "uncovered"} {
		if _, found, _ := unstructured.NestedInt64(u.Object, "status", f); !found {
			t.Errorf("status.%s is not stored", f)
		}
	}
	return got
}

func readyStatus(spread, skewed int32) v1alpha1.PolicyStatus {
	return v1alpha1.PolicyStatus{
		ObservedGeneration: 1, Workloads: spread + skewed, Spread: spread, Skewed: skewed,
		Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Audited", ObservedGeneration: 1,
			Message: fmt.Sprintf("%d workloads: %d spread, %d skewed, 0 uncovered", spread+skewed, spread, skewed)}},
	}
}

// TestHealthWritesPolicyStatusAndReportsOnTheLeaderOnly starts without the
// openreports CRD and installs it itself, on the package's one API server:
// it must run before health_requests_test.go, which installs the CRD too
// (go test runs the files in the order of their names).
func TestHealthWritesPolicyStatusAndReportsOnTheLeaderOnly(t *testing.T) {
	ensureZoneNodes(t)
	ns := newNamespace(t, "audit")
	leases := newNamespace(t, "audit-leases")
	create(t, zonePolicy(ns).Obj())
	rs := replicaSet(ns, "web", map[string]string{"app": "web"})
	create(t, rs)
	create(t, boundPod(ns, "web-1", "a1"))
	create(t, boundPod(ns, "web-2", "a1"))
	api := replicaSet(ns, "api", map[string]string{"app": "api"})
	create(t, api)
	create(t, boundPodOf(ns, "api", "api-1", "a1"))
	create(t, boundPodOf(ns, "api", "api-2", "b1"))
	healthControllers := startHealthControllers(t, leases, 2)

	t.Run("two pods piled in zone-a while zone-b is empty make the workload skewed", func(t *testing.T) {
		waitForStatus(t, ns, readyStatus(1, 1))
	})

	t.Run("one of them moved to zone-b makes it spread", func(t *testing.T) {
		if err := suite.client.Delete(t.Context(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-2"}},
			client.GracePeriodSeconds(0)); err != nil {
			t.Fatalf("deleting pod web-2: %v", err)
		}
		create(t, boundPod(ns, "web-3", "b1"))
		waitForStatus(t, ns, readyStatus(2, 0))
	})

	t.Run("only the replica holding the Lease audits and writes", func(t *testing.T) {
		lease := &coordinationv1.Lease{}
		if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: leases, Name: spreadhealth.LeaseName}, lease); err != nil {
			t.Fatalf("reading the Lease: %v", err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Fatalf("the Lease has no holder")
		}
		var leaders, writers []string
		for _, a := range healthControllers {
			passes := a.record()
			if len(passes) > 0 {
				leaders = append(leaders, a.name)
			}
			if slices.ContainsFunc(passes, func(p spreadhealth.Pass) bool { return len(p.Writes) > 0 }) {
				writers = append(writers, a.name)
			}
		}
		if len(leaders) != 1 || !slices.Equal(leaders, writers) {
			t.Errorf("replicas that audited %v, that wrote status %v; want one and the same", leaders, writers)
		}
	})

	t.Run("a pass that finds what the last one found writes nothing", func(t *testing.T) {
		before, err := policyStatus(t.Context(), ns)
		if err != nil {
			t.Fatal(err)
		}
		leader := leaderOf(t, healthControllers)
		seen := len(leader.record())
		// A pod change the counts do not see still starts a pass.
		touchPod(t, ns, "web-1")
		eventually(t, "an audit pass after the pod change", func(context.Context) (bool, error) {
			return len(leader.record()) > seen, nil
		})
		for _, p := range leader.record()[seen:] {
			if len(p.Writes) > 0 {
				t.Errorf("a pass wrote %v although nothing changed", p.Writes)
			}
		}
		after, err := policyStatus(t.Context(), ns)
		if err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("the policy's resourceVersion moved from %s to %s", before.ResourceVersion, after.ResourceVersion)
		}
	})

	leader := leaderOf(t, healthControllers)
	t.Run("without the openreports CRD no Report is written", func(t *testing.T) {
		for _, p := range leader.record() {
			if len(p.Reports) > 0 {
				t.Errorf("a pass wrote the Reports of %v", p.Reports)
			}
		}
	})

	t.Run("once the CRD is installed the namespace gets one Report with a result per workload", func(t *testing.T) {
		if _, err := envtest.InstallCRDs(suite.restConfig, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join("testdata", "openreports")}, ErrorIfPathMissing: true,
		}); err != nil {
			t.Fatalf("installing the openreports CRD: %v", err)
		}
		touchPod(t, ns, "api-1")
		waitForReport(t, ns, []reportResult{{"api", "pass"}, {"web", "pass"}}, health.ReportSummary{Pass: 2})
	})

	t.Run("pods piling into zone-a again fail the workload's result", func(t *testing.T) {
		create(t, boundPod(ns, "web-4", "a1"))
		create(t, boundPod(ns, "web-5", "a1"))
		waitForReport(t, ns, []reportResult{{"api", "pass"}, {"web", "fail"}}, health.ReportSummary{Pass: 1, Fail: 1})
	})

	t.Run("a deleted workload leaves the Report", func(t *testing.T) {
		for _, obj := range []client.Object{
			&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-1"}},
			&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-2"}},
			api,
		} {
			if err := suite.client.Delete(t.Context(), obj, client.GracePeriodSeconds(0)); err != nil {
				t.Fatalf("deleting %s: %v", obj.GetName(), err)
			}
		}
		waitForReport(t, ns, []reportResult{{"web", "fail"}}, health.ReportSummary{Fail: 1})
	})

	t.Run("when the leader stops, the other replica takes the Lease and keeps status and Report current", func(t *testing.T) {
		leader.stop()
		var next *healthController
		for _, a := range healthControllers {
			if a != leader {
				next = a
			}
		}
		eventually(t, "the other replica audits", func(context.Context) (bool, error) {
			return len(next.record()) > 0, nil
		})
		for _, name := range []string{"web-4", "web-5"} {
			if err := suite.client.Delete(t.Context(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				client.GracePeriodSeconds(0)); err != nil {
				t.Fatalf("deleting pod %s: %v", name, err)
			}
		}
		waitForStatus(t, ns, readyStatus(1, 0))
		waitForReport(t, ns, []reportResult{{"web", "pass"}}, health.ReportSummary{Pass: 1})
		if !slices.ContainsFunc(next.record(), func(p spreadhealth.Pass) bool { return len(p.Writes) > 0 && len(p.Reports) > 0 }) {
			t.Errorf("the new leader's passes %+v wrote no status and no Report", next.record())
		}
	})
}

// leaderOf returns the one healthController that audits.
func leaderOf(t *testing.T, healthControllers []*healthController) *healthController {
	t.Helper()
	for _, a := range healthControllers {
		if len(a.record()) > 0 {
			return a
		}
	}
	t.Fatal("no replica audits")
	return nil
}

// touchPod labels a pod anew: a change the counts do not see (the
// selectors do not read the label) that still starts an audit pass.
func touchPod(t *testing.T, ns, name string) {
	t.Helper()
	pod := storedPod(t, ns, name)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["touched"] = strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := suite.client.Update(t.Context(), pod); err != nil {
		t.Fatalf("labelling pod %s: %v", name, err)
	}
}

// reportResult is the gist of one result of a Report: the ReplicaSet and
// the outcome.
type reportResult struct{ Name, Result string }

// waitForReport waits until the namespace's Report holds want, in order,
// and summary.
func waitForReport(t *testing.T, ns string, want []reportResult, summary health.ReportSummary) {
	t.Helper()
	var diff string
	eventually(t, "the namespace's Report", func(ctx context.Context) (bool, error) {
		r := &unstructured.Unstructured{}
		r.SetGroupVersionKind(schema.FromAPIVersionAndKind(health.ReportAPIVersion, health.ReportKind))
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: health.ReportName}, r); err != nil {
			return false, err
		}
		var got health.Report
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.Object, &got); err != nil {
			return false, err
		}
		var results []reportResult
		for _, res := range got.Results {
			results = append(results, reportResult{res.Resources[0].Name, res.Result})
		}
		diff = cmp.Diff(want, results) + cmp.Diff(summary, got.Summary) + cmp.Diff("spreadguard", got.Source)
		return diff == "", nil
	})
	if diff != "" {
		t.Fatalf("Report (-want +got):\n%s", diff)
	}
}
