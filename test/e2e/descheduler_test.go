//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// envDescheduler names the descheduler binary (sigs.k8s.io/descheduler,
// which `make e2e` builds into bin/) that the rebalancing scenario runs;
// without it the scenario is skipped.
const envDescheduler = "SPREADGUARD_E2E_DESCHEDULER"

const (
	// rebalancePool labels and taints the rebalancing scenario's nodes
	// (poolKey=rebalancePool): only its pods select and tolerate them, so
	// that cordoning its zone c leaves every other scenario's nodes alone.
	rebalancePool = "rebalance"
	// rebalanceNodesPerZone is the local cluster's shape.
	rebalanceNodesPerZone = 2
	rebalanceReplicas     = 6
	// rebalanceMaxUnavailable is the PodDisruptionBudget's: at most this
	// many of the Deployment's pods may be unavailable through evictions.
	rebalanceMaxUnavailable = 1
	// deschedulerTimeout bounds one run of the descheduler: start, informer
	// sync, one pass, exit.
	deschedulerTimeout = time.Minute
)

// TestDeschedulerRebalance is the recovery of a Deployment's spread after a
// zone comes back, by the descheduler's RemovePodsViolatingTopologySpreadConstraint
// within a PodDisruptionBudget: spreadguard never evicts, and its audit
// reports the skew and then its end. It runs on kwok nodes of its own, 2 in
// each zone, so that cordoning its zone c disturbs no other scenario.
func TestDeschedulerRebalance(t *testing.T) {
	t.Parallel()
	bin := os.Getenv(envDescheduler)
	if bin == "" {
		t.Skipf("%s names no descheduler binary (make e2e builds one: hack/build-binaries.sh descheduler)", envDescheduler)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the descheduler named by %s: %v", envDescheduler, err)
	}
	zoneA, zoneB, zoneC := cluster.zones[0], cluster.zones[1], cluster.zones[2]
	ensureReportsCRD(t)
	// What a run killed halfway left behind.
	if err := removeRebalanceNodes(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Registered before the namespace, so that it runs after the namespace
	// is deleted: kwok removes the pods of a deleted namespace only from
	// nodes that still exist.
	var ns string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := poll(ctx, time.Minute, func(ctx context.Context) error { return noPodsLeft(ctx, ns) }); err != nil {
			t.Logf("the namespace's pods are not all gone before its nodes are removed: %v", err)
		}
		if err := removeRebalanceNodes(ctx); err != nil {
			t.Error(err)
		}
	})
	f := newFramework(t)
	ns = f.ns
	nodesOf := map[string][]string{}
	for _, zone := range cluster.zones {
		for i := 1; i <= rebalanceNodesPerZone; i++ {
			n := poolNode(fmt.Sprintf("e2e-%s-%s-%d", rebalancePool, zone, i), zone, rebalancePool)
			createReadyNodes(t, n)
			nodesOf[zone] = append(nodesOf[zone], n.Name)
		}
	}

	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	step := func(name string, fn func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, fn) {
			t.FailNow()
		}
	}

	step("6 replicas under a zone policy are placed 2/2/2 and carry the injected constraint with nodeTaintsPolicy Honor; the budget allows 1 disruption", func(t *testing.T) {
		f.create(hardZonePolicy(v1alpha1.ActionDeny))
		f.waitPolicyServed("zones")
		f.create(rebalanceBudget())
		replica := pod(spreadtest.MakePod().Name("web").Label("app", "web").
			NodeSelector(poolKey, rebalancePool).
			Toleration(poolKey, v1.TolerationOpEqual, rebalancePool, v1.TaintEffectNoSchedule))
		f.create(makeDeployment("web").Replicas(rebalanceReplicas).PodSpec(replica.Spec).Obj())
		pods := f.waitRunning(web, rebalanceReplicas, placeTimeout)
		f.expectZones(pods, map[string]int{zoneA: 2, zoneB: 2, zoneC: 2})
		for _, p := range pods {
			rs := controllerOf(t, &p, "ReplicaSet", &appsv1.ReplicaSet{}).(*appsv1.ReplicaSet)
			f.expectInjected(&p, f.ns+"/zones", injected([]v1alpha1.Constraint{hardZone()}, rs.Spec.Selector))
		}
		f.waitBudget(rebalanceMaxUnavailable)
	})

	avail := f.watchAvailability(t, web)

	step("zone c drained through the Eviction API within the budget: its 2 pods are replaced in zones a and b, 3/3/0, never fewer than 5 ready", func(t *testing.T) {
		for _, node := range nodesOf[zoneC] {
			if err := setCordon(t.Context(), node, true); err != nil {
				t.Fatal(err)
			}
		}
		before := avail.reset()
		evicted, refused := f.drain(t, web, nodesOf[zoneC])
		f.waitBudget(rebalanceMaxUnavailable)
		f.expectZones(f.waitRunning(web, rebalanceReplicas, placeTimeout), map[string]int{zoneA: 3, zoneB: 3, zoneC: 0})
		fewest, gone := avail.since(before)
		t.Logf("drain: %d evictions, %d refused by the budget and retried, fewest ready %d, pods deleted %d", evicted, refused, fewest, gone)
		if evicted != 2 || gone != 2 {
			t.Errorf("the drain evicted %d pods and %d were deleted, want the 2 of zone c", evicted, gone)
		}
		if fewest < rebalanceReplicas-rebalanceMaxUnavailable {
			t.Errorf("%d pods were ready at one point during the drain, want at least %d", fewest, rebalanceReplicas-rebalanceMaxUnavailable)
		}
	})

	step("with zone c cordoned the audit counts zones a and b only (nodeTaintsPolicy Honor): spread at 3/3", func(t *testing.T) {
		f.waitHealth(rebalanceHealth{Result: health.ResultPass, Domains: fmt.Sprintf("%s=3,%s=3", zoneA, zoneB), Skew: "0"},
			v1alpha1.PolicyStatus{Workloads: 1, Spread: 1})
	})

	step("zone c uncordoned: the audit reports the Deployment skewed, 3/3/0, skew 3", func(t *testing.T) {
		for _, node := range nodesOf[zoneC] {
			if err := setCordon(t.Context(), node, false); err != nil {
				t.Fatal(err)
			}
		}
		f.waitHealth(rebalanceHealth{Result: health.ResultFail, Domains: fmt.Sprintf("%s=3,%s=3,%s=0", zoneA, zoneB, zoneC), Skew: "3"},
			v1alpha1.PolicyStatus{Workloads: 1, Skewed: 1})
	})

	policy := writeDeschedulerPolicy(t, f.ns)
	kubeconfig := writeKubeconfig(t)
	// Each run evicts what the budget allows at that moment: from 3/3/0
	// one pod (the budget refusing the second, its first replacement not
	// yet ready) or two (the replacement ready in time); from 3/2/1 one.
	// Once the zones are even a run evicts nothing. Three runs reach 2/2/2
	// and show one that evicts nothing.
	type outcome struct{ Evicted, Refused, Deleted, ZoneC, Skew int }
	allowed := []outcome{
		{Evicted: 1, Refused: 1, Deleted: 1, ZoneC: 1, Skew: 2},
		{Evicted: 2, Refused: 0, Deleted: 2, ZoneC: 2, Skew: 0},
		{Evicted: 1, Refused: 0, Deleted: 1, ZoneC: 2, Skew: 0},
	}
	settled := outcome{ZoneC: 2}
	even := false
	for i := range 3 {
		step(fmt.Sprintf("run %d: the descheduler evicts within the budget, toward 2/2/2, and nothing once there", i+1), func(t *testing.T) {
			before := avail.reset()
			got := runDescheduler(t, f, bin, policy, kubeconfig, i+1)
			f.waitBudget(rebalanceMaxUnavailable)
			counts, err := zoneCounts(t.Context(), f.waitRunning(web, rebalanceReplicas, placeTimeout))
			if err != nil {
				t.Fatal(err)
			}
			fewest, gone := avail.since(before)
			t.Logf("descheduler run %d: %d evicted, %d refused by the budget, pods deleted %d, fewest ready %d, placed per zone %v, skew %d",
				i+1, got.evicted, got.refused, gone, fewest, counts, skew(counts))
			o := outcome{got.evicted, got.refused, gone, counts[zoneC], skew(counts)}
			switch {
			case even && o != settled:
				t.Errorf("descheduler run %d at 2/2/2 (-want +got):\n%s\ndescheduler log:\n%s", i+1, cmp.Diff(settled, o), got.log)
			case !even && !slices.Contains(allowed, o):
				t.Errorf("descheduler run %d: %+v is none of %+v\ndescheduler log:\n%s", i+1, o, allowed, got.log)
			}
			if fewest < rebalanceReplicas-rebalanceMaxUnavailable {
				t.Errorf("%d pods were ready at one point during the run, want at least %d (the budget's)", fewest, rebalanceReplicas-rebalanceMaxUnavailable)
			}
			even = o.ZoneC == 2 && o.Skew == 0
		})
	}
	if !even {
		t.Fatalf("three descheduler runs did not reach 2/2/2")
	}

	step("the audit reports the Deployment spread again: 2/2/2, skew 0", func(t *testing.T) {
		f.waitHealth(rebalanceHealth{Result: health.ResultPass, Domains: fmt.Sprintf("%s=2,%s=2,%s=2", zoneA, zoneB, zoneC), Skew: "0"},
			v1alpha1.PolicyStatus{Workloads: 1, Spread: 1})
	})
}

