package deletioncost

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/policy"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// zones are the nodes of every test: two in each of three zones.
func zones() []*v1.Node {
	var out []*v1.Node
	for _, z := range []string{"a", "b", "c"} {
		for i := range 2 {
			out = append(out, st.MakeNode().Name(fmt.Sprintf("%s-%d", z, i)).Zone(z).Obj())
		}
	}
	return out
}

// zoneConstraint is the constraint of the workloads of these tests: zone,
// maxSkew 1, over app=web of its own revision.
func zoneConstraint() v1.TopologySpreadConstraint {
	return st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MatchLabelKeys("pod-template-hash").Obj()
}

// webPod is a running pod of ReplicaSet web-h1 on node, carrying cs.
func webPod(name, node string, cs ...v1.TopologySpreadConstraint) *v1.Pod {
	w := st.MakePod().Name(name).Label("app", "web").Label("pod-template-hash", "h1").
		ControlledBy("ReplicaSet", "apps/v1", "web-h1").Node(node).Phase(v1.PodRunning)
	for _, c := range cs {
		w = w.SpreadConstraint(c)
	}
	return w.Obj()
}

// spreadOver returns the pods web-0 ... placed count per node of nodes in
// turn.
func spreadOver(nodes []*v1.Node, count int, cs ...v1.TopologySpreadConstraint) []*v1.Pod {
	var out []*v1.Pod
	for _, n := range nodes {
		for range count {
			out = append(out, webPod("web-"+strconv.Itoa(len(out)), n.Name, cs...))
		}
	}
	return out
}

// replicaSet is web-h1 with a template carrying cs.
func replicaSet(cs ...v1.TopologySpreadConstraint) *appsv1.ReplicaSet {
	rs := st.MakeReplicaSet().Name("web-h1").MatchLabel("app", "web").MatchLabel("pod-template-hash", "h1").Obj()
	rs.Spec.Template.Labels = map[string]string{"app": "web", "pod-template-hash": "h1"}
	rs.Spec.Template.Spec.TopologySpreadConstraints = cs
	return rs
}

// fakePods is the cluster state's pods: the index, the compact pods, and
// the keeper subscribed to their changes, as state.Cluster tells them.
type fakePods struct {
	mu      sync.Mutex
	ix      *spread.Index
	full    map[string]*v1.Pod
	compact map[string]*cache.Pod
	sub     state.Subscriber
	// holding holds the changes told in late until the test delivers
	// them: changes arriving after the index counted them.
	holding bool
	late    []lateCall
}

// lateCall is a change held back, for the pod key.
type lateCall struct {
	key  string
	call func()
}

// tell tells the subscriber of a change of pod key now, or holds it.
func (f *fakePods) tell(key string, call func()) {
	f.mu.Lock()
	if f.holding {
		f.late = append(f.late, lateCall{key, call})
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	call()
}

// Subscribe subscribes s to every change; the fake tells only those of
// pods and nodes.
func (f *fakePods) Subscribe(s state.Subscriber, _ ...state.Kind) func() {
	f.sub = s
	return func() { f.sub = nil }
}

// nodesChanged tells the subscriber of a node's labels changed.
func (f *fakePods) nodesChanged() {
	f.sub.Changed(state.Change{Kind: state.Node, Op: state.Updated, What: state.Labels})
}

func (f *fakePods) EachPod(fn func(*cache.Pod)) error {
	f.mu.Lock()
	ps := slices.Collect(maps.Values(f.compact))
	f.mu.Unlock()
	for _, p := range ps {
		fn(p)
	}
	return nil
}

func (f *fakePods) Pod(namespace, name string) *cache.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.compact[namespace+"/"+name]
}

