package spread_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// workloadPod is a running pod of the workload the deletion orders of these
// tests keep: app=web, revision h1.
func workloadPod(name, node string) *v1.Pod {
	return st.MakePod().Name(name).Label("app", "web").Label("pod-template-hash", "h1").
		ControlledBy("ReplicaSet", "apps/v1", "web-h1").Node(node).Phase(v1.PodRunning).Obj()
}

// otherRevision is a running pod of the workload's previous revision, h0:
// a selector without matchLabelKeys counts it.
func otherRevision(name, node string) *v1.Pod {
	return st.MakePod().Name(name).Label("app", "web").Label("pod-template-hash", "h0").Node(node).Phase(v1.PodRunning).Obj()
}

// templateOf is a pod of the workload carrying constraints, as the webhook
// leaves it.
func templateOf(cs ...v1.TopologySpreadConstraint) *v1.Pod {
	p := workloadPod("web-template", "")
	p.Spec.TopologySpreadConstraints = cs
	return p
}

// placed returns pods of the workload named prefix-0 ... on the nodes,
// count of them on each node in turn.
func placed(prefix string, nodes []string, counts ...int) []*v1.Pod {
	var out []*v1.Pod
	for i, node := range nodes {
		for range counts[i] {
			out = append(out, workloadPod(prefix+"-"+strconv.Itoa(len(out)), node))
		}
	}
	return out
}