// rebalanceBudget is the Deployment's PodDisruptionBudget: every eviction,
// the drain's and the descheduler's, goes through it.
func rebalanceBudget() *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(rebalanceMaxUnavailable)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

// waitBudget waits until the disruption controller has counted every
// replica healthy and allows allowed disruptions: the state between two
// evictions of a drain or two runs of the descheduler.
func (f *framework) waitBudget(allowed int32) {
	f.t.Helper()
	f.eventually(time.Minute, fmt.Sprintf("PodDisruptionBudget web allows %d disruption with %d healthy", allowed, rebalanceReplicas), func(ctx context.Context) error {
		var pdb policyv1.PodDisruptionBudget
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "web"}, &pdb); err != nil {
			return err
		}
		s := pdb.Status
		if s.ObservedGeneration != pdb.Generation || s.CurrentHealthy != rebalanceReplicas || s.DisruptionsAllowed != allowed {
			return fmt.Errorf("observedGeneration %d of %d, %d healthy, %d disruptions allowed (is kube-controller-manager's disruption controller running?)",
				s.ObservedGeneration, pdb.Generation, s.CurrentHealthy, s.DisruptionsAllowed)
		}
		return nil
	})
}

// drain evicts the pods sel selects from nodes through the Eviction API, as
// `kubectl drain` does: an eviction the budget refuses (429) is tried again
// until the replacement of the last one is ready. It returns the evictions
// done and those refused.
func (f *framework) drain(t *testing.T, sel labels.Selector, nodes []string) (evicted, refused int) {
	t.Helper()
	pods, err := f.boundPods(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if !slices.Contains(nodes, p.Spec.NodeName) {
			continue
		}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
		f.eventually(time.Minute, "evict pod "+p.Name, func(ctx context.Context) error {
			err := clientset.CoreV1().Pods(p.Namespace).EvictV1(ctx, eviction)
			if apierrors.IsTooManyRequests(err) {
				refused++
			}
			return err
		})
		evicted++
	}
	return evicted, refused
}