// set adds or updates p: the index first, then the subscriber.
func (f *fakePods) set(p *v1.Pod) {
	key := p.Namespace + "/" + p.Name
	f.mu.Lock()
	old, oldCompact := f.full[key], f.compact[key]
	c := cache.CompactPod(p)
	f.full[key], f.compact[key] = p, c
	f.mu.Unlock()
	if old == nil {
		f.ix.AddPod(p)
	} else {
		f.ix.UpdatePod(old, p)
	}
	f.tell(key, func() { f.sub.Changed(state.PodChange(oldCompact, c)) })
}

func (f *fakePods) delete(namespace, name string) {
	key := namespace + "/" + name
	f.mu.Lock()
	old, oldCompact := f.full[key], f.compact[key]
	delete(f.full, key)
	delete(f.compact, key)
	f.mu.Unlock()
	f.ix.DeletePod(old)
	f.tell(key, func() { f.sub.Changed(state.PodChange(oldCompact, nil)) })
}

// annotate is what the API server does with an apply: the pod carries
// the cost, and its informer tells.
func (f *fakePods) annotate(namespace, name string, cost int32) {
	f.mu.Lock()
	p := f.full[namespace+"/"+name].DeepCopy()
	f.mu.Unlock()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[spread.DeletionCostAnnotation] = strconv.Itoa(int(cost))
	f.set(p)
}

// fakePatcher records the applies and answers fail's error for a pod's
// first fails[pod] applies.
type fakePatcher struct {
	mu      sync.Mutex
	pods    *fakePods
	applied []string
	fail    map[string]error
	fails   map[string]int
}

func (p *fakePatcher) ApplyCost(_ context.Context, namespace, name string, cost int32) error {
	p.mu.Lock()
	p.applied = append(p.applied, fmt.Sprintf("%s=%d", name, cost))
	err := p.fail[name]
	if err != nil && p.fails[name] > 0 {
		if p.fails[name]--; p.fails[name] == 0 {
			delete(p.fail, name)
		}
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	p.pods.annotate(namespace, name, cost)
	return nil
}

type harness struct {
	k       *Keeper
	pods    *fakePods
	patcher *fakePatcher
}

// world is what a test's cluster holds at the keeper's start.
type world struct {
	owners   []client.Object
	pods     []*v1.Pod
	policies []*v1alpha1.SpreadPolicy
	excluded []string
	// namespaces are the cached namespaces; selector the configured
	// namespaceSelector.
	namespaces []*v1.Namespace
	selector   labels.Selector
	// failing: a pod's applies fail with err, times times (-1: always).
	failing map[string]failure
}

type failure struct {
	err   error
	times int
}

func newHarness(t testing.TB, w world) *harness {
	t.Helper()
	ix := spread.NewIndex()
	for _, n := range zones() {
		ix.AddNode(n)
	}
	pods := &fakePods{ix: ix, full: map[string]*v1.Pod{}, compact: map[string]*cache.Pod{}}
	// The client holds the owners only: the keeper reads pods from the
	// cache, never from the API server.
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(w.owners...).Build()
	patcher := &fakePatcher{pods: pods, fail: map[string]error{}, fails: map[string]int{}}
	for name, f := range w.failing {
		patcher.fail[name], patcher.fails[name] = f.err, f.times
	}
	k, err := New(Config{
		Log: logr.Discard(), Index: ix, Pods: pods, Changes: pods, Reader: c,
		Policies:   policy.SliceLister{Policies: w.policies, Namespaces: w.namespaces},
		Namespaces: policy.Scope{Excluded: w.excluded, Selector: w.selector},
		Patcher:    patcher, QPS: 1000, Burst: 1000, Synced: func() bool { return true },
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	k.leading.Store(true)
	for _, p := range w.pods {
		pods.set(p)
	}
	if err := k.loadWorkloads(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &harness{k: k, pods: pods, patcher: patcher}
}

// settle runs the syncer and the writers until nothing is left to do, and
// returns the applies they made.
func (h *harness) settle(t testing.TB) []string {
	t.Helper()
	h.patcher.mu.Lock()
	h.patcher.applied = nil
	h.patcher.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-h.k.wake:
		default:
		}
		if err := h.k.sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if h.k.writes.queue.Len() == 0 {
			if h.k.writes.pending() == 0 && len(h.k.inbox.pods) == 0 {
				break
			}
			time.Sleep(5 * time.Millisecond) // a backoff running out
			continue
		}
		key, _ := h.k.writes.queue.Get()
		h.k.writes.write(t.Context(), key, h.pods, h.patcher, h.k.metrics, logr.Discard())
		h.k.writes.queue.Done(key)
	}
	h.patcher.mu.Lock()
	defer h.patcher.mu.Unlock()
	applied := slices.Clone(h.patcher.applied)
	slices.Sort(applied)
	return applied
}

// costsByZone returns each zone's costs, sorted, as the pods carry them.
func (h *harness) costsByZone() map[string][]int32 {
	out := map[string][]int32{}
	for _, p := range h.pods.full {
		v, ok := p.Annotations[spread.DeletionCostAnnotation]
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(v)
		zone := p.Spec.NodeName[:1]
		out[zone] = append(out[zone], int32(n))
	}
	for _, cs := range out {
		slices.Sort(cs)
	}
	return out
}

func conflict(name string) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, name, fmt.Errorf("Apply failed with 1 conflict: conflict with \"kubectl-annotate\": .metadata.annotations[%s]", spread.DeletionCostAnnotation))
}