func names(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// newOrder builds an index of nodes and pods, and an order of template
// over the workload's pods.
func newOrder(t *testing.T, nodes []*v1.Node, own, others []*v1.Pod, template *v1.Pod) (*spread.Index, *spread.DeletionOrder) {
	t.Helper()
	ix := spread.NewIndex()
	for _, n := range nodes {
		ix.AddNode(n)
	}
	for _, p := range slices.Concat(own, others) {
		ix.AddPod(p)
	}
	o, err := spread.NewDeletionOrder(template)
	if err != nil {
		t.Fatalf("NewDeletionOrder() error = %v", err)
	}
	changes := o.Update(ix, names(own)...)
	if len(changes) != len(own) {
		t.Fatalf("the first Update() costed %d pods, want all %d: %v", len(changes), len(own), changes)
	}
	return ix, o
}

// countsAfter deletes from ix the first k pods of o's order and returns,
// per constraint of template in spec order, its counts per domain, then
// puts the pods back.
func countsAfter(t *testing.T, ix *spread.Index, o *spread.DeletionOrder, template *v1.Pod, pods map[string]*v1.Pod, k int) []map[string]int {
	t.Helper()
	first := o.Pods()[:k]
	for _, name := range first {
		ix.DeletePod(pods[name])
	}
	defer func() {
		for _, name := range first {
			ix.AddPod(pods[name])
		}
	}()
	spreads, err := ix.Spreads(template)
	if err != nil {
		t.Fatalf("Spreads() error = %v", err)
	}
	var out []map[string]int
	for _, s := range spreads {
		out = append(out, s.Domains)
	}
	return out
}

func byName(pods []*v1.Pod) map[string]*v1.Pod {
	m := map[string]*v1.Pod{}
	for _, p := range pods {
		m[p.Name] = p
	}
	return m
}

func zoneNodes(zone string, count int, opts ...func(*st.NodeWrapper)) []*v1.Node {
	return st.Nodes(zone, count, append([]func(*st.NodeWrapper){func(n *st.NodeWrapper) { n.Zone(zone) }}, opts...)...)
}

func nodeNames(nodes ...[]*v1.Node) []string {
	var out []string
	for _, n := range slices.Concat(nodes...) {
		out = append(out, n.Name)
	}
	return out
}

func TestDeletionOrderScenarios(t *testing.T) {
	zone := st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web")
	host := st.Constraint(1, v1.LabelHostname).MatchLabel("app", "web")
	a, b, c := zoneNodes("a", 2), zoneNodes("b", 2), zoneNodes("c", 2)
	cordoned := zoneNodes("c", 1, func(n *st.NodeWrapper) { n.Cordoned() })
	for _, tc := range []struct {
		name     string
		nodes    []*v1.Node
		own      []*v1.Pod
		others   []*v1.Pod
		template *v1.Pod
		// want holds, for some k, the counts per domain of each constraint
		// once the k cheapest pods are gone; nil for a constraint whose
		// counts are left unchecked.
		want map[int][]map[string]int
	}{
		{
			name:     "3 zones of 2 nodes, 12 pods placed 4/4/4, zone maxSkew 1: the 6 cheapest leave 2/2/2 and the 9 cheapest 1/1/1",
			nodes:    slices.Concat(a, b, c),
			own:      placed("web", nodeNames(a, b, c), 2, 2, 2, 2, 2, 2),
			template: templateOf(zone.Obj()),
			want: map[int][]map[string]int{
				6: {{"a": 2, "b": 2, "c": 2}},
				9: {{"a": 1, "b": 1, "c": 1}},
			},
		},
		{
			name:     "zones holding [5,3,1]: the 2 cheapest come from a, the 4 cheapest leave [2,2,1]",
			nodes:    slices.Concat(a, b, c),
			own:      placed("web", nodeNames(a, b, c), 3, 2, 2, 1, 1, 0),
			template: templateOf(zone.Obj()),
			want: map[int][]map[string]int{
				2: {{"a": 3, "b": 3, "c": 1}},
				4: {{"a": 2, "b": 2, "c": 1}},
			},
		},
		{
			name:     "another revision's 2 pods in zone a count without matchLabelKeys: own [3,3,3] as [5,3,3], the 2 cheapest come from a",
			nodes:    slices.Concat(a, b, c),
			own:      placed("web", nodeNames(a, b, c), 2, 1, 2, 1, 2, 1),
			others:   []*v1.Pod{otherRevision("old-0", "a-0"), otherRevision("old-1", "a-1")},
			template: templateOf(zone.Obj()),
			want:     map[int][]map[string]int{2: {{"a": 3, "b": 3, "c": 3}}},
		},
		{
			name:     "the same with matchLabelKeys pod-template-hash: the other revision does not count, the 3 cheapest leave [2,2,2]",
			nodes:    slices.Concat(a, b, c),
			own:      placed("web", nodeNames(a, b, c), 2, 1, 2, 1, 2, 1),
			others:   []*v1.Pod{otherRevision("old-0", "a-0"), otherRevision("old-1", "a-1")},
			template: templateOf(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MatchLabelKeys("pod-template-hash").Obj()),
			want:     map[int][]map[string]int{3: {{"a": 2, "b": 2, "c": 2}}},
		},
		{
			name:     "zones [2,2] and a pod on a cordoned node under nodeTaintsPolicy Honor: the pod nobody counts goes first",
			nodes:    slices.Concat(a, b, cordoned),
			own:      placed("web", nodeNames(a, b, cordoned), 1, 1, 1, 1, 1),
			template: templateOf(zone.NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()),
			want:     map[int][]map[string]int{1: {{"a": 2, "b": 2}}},
		},
		{
			name:  "zones [4,0] and 2 pods on a cordoned node under Honor: the 4 counted go first, down to [0,0]",
			nodes: slices.Concat(a, b, cordoned),
			own:   placed("web", nodeNames(a, cordoned), 2, 2, 2),
			template: templateOf(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").
				NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()),
			want: map[int][]map[string]int{2: {{"a": 2, "b": 0}}, 4: {{"a": 0, "b": 0}}},
		},
		{
			name:     "zone then hostname, zones [3,3], a's pods on hosts [2,1] and b's on [1,1,1]: the first out is one of the 2 on a-0",
			nodes:    slices.Concat(a, zoneNodes("b", 3)),
			own:      placed("web", nodeNames(a, zoneNodes("b", 3)), 2, 1, 1, 1, 1),
			template: templateOf(zone.Obj(), host.Obj()),
			want: map[int][]map[string]int{1: {
				{"a": 2, "b": 3},
				{"a-0": 1, "a-1": 1, "b-0": 1, "b-1": 1, "b-2": 1},
			}},
		},
		{
			name:     "hostname listed before zone ranks after it: zones [3,2], a's pods on 3 hosts and b's 2 on one, the first out leaves zones [2,2]",
			nodes:    slices.Concat(zoneNodes("a", 3), b),
			own:      placed("web", nodeNames(zoneNodes("a", 3), b), 1, 1, 1, 2, 0),
			template: templateOf(host.Obj(), zone.Obj()),
			// Which of a's hosts is emptied is a tie.
			want: map[int][]map[string]int{1: {nil, {"a": 2, "b": 2}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix, o := newOrder(t, tc.nodes, tc.own, tc.others, tc.template)
			pods := byName(tc.own)
			for k, want := range tc.want {
				got := countsAfter(t, ix, o, tc.template, pods, k)
				for i := range want {
					if want[i] == nil {
						got[i] = nil
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("counts after deleting the %d cheapest of %v (-want +got):\n%s", k, o.Pods(), diff)
				}
			}
		})
	}
}

func TestNewDeletionOrderErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template *v1.Pod
		want     error
	}{
		{"a pod without topology spread constraints has no spread to keep", templateOf(), spread.ErrNoConstraints},
		{"maxSkew 0 is invalid", templateOf(st.Constraint(0, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()), spread.ErrInvalidConstraint},
		{"an invalid soft constraint is invalid too", templateOf(st.Constraint(1, "").ScheduleAnyway().Obj()), spread.ErrInvalidConstraint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := spread.NewDeletionOrder(tc.template); !errors.Is(err, tc.want) {
				t.Errorf("NewDeletionOrder() error = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestDeletionOrderPriority: hard before soft, broad keys before narrow,
// then the pod's own order.
func TestDeletionOrderPriority(t *testing.T) {
	template := templateOf(
		st.Constraint(1, v1.LabelHostname).MatchLabel("app", "web").Obj(),
		st.Constraint(1, "rack").MatchLabel("app", "web").ScheduleAnyway().Obj(),
		st.Constraint(1, "rack").MatchLabel("app", "web").Obj(),
		st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").ScheduleAnyway().Obj(),
		st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj(),
		st.Constraint(1, v1.LabelTopologyRegion).MatchLabel("app", "web").Obj(),
	)
	o, err := spread.NewDeletionOrder(template)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{5, 4, 2, 0, 3, 1}, o.Priority()); diff != "" {
		t.Errorf("Priority() (-want +got):\n%s", diff)
	}
}

// TestDeletionCostSaturates holds the costs to an int32: with seven
// constraints after the first, each level takes 4 bits, and the first
// level (twice the height) leaves room for heights up to 3; the pods above
// share the lowest cost, and Saturated says how many.
func TestDeletionCostSaturates(t *testing.T) {
	var cs []v1.TopologySpreadConstraint
	nodes := zoneNodes("a", 1, func(n *st.NodeWrapper) {
		for r := range 7 {
			n.Label(fmt.Sprintf("rack-%d", r), "r")
		}
	})
	cs = append(cs, st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj())
	for r := range 7 {
		cs = append(cs, st.Constraint(1, fmt.Sprintf("rack-%d", r)).MatchLabel("app", "other").Obj())
	}
	own := placed("web", nodeNames(nodes), 6)
	ix, o := newOrder(t, nodes, own, nil, templateOf(cs...))
	var costs []int32
	for _, name := range o.Pods() {
		cost, _ := o.Cost(name)
		costs = append(costs, cost)
	}
	// Heights 6, 5 and 4 do not fit; 3, 2 and 1 do, their other levels at
	// 1 (no pod counted, global minimum 0).
	rest := int32(0x1111111)
	want := []int32{math.MinInt32, math.MinInt32, math.MinInt32, -(6<<28 | rest), -(4<<28 | rest), -(2<<28 | rest)}
	if diff := cmp.Diff(want, costs); diff != "" {
		t.Errorf("costs in order (-want +got):\n%s", diff)
	}
	if got := o.Saturated(); got != 3 {
		t.Errorf("Saturated() = %d, want 3", got)
	}
	top := o.Pods()[0]
	ix.DeletePod(byName(own)[top])
	o.Update(ix, top)
	if got := o.Saturated(); got != 2 {
		t.Errorf("after deleting a saturated pod, Saturated() = %d, want 2", got)
	}
}

// TestDeletionOrderWidens fills a host past the 7 pods its level's 4 bits
// hold: the hostname level widens, every cost is written again in the
// wider encoding, and a later update of other pods keeps the order.
func TestDeletionOrderWidens(t *testing.T) {
	a, b := zoneNodes("a", 1), zoneNodes("b", 2)
	own := placed("web", nodeNames(a, b), 7, 2, 1)
	template := templateOf(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj(),
		st.Constraint(1, v1.LabelHostname).MatchLabel("app", "web").Obj())
	ix, o := newOrder(t, slices.Concat(a, b), own, nil, template)
	eighth := workloadPod("web-eighth", "a-0")
	ix.AddPod(eighth)
	if changes := o.Update(ix, eighth.Name); len(changes) != len(own)+1 {
		t.Errorf("the 8th pod on a-0 changed %d costs, want all %d: %v", len(changes), len(own)+1, changes)
	}
	// A pod in b, which changes the levels of b's pods alone.
	inB := workloadPod("web-in-b", "b-1")
	ix.AddPod(inB)
	o.Update(ix, inB.Name)
	pods := byName(slices.Concat(own, []*v1.Pod{eighth, inB}))
	// Zones [8,4]: the 4 cheapest all come from a.
	want := []map[string]int{{"a": 4, "b": 4}, {"a-0": 4, "b-0": 2, "b-1": 2}}
	if diff := cmp.Diff(want, countsAfter(t, ix, o, template, pods, 4)); diff != "" {
		t.Errorf("counts after deleting the 4 cheapest of %v (-want +got):\n%s", o.Pods(), diff)
	}
}

// TestDeletionOrderWithoutReadyPods follows a workload whose pods are all
// Pending (no node runs them yet): the ReplicaSet controller then compares
// their costs, so they are the stacks; once one is Ready the others leave
// them, as the controller deletes them first whatever their cost, and when
// it is gone again they are the stacks again.
func TestDeletionOrderWithoutReadyPods(t *testing.T) {
	a, b, c := zoneNodes("a", 2), zoneNodes("b", 2), zoneNodes("c", 2)
	template := templateOf(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj())
	own := placed("web", nodeNames(a, b, c), 2, 2, 2, 2, 2, 2)
	for _, p := range own {
		p.Status.Phase = v1.PodPending
	}
	ix, o := newOrder(t, slices.Concat(a, b, c), own, nil, template)
	pods := byName(own)
	ready := own[0].DeepCopy()
	ready.Status.Phase = v1.PodRunning
	for _, step := range []struct {
		name string
		do   func()
		// changed names the pod whose event the order is told of.
		changed string
		// want is the pods of the order; wantCounts, when not nil, the
		// zones' counts once its 6 cheapest are gone.
		want       int
		wantCounts map[string]int
	}{
		{
			name: "12 Pending pods placed 4/4/4, none Ready -> all 12 in the order, the 6 cheapest leave 2/2/2",
			do:   func() {}, want: 12, wantCounts: map[string]int{"a": 2, "b": 2, "c": 2},
		},
		{
			name: "one of zone a's pods Running and Ready -> the 11 Pending leave the order",
			do:   func() { ix.UpdatePod(own[0], ready) }, changed: ready.Name, want: 1,
		},
		{
			name: "that pod deleted -> the 11 Pending are the order again",
			do:   func() { ix.DeletePod(ready); delete(pods, ready.Name) }, changed: ready.Name, want: 11,
		},
	} {
		step.do()
		var names []string
		if step.changed != "" {
			names = append(names, step.changed)
		}
		o.Update(ix, names...)
		if got := len(o.Pods()); got != step.want {
			t.Fatalf("%s: the order holds %d pods %v, want %d", step.name, got, o.Pods(), step.want)
		}
		if step.wantCounts != nil {
			got := countsAfter(t, ix, o, template, pods, 6)
			if diff := cmp.Diff([]map[string]int{step.wantCounts}, got); diff != "" {
				t.Errorf("%s: counts after deleting the 6 cheapest of %v (-want +got):\n%s", step.name, o.Pods(), diff)
			}
		}
	}
}