// availability follows the pods of a Deployment through an informer: the
// fewest that were ready (and not terminating) at once, and how many were
// deleted, since the last reset.
type availability struct {
	mu     sync.Mutex
	ready  map[string]bool
	gone   map[string]bool
	fewest int
}

// watchAvailability starts following the pods sel selects until the test
// ends.
func (f *framework) watchAvailability(t *testing.T, sel labels.Selector) *availability {
	t.Helper()
	a := &availability{ready: map[string]bool{}, gone: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(f.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observe(obj, false) },
		UpdateFunc: func(_, obj any) { a.observe(obj, false) },
		DeleteFunc: func(obj any) { a.observe(obj, true) },
	}); err != nil {
		t.Fatalf("watching the pods: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("the pod informer did not sync")
	}
	return a
}

func (a *availability) observe(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if deleted || p.DeletionTimestamp != nil {
		a.gone[p.Name] = true
		delete(a.ready, p.Name)
	} else {
		a.ready[p.Name] = slices.ContainsFunc(p.Status.Conditions, func(c v1.PodCondition) bool {
			return c.Type == v1.PodReady && c.Status == v1.ConditionTrue
		})
	}
	a.fewest = min(a.fewest, a.readyLocked())
}

func (a *availability) readyLocked() int {
	n := 0
	for _, r := range a.ready {
		if r {
			n++
		}
	}
	return n
}