var fourPerZone = map[string][]int32{"a": {-8, -6, -4, -2}, "b": {-8, -6, -4, -2}, "c": {-8, -6, -4, -2}}

func TestKeeperStart(t *testing.T) {
	nodes := zones()
	// web-0 ... web-11, two on each node: 4 per zone.
	constrained := spreadOver(nodes, 2, zoneConstraint())
	plain := spreadOver(nodes, 2)
	tests := []struct {
		name  string
		world world
		// wantPatches is how many applies the start sends; wantCosts the
		// costs the pods then carry, by zone.
		wantPatches int
		wantCosts   map[string][]int32
		wantStates  map[string]float64
	}{
		{
			name:        "ReplicaSet of 12 over 3 zones (4/4/4), zone constraint in its template -> each zone costs -8 -6 -4 -2, one patch per pod",
			world:       world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: constrained},
			wantPatches: 12, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
		{
			name: "ReplicationController of 12 over 3 zones (4/4/4), zone constraint in its template -> the same costs",
			world: world{owners: []client.Object{func() client.Object {
				rc := st.MakeReplicationController().Name("web-h1").Selector("app", "web").Selector("pod-template-hash", "h1").Obj()
				rc.Spec.Template = &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "pod-template-hash": "h1"}},
					Spec: v1.PodSpec{TopologySpreadConstraints: []v1.TopologySpreadConstraint{zoneConstraint()}}}
				return rc
			}()}, pods: constrained},
			wantPatches: 12, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
		{
			name:        "template without constraints, pods carrying the zone constraint the webhook injected -> the constraints from the index, the same costs",
			world:       world{owners: []client.Object{replicaSet()}, pods: constrained},
			wantPatches: 12, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
		{
			name:        "template without constraints, 8 pods carrying the injected zone constraint and 4 created before the policy carrying none -> the set most carry, the same costs on all 12",
			world:       world{owners: []client.Object{replicaSet()}, pods: append(slices.Clone(constrained[:8]), plain[8:]...)},
			wantPatches: 12, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
		{
			name:        "template without constraints, 6 pods carrying the injected zone constraint and 6 carrying none -> the tie goes to none, nothing written",
			world:       world{owners: []client.Object{replicaSet()}, pods: append(slices.Clone(constrained[:6]), plain[6:]...)},
			wantPatches: 0, wantCosts: map[string][]int32{}, wantStates: map[string]float64{"unconstrained": 1},
		},
		{
			name: "pods carrying the zone and region labels the API server copies from their nodes at binding -> still the workload's: the same costs",
			world: world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: func() []*v1.Pod {
				var out []*v1.Pod
				for _, p := range constrained {
					p = p.DeepCopy()
					p.Labels = maps.Clone(p.Labels)
					p.Labels[v1.LabelTopologyZone], p.Labels[v1.LabelTopologyRegion] = p.Spec.NodeName[:1], "r"
					out = append(out, p)
				}
				return out
			}()},
			wantPatches: 12, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
		{
			name:        "neither template nor pods carry a constraint -> nothing written",
			world:       world{owners: []client.Object{replicaSet()}, pods: plain},
			wantPatches: 0, wantCosts: map[string][]int32{}, wantStates: map[string]float64{"unconstrained": 1},
		},
		{
			name: "the SpreadPolicy that governs the pods says deletionCost Disabled -> nothing written",
			world: world{owners: []client.Object{replicaSet()}, pods: constrained, policies: []*v1alpha1.SpreadPolicy{
				pt.MakeSpreadPolicy().Namespace("default").Name("zones").PodLabel("app", "web").DeletionCost(v1alpha1.DeletionCostDisabled).
					Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()}},
			wantPatches: 0, wantCosts: map[string][]int32{}, wantStates: map[string]float64{"disabled": 1},
		},
		{
			name: "the SpreadPolicy that governs the pods says deletionCost Enabled -> the costs",
			world: world{owners: []client.Object{replicaSet()}, pods: constrained, policies: []*v1alpha1.SpreadPolicy{
				pt.MakeSpreadPolicy().Namespace("default").Name("zones").PodLabel("app", "web").DeletionCost(v1alpha1.DeletionCostEnabled).
					Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()}},
			wantPatches: 12, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
		{
			name:        "the namespace is excluded -> nothing written",
			world:       world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: constrained, excluded: []string{"default"}},
			wantPatches: 0, wantCosts: map[string][]int32{}, wantStates: map[string]float64{"excluded": 1},
		},
		{
			name: "the namespace is labelled spreadguard.io/ignore=true, which admission's namespaceSelector leaves out -> nothing written",
			world: world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: constrained,
				namespaces: []*v1.Namespace{namespace("default", map[string]string{"spreadguard.io/ignore": "true"})}},
			wantPatches: 0, wantCosts: map[string][]int32{}, wantStates: map[string]float64{"excluded": 1},
		},
		{
			name: "the configured namespaceSelector (env=prod) does not select the namespace (env=dev) -> nothing written",
			world: world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: constrained, selector: mustSelector("env=prod"),
				namespaces: []*v1.Namespace{namespace("default", map[string]string{"env": "dev"})}},
			wantPatches: 0, wantCosts: map[string][]int32{}, wantStates: map[string]float64{"excluded": 1},
		},
		{
			name: "the configured namespaceSelector (env=prod) selects the namespace (env=prod) -> the costs",
			world: world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: constrained, selector: mustSelector("env=prod"),
				namespaces: []*v1.Namespace{namespace("default", map[string]string{"env": "prod"})}},
			wantPatches: 12, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
		{
			name: "a second ReplicaSet whose selector (app=web) selects the first's pods -> both left alone",
			world: world{owners: []client.Object{replicaSet(zoneConstraint()), func() client.Object {
				rs := st.MakeReplicaSet().Name("web-all").MatchLabel("app", "web").Obj()
				rs.Spec.Template.Labels = map[string]string{"app": "web", "pod-template-hash": "h2"}
				rs.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{zoneConstraint()}
				return rs
			}()}, pods: constrained},
			wantPatches: 0, wantCosts: map[string][]int32{}, wantStates: map[string]float64{"shared": 2},
		},
		{
			name: "every pod already carries its cost (a new leader) -> no patch",
			world: world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: withCosts(constrained, map[string]int32{
				"web-0": -2, "web-1": -4, "web-2": -6, "web-3": -8, "web-4": -2, "web-5": -4, "web-6": -6, "web-7": -8, "web-8": -6, "web-9": -8, "web-10": -2, "web-11": -4})},
			wantPatches: 0, wantCosts: fourPerZone, wantStates: map[string]float64{"kept": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.world)
			applied := h.settle(t)
			if len(applied) != tt.wantPatches {
				t.Errorf("%d patches at start, want %d: %v", len(applied), tt.wantPatches, applied)
			}
			if diff := cmp.Diff(tt.wantCosts, h.costsByZone()); diff != "" {
				t.Errorf("costs by zone (-want +got):\n%s", diff)
			}
			h.k.metrics.setWorkloads(h.k.workloads)
			got := map[string]float64{}
			for _, s := range stateNames {
				if v := testutil.ToFloat64(h.k.metrics.workloads.WithLabelValues(s)); v != 0 {
					got[s] = v
				}
			}
			if diff := cmp.Diff(tt.wantStates, got); diff != "" {
				t.Errorf("spreadguard_deletion_cost_workloads by state (-want +got):\n%s", diff)
			}
		})
	}
}