// availabilityMark is where a step starts counting.
type availabilityMark struct{ gone map[string]bool }

// reset starts a step: the fewest ready is the number ready now.
func (a *availability) reset() availabilityMark {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fewest = a.readyLocked()
	gone := make(map[string]bool, len(a.gone))
	for k := range a.gone {
		gone[k] = true
	}
	return availabilityMark{gone: gone}
}

// since returns the fewest pods ready at once and the pods deleted since m.
func (a *availability) since(m availabilityMark) (fewest, deleted int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.gone {
		if !m.gone[k] {
			deleted++
		}
	}
	return a.fewest, deleted
}

// rebalanceHealth is the namespace's Report result for the Deployment.
type rebalanceHealth struct{ Workload, Result, Domains, Skew string }

// waitHealth waits until the namespace's Report holds one result, the
// Deployment's with want's result, counts and skew, and policy "zones"
// counts the workloads as status says.
func (f *framework) waitHealth(want rebalanceHealth, status v1alpha1.PolicyStatus) {
	f.t.Helper()
	want.Workload = "Deployment/web"
	f.eventually(healthTimeout, fmt.Sprintf("the namespace's Report reads %+v", want), func(ctx context.Context) error {
		got, err := reportResults(ctx, f.ns)
		if err != nil {
			return err
		}
		if diff := cmp.Diff([]rebalanceHealth{want}, got); diff != "" {
			return fmt.Errorf("Report results (-want +got):\n%s", diff)
		}
		return nil
	})
	f.eventually(healthTimeout, fmt.Sprintf("policy zones counts %d workloads, %d spread, %d skewed", status.Workloads, status.Spread, status.Skewed), func(ctx context.Context) error {
		var p v1alpha1.SpreadPolicy
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "zones"}, &p); err != nil {
			return err
		}
		type counts struct{ Workloads, Spread, Skewed, Uncovered int32 }
		want := counts{status.Workloads, status.Spread, status.Skewed, status.Uncovered}
		got := counts{p.Status.Workloads, p.Status.Spread, p.Status.Skewed, p.Status.Uncovered}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("policy status (-want +got):\n%s", diff)
		}
		return nil
	})
	f.t.Logf("audit: %s %s, domains %s, skew %s; policy zones: %d workloads, %d spread, %d skewed",
		want.Workload, want.Result, want.Domains, want.Skew, status.Workloads, status.Spread, status.Skewed)
}