func namespace(name string, ls map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ls}}
}

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

// withCosts returns copies of pods carrying the costs given by name.
func withCosts(pods []*v1.Pod, costs map[string]int32) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
		if c, ok := costs[p.Name]; ok {
			out[i].Annotations = map[string]string{spread.DeletionCostAnnotation: strconv.Itoa(int(c))}
		}
	}
	return out
}

func TestKeeperEvents(t *testing.T) {
	backoffBase, backoffMax = time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { backoffBase, backoffMax = time.Second, 5*time.Minute })
	nodes := zones()
	start := spreadOver(nodes, 2, zoneConstraint())
	everyRevision := st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()
	tests := []struct {
		name string
		// constraint is the template's, zoneConstraint when unset.
		constraint *v1.TopologySpreadConstraint
		failing    map[string]failure
		// event changes the cluster after the start has settled.
		event       func(h *harness)
		wantApplied []string
		wantForeign float64
		wantResults map[string]float64
	}{
		{
			name: "a 13th pod created in zone a -> one patch, its own, on top of zone a",
			event: func(h *harness) {
				h.pods.set(webPod("web-12", "a-0", zoneConstraint()))
			},
			wantApplied: []string{"web-12=-10"},
			wantResults: map[string]float64{resultApplied: 13},
		},
		{
			name: "the cheapest pod of zone a deleted, as the ReplicaSet controller deletes -> no patch",
			event: func(h *harness) {
				h.pods.delete("default", "web-3")
			},
			wantResults: map[string]float64{resultApplied: 12},
		},
		{
			name: "the dearest pod of zone a evicted -> one patch: the top of its stack takes its place",
			event: func(h *harness) {
				h.pods.delete("default", "web-0")
			},
			wantApplied: []string{"web-3=-2"},
			wantResults: map[string]float64{resultApplied: 13},
		},
		{
			name:        "web-3's cost owned by another manager (409) -> left alone and counted; its next change sends nothing",
			failing:     map[string]failure{"web-3": {conflict("web-3"), -1}},
			event:       func(h *harness) { h.pods.delete("default", "web-0") },
			wantForeign: 1,
			wantResults: map[string]float64{resultApplied: 11, resultForeign: 1},
		},
		{
			name:        "web-5's first two patches fail with 500 -> tried again after a backoff, then written",
			failing:     map[string]failure{"web-5": {apierrors.NewInternalError(fmt.Errorf("etcd leader changed")), 2}},
			event:       func(*harness) {},
			wantResults: map[string]float64{resultApplied: 12, resultError: 2},
		},
		{
			name:       "a pod of revision h0 (a rollout) created in zone a, the constraint (no matchLabelKeys) counting it -> another revision of the workload, gone at the rollout's end: no patch",
			constraint: &everyRevision,
			event: func(h *harness) {
				h.pods.set(st.MakePod().Name("web-old").Label("app", "web").Label("pod-template-hash", "h0").Node("a-1").Phase(v1.PodRunning).Obj())
			},
			wantResults: map[string]float64{resultApplied: 12},
		},
		{
			name:       "a pod of another workload (app=web, track=canary) created in zone a, the constraint counting it -> zone a's 4 pods each move up one: 4 patches",
			constraint: &everyRevision,
			event: func(h *harness) {
				h.pods.set(st.MakePod().Name("canary-0").Label("app", "web").Label("track", "canary").Node("a-1").Phase(v1.PodRunning).Obj())
			},
			wantApplied: []string{"web-0=-4", "web-1=-6", "web-2=-8", "web-3=-10"},
			wantResults: map[string]float64{resultApplied: 16},
		},
		{
			name: "node c-0 relabelled from zone c to zone b -> its two pods go on top of zone b's stack: two patches",
			event: func(h *harness) {
				n := st.MakeNode().Name("c-0").Zone("b").Obj()
				h.pods.ix.UpdateNode(st.MakeNode().Name("c-0").Zone("c").Obj(), n)
				h.pods.nodesChanged()
			},
			// Zone b holds 6 now, web-8 and web-9 on top of its stack; zone
			// c keeps web-10 and web-11 at the bottom of its own (a zone's
			// pods are stacked by name: web-10 and web-11 before web-8).
			wantApplied: []string{"web-8=-10", "web-9=-12"},
			wantResults: map[string]float64{resultApplied: 14},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := zoneConstraint()
			if tt.constraint != nil {
				c = *tt.constraint
			}
			h := newHarness(t, world{owners: []client.Object{replicaSet(c)}, pods: start, failing: tt.failing})
			h.settle(t)
			tt.event(h)
			if diff := cmp.Diff(tt.wantApplied, h.settle(t)); diff != "" {
				t.Errorf("patches after the event (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(h.k.metrics.foreign); got != tt.wantForeign {
				t.Errorf("spreadguard_deletion_cost_foreign_pods = %v, want %v", got, tt.wantForeign)
			}
			got := map[string]float64{}
			for _, r := range []string{resultApplied, resultForeign, resultGone, resultError} {
				if v := testutil.ToFloat64(h.k.metrics.patches.WithLabelValues(r)); v != 0 {
					got[r] = v
				}
			}
			if diff := cmp.Diff(tt.wantResults, got); diff != "" {
				t.Errorf("spreadguard_deletion_cost_patches_total by result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeeperThatDoesNotLeadDropsEvents(t *testing.T) {
	h := newHarness(t, world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: spreadOver(zones(), 2, zoneConstraint())})
	h.k.leading.Store(false)
	h.pods.set(webPod("web-12", "a-0", zoneConstraint()))
	h.pods.nodesChanged()
	if n := len(h.k.inbox.pods); n != 12 || h.k.inbox.nodes {
		t.Errorf("inbox holds %d pod events and nodes=%v after events while not leading, want the 12 of the start and false", n, h.k.inbox.nodes)
	}
}

func TestKeeperFollowsThePolicy(t *testing.T) {
	disabled := func() *v1alpha1.SpreadPolicy {
		return pt.MakeSpreadPolicy().Namespace("default").Name("zones").PodLabel("app", "web").DeletionCost(v1alpha1.DeletionCostDisabled).
			Constraint(pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()
	}
	tests := []struct {
		name     string
		policies []*v1alpha1.SpreadPolicy
		// change is the policies after the start.
		change      []*v1alpha1.SpreadPolicy
		wantApplied int
	}{
		{
			name:        "deletionCost Disabled at start, then the policy deleted -> the 12 pods and the one created since get their costs",
			policies:    []*v1alpha1.SpreadPolicy{disabled()},
			wantApplied: 13,
		},
		{
			name:        "no policy at start, then one with deletionCost Disabled -> a pod created since gets no cost",
			change:      []*v1alpha1.SpreadPolicy{disabled()},
			wantApplied: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: spreadOver(zones(), 2, zoneConstraint()), policies: tt.policies})
			h.settle(t)
			h.k.cfg.Policies = policy.SliceLister{Policies: tt.change}
			h.k.inbox.policiesChanged = true
			h.pods.set(webPod("web-12", "a-0", zoneConstraint()))
			if got := h.settle(t); len(got) != tt.wantApplied {
				t.Errorf("%d patches after the policy changed, want %d: %v", len(got), tt.wantApplied, got)
			}
		})
	}
}

func TestKeeperFollowsTheNamespaceScope(t *testing.T) {
	ignored := namespace("default", map[string]string{"spreadguard.io/ignore": "true"})
	plain := namespace("default", nil)
	tests := []struct {
		name string
		// before and after are the namespace at the start and after it.
		before, after *v1.Namespace
		wantApplied   int
	}{
		{name: "labelled spreadguard.io/ignore=true after the start -> a pod created since gets no cost", before: plain, after: ignored, wantApplied: 0},
		{name: "the ignore label removed after the start -> the 12 pods and the one created since get their costs", before: ignored, after: plain, wantApplied: 13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{owners: []client.Object{replicaSet(zoneConstraint())}, pods: spreadOver(zones(), 2, zoneConstraint()),
				namespaces: []*v1.Namespace{tt.before}})
			h.settle(t)
			h.k.cfg.Policies = policy.SliceLister{Namespaces: []*v1.Namespace{tt.after}}
			h.k.inbox.policiesChanged = true
			h.pods.set(webPod("web-12", "a-0", zoneConstraint()))
			if got := h.settle(t); len(got) != tt.wantApplied {
				t.Errorf("%d patches after the namespace changed, want %d: %v", len(got), tt.wantApplied, got)
			}
		})
	}
}

// heard is what the keeper's inbox holds after the cluster state told it
// of some changes.
type heard struct {
	Pods      []string
	Nodes     bool
	Workloads []string
	Policies  bool
}

func TestKeeperHearsOnlyTheChangesThatTouchWhatItReads(t *testing.T) {
	pod := webPod("web-0", "a-0", zoneConstraint())
	notReady := pod.DeepCopy()
	notReady.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	costed := pod.DeepCopy()
	costed.Annotations = map[string]string{spread.DeletionCostAnnotation: "3"}
	relabelled := pod.DeepCopy()
	relabelled.Labels = map[string]string{"app": "web", "pod-template-hash": "h1", "tier": "front"}
	statusOnly := pod.DeepCopy()
	statusOnly.Status.PodIP = "10.0.0.1"

	rs := replicaSet(zoneConstraint())
	counted := rs.DeepCopy()
	counted.Status.ReadyReplicas = 2
	scaled := rs.DeepCopy()
	scaled.Spec.Replicas = new(int32(5))
	retemplated := rs.DeepCopy()
	retemplated.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}

	ns := pt.MakeNamespace("default").Obj()
	nsRelabelled := pt.MakeNamespace("default").Label("team", "b").Obj()
	nsAnnotated := ns.DeepCopy()
	nsAnnotated.Annotations = map[string]string{"note": "x"}

	pol := pt.MakeSpreadPolicy().Namespace("default").Name("zones").PodLabel("app", "web").Generation(1).Obj()
	audited := pol.DeepCopy()
	audited.Status.Workloads = 3
	edited := pol.DeepCopy()
	edited.Generation = 2

	node := st.MakeNode().Name("a-0").Zone("a").Obj()
	heartbeat := node.DeepCopy()
	heartbeat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	movedNode := st.MakeNode().Name("a-0").Zone("b").Obj()

	tests := []struct {
		name    string
		changes func(c *state.Cluster)
		want    heard
	}{
		{
			name:    "a pod added, then deleted -> both heard, each as moved",
			changes: func(c *state.Cluster) { c.Add(pod); c.Delete(pod) },
			want:    heard{Pods: []string{"web-0 moved", "web-0 moved gone"}},
		},
		{
			name:    "a pod's status written, then its cost -> only the cost, not as moved",
			changes: func(c *state.Cluster) { c.Add(pod); c.Update(pod, statusOnly); c.Update(statusOnly, costed) },
			want:    heard{Pods: []string{"web-0 moved", "web-0 cost=3"}},
		},
		{
			name:    "a pod turning not Ready, then relabelled -> both heard as moved",
			changes: func(c *state.Cluster) { c.Add(pod); c.Update(pod, notReady); c.Update(notReady, relabelled) },
			want:    heard{Pods: []string{"web-0 moved", "web-0 moved", "web-0 moved"}},
		},
		{
			name: "a ReplicaSet's status, then its replicas -> not heard: the keeper reads neither",
			changes: func(c *state.Cluster) {
				c.Update(rs, counted)
				c.Update(rs, scaled)
			},
			want: heard{},
		},
		{
			name:    "a ReplicaSet's template changed -> the workload looked at again",
			changes: func(c *state.Cluster) { c.Update(rs, retemplated) },
			want:    heard{Workloads: []string{"ReplicaSet default/web-h1"}},
		},
		{
			name:    "a ReplicaSet deleted -> the workload looked at again",
			changes: func(c *state.Cluster) { c.Delete(rs) },
			want:    heard{Workloads: []string{"ReplicaSet default/web-h1"}},
		},
		{
			name:    "a namespace annotated -> not heard",
			changes: func(c *state.Cluster) { c.Update(ns, nsAnnotated) },
			want:    heard{},
		},
		{
			name:    "a namespace relabelled -> the policies resolved again",
			changes: func(c *state.Cluster) { c.Update(ns, nsRelabelled) },
			want:    heard{Policies: true},
		},
		{
			name:    "a policy's status written -> not heard",
			changes: func(c *state.Cluster) { c.Update(pol, audited) },
			want:    heard{},
		},
		{
			name:    "a policy's spec edited -> the policies resolved again",
			changes: func(c *state.Cluster) { c.Update(pol, edited) },
			want:    heard{Policies: true},
		},
		{
			name:    "a node's heartbeat -> not heard",
			changes: func(c *state.Cluster) { c.Update(node, heartbeat) },
			want:    heard{},
		},
		{
			name:    "a node moved to another zone -> the node generation compared",
			changes: func(c *state.Cluster) { c.Update(node, movedNode) },
			want:    heard{Nodes: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := spread.NewIndex()
			cluster := state.NewCluster(ix, nil)
			k, err := New(Config{
				Log: logr.Discard(), Index: ix, Pods: cluster, Changes: cluster,
				Policies: policy.SliceLister{}, QPS: 1, Burst: 1, Registry: prometheus.NewRegistry(),
			})
			if err != nil {
				t.Fatal(err)
			}
			k.leading.Store(true)
			tt.changes(cluster)
			var got heard
			k.inbox.mu.Lock()
			for _, e := range k.inbox.pods {
				s := e.name
				if e.moved {
					s += " moved"
				} else {
					s += fmt.Sprintf(" cost=%d", e.cost)
				}
				if e.gone {
					s += " gone"
				}
				got.Pods = append(got.Pods, s)
			}
			for key := range k.inbox.workloads {
				got.Workloads = append(got.Workloads, key.kind+" "+key.namespace+"/"+key.name)
			}
			got.Nodes, got.Policies = k.inbox.nodes, k.inbox.policiesChanged
			k.inbox.mu.Unlock()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("what the keeper heard (-want +got):\n%s", diff)
			}
		})
	}
}