// reportResults reads the results of the namespace's Report.
func reportResults(ctx context.Context, ns string) ([]rebalanceHealth, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(health.ReportAPIVersion)
	u.SetKind(health.ReportKind)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: health.ReportName}, u); err != nil {
		return nil, fmt.Errorf("get Report %s: %w", health.ReportName, err)
	}
	var r health.Report
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("decode Report %s: %w", health.ReportName, err)
	}
	var out []rebalanceHealth
	for _, res := range r.Results {
		var workload string
		if len(res.Resources) > 0 {
			workload = res.Resources[0].Kind + "/" + res.Resources[0].Name
		}
		out = append(out, rebalanceHealth{Workload: workload, Result: res.Result, Domains: res.Properties["domains"], Skew: res.Properties["skew"]})
	}
	return out, nil
}

// writeDeschedulerPolicy writes the DeschedulerPolicy the scenario runs,
// the one charts/spreadguard/README.md recommends, limited to the test's
// namespace and nodes: RemovePodsViolatingTopologySpreadConstraint on hard
// constraints only. It leaves the DefaultEvictor's PodsWithoutPDB
// protection off: in v0.36.0 the descheduler never starts the informer that
// protection reads, so it counts every pod as uncovered and evicts nothing
// (kubernetes-sigs/descheduler#1882); the budget binds the evictions
// anyway, through the Eviction API.
func writeDeschedulerPolicy(t *testing.T, ns string) string {
	t.Helper()
	policy := fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: %s=%s
profiles:
- name: spread
  pluginConfig:
  - name: RemovePodsViolatingTopologySpreadConstraint
    args:
      constraints: [DoNotSchedule]
      namespaces:
        include: [%s]
  plugins:
    balance:
      enabled: [RemovePodsViolatingTopologySpreadConstraint]
`, poolKey, rebalancePool, ns)
	path := filepath.Join(t.TempDir(), "descheduler-policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeKubeconfig writes the suite's kubeconfig, merged from KUBECONFIG's
// files as the suite's client read it, into one file for the descheduler.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
	if err != nil {
		t.Fatalf("loading the kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("writing the kubeconfig: %v", err)
	}
	return path
}

// deschedulerRun is what one run of the descheduler logged.
type deschedulerRun struct {
	evicted, refused int
	log              string
}

// runDescheduler runs the descheduler once (no --descheduling-interval:
// one pass, then it exits), its secure port off so that runs in parallel
// never compete for one, and counts the evictions it logs: done, and
// refused by a PodDisruptionBudget.
func runDescheduler(t *testing.T, f *framework, bin, policy, kubeconfig string, run int) deschedulerRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deschedulerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--policy-config-file", policy, "--client-connection-kubeconfig", kubeconfig,
		"--secure-port=0", "--v=4")
	out, err := cmd.CombinedOutput()
	log := string(out)
	logPath := filepath.Join(artifactsDir(), sanitize(f.t.Name()), fmt.Sprintf("descheduler-%d.log", run))
	if mkErr := os.MkdirAll(filepath.Dir(logPath), 0o755); mkErr == nil {
		_ = os.WriteFile(logPath, out, 0o644)
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) || ctx.Err() != nil {
			t.Fatalf("descheduler run %d: %v\n%s", run, err, log)
		}
		t.Fatalf("starting the descheduler %s: %v", bin, err)
	}
	r := deschedulerRun{log: log}
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(line, `"Evicted pod"`):
			r.evicted++
		case strings.Contains(line, `"Error evicting pod"`) && strings.Contains(line, "disruption budget"):
			r.refused++
		}
	}
	return r
}

// noPodsLeft says whether the namespace has no pod left.
func noPodsLeft(ctx context.Context, ns string) error {
	if ns == "" {
		return nil
	}
	var pods v1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err
	}
	if len(pods.Items) > 0 {
		return fmt.Errorf("%d pods left in %s", len(pods.Items), ns)
	}
	return nil
}

// removeRebalanceNodes deletes the rebalancing scenario's nodes.
func removeRebalanceNodes(ctx context.Context) error {
	sel := client.MatchingLabels{poolKey: rebalancePool}
	if err := k8s.DeleteAllOf(ctx, &v1.Node{}, sel); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the rebalancing scenario's nodes: %w", err)
	}
	return nil
}
