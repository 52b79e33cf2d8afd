package parity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// TestSchedulerHarness pins the scheduler side of the parity test to
// outcomes worked out by hand, so that a harness that quietly stopped
// running a plugin (and so agreed with anything) fails here.
func TestSchedulerHarness(t *testing.T) {
	zoneNode := func(name, zone string) *spreadtest.NodeWrapper {
		return spreadtest.MakeNode().Name(name).Zone(zone)
	}
	web := func(name, node string) *spreadtest.PodWrapper {
		return spreadtest.MakePod().Name(name).Label("app", "web").Node(node).Phase(v1.PodRunning)
	}
	threeZones := []*v1.Node{zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj(), zoneNode("c1", "c").Obj()}
	counts33 := []*v1.Pod{
		web("p1", "a1").Obj(), web("p2", "a1").Obj(), web("p3", "a1").Obj(),
		web("p4", "b1").Obj(), web("p5", "b1").Obj(), web("p6", "b1").Obj(),
	}
	zoneSpread := spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web")
	incoming := func(c ...*spreadtest.ConstraintWrapper) *spreadtest.PodWrapper {
		p := spreadtest.MakePod().Name("incoming").Label("app", "web")
		for _, cw := range c {
			p.SpreadConstraint(cw.Obj())
		}
		return p
	}

	pts, unsched, taints, affinity := names.PodTopologySpread, names.NodeUnschedulable, names.TaintToleration, names.NodeAffinity
	tests := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		pod   *v1.Pod
		want  *schedulerOutcome
		// rejecting lists, per node, the plugins that reject it alone.
		rejecting map[string][]string
	}{
		{
			name:  "3 zones, counts [3,3,0], maxSkew 1 -> only zone c",
			nodes: threeZones,
			pods:  counts33,
			pod:   incoming(zoneSpread).Obj(),
			want: &schedulerOutcome{
				Feasible: []string{"c1"}, Candidates: []string{"a1", "b1", "c1"},
				Spread: &spreadState{Domains: []map[string]int{{"a": 3, "b": 3, "c": 0}}, GlobalMin: []int{0}, SelfMatch: []int{1}},
			},
			rejecting: map[string][]string{"a1": {pts}, "b1": {pts}},
		},
		{
			name:  "3 zones, counts [3,3,0], zone c cordoned, taints ignored -> none feasible",
			nodes: []*v1.Node{threeZones[0], threeZones[1], zoneNode("c1", "c").Cordoned().Obj()},
			pods:  counts33,
			pod:   incoming(zoneSpread).Obj(),
			want: &schedulerOutcome{
				Feasible: []string{}, Candidates: []string{"a1", "b1"},
				Spread: &spreadState{Domains: []map[string]int{{"a": 3, "b": 3, "c": 0}}, GlobalMin: []int{0}, SelfMatch: []int{1}},
			},
			rejecting: map[string][]string{"a1": {pts}, "b1": {pts}, "c1": {unsched, taints}},
		},
		{
			name:  "3 zones, counts [3,3,0], zone c cordoned, nodeTaintsPolicy Honor -> a and b",
			nodes: []*v1.Node{threeZones[0], threeZones[1], zoneNode("c1", "c").Cordoned().Obj()},
			pods:  counts33,
			pod:   incoming(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").NodeTaintsPolicy(v1.NodeInclusionPolicyHonor)).Obj(),
			want: &schedulerOutcome{
				Feasible: []string{"a1", "b1"}, Candidates: []string{"a1", "b1"},
				Spread: &spreadState{Domains: []map[string]int{{"a": 3, "b": 3}}, GlobalMin: []int{3}, SelfMatch: []int{1}},
			},
			rejecting: map[string][]string{"c1": {unsched, taints}},
		},
		{
			name:  "succeeded, failed, terminating, other-namespace and unbound pods do not count -> counts [1,0,0]",
			nodes: threeZones,
			pods: []*v1.Pod{
				web("p1", "a1").Obj(),
				web("p2", "b1").Phase(v1.PodSucceeded).Obj(),
				web("p3", "b1").Phase(v1.PodFailed).Obj(),
				web("p4", "c1").Terminating().Obj(),
				web("p5", "c1").Namespace("other").Obj(),
				web("p6", "").Obj(),
				web("p7", "gone").Obj(),
			},
			pod: incoming(zoneSpread).Obj(),
			want: &schedulerOutcome{
				Feasible: []string{"b1", "c1"}, Candidates: []string{"a1", "b1", "c1"},
				Spread: &spreadState{Domains: []map[string]int{{"a": 1, "b": 0, "c": 0}}, GlobalMin: []int{0}, SelfMatch: []int{1}},
			},
			rejecting: map[string][]string{"a1": {pts}},
		},
		{
			name:  "minDomains 4 over 3 zones, counts [1,1,1] -> global minimum 0, none feasible",
			nodes: threeZones,
			pods:  []*v1.Pod{web("p1", "a1").Obj(), web("p2", "b1").Obj(), web("p3", "c1").Obj()},
			pod:   incoming(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MinDomains(4)).Obj(),
			want: &schedulerOutcome{
				Feasible: []string{}, Candidates: []string{"a1", "b1", "c1"},
				Spread: &spreadState{Domains: []map[string]int{{"a": 1, "b": 1, "c": 1}}, GlobalMin: []int{0}, SelfMatch: []int{1}},
			},
			rejecting: map[string][]string{"a1": {pts}, "b1": {pts}, "c1": {pts}},
		},
		{
			name:  "node without the zone label is never feasible under a zone constraint",
			nodes: []*v1.Node{threeZones[0], spreadtest.MakeNode().Name("bare").Obj()},
			pod:   incoming(zoneSpread).Obj(),
			want: &schedulerOutcome{
				Feasible: []string{"a1"}, Candidates: []string{"a1", "bare"},
				Spread: &spreadState{Domains: []map[string]int{{"a": 0}}, GlobalMin: []int{0}, SelfMatch: []int{1}},
			},
			rejecting: map[string][]string{"bare": {pts}},
		},
		{
			name:  "required affinity to a node that does not exist -> no node to filter, no domain counted",
			nodes: threeZones,
			pod:   incoming(zoneSpread).NodeAffinityField("metadata.name", v1.NodeSelectorOpIn, "gone").Obj(),
			want: &schedulerOutcome{
				Feasible: []string{}, Candidates: []string{},
				Spread: &spreadState{Domains: []map[string]int{{}}, GlobalMin: []int{0}, SelfMatch: []int{1}},
			},
			rejecting: map[string][]string{"a1": {affinity}, "b1": {affinity}, "c1": {affinity}},
		},
		{
			name:  "required affinity terms naming different nodes by field -> rejected in PreFilter",
			nodes: threeZones,
			pod: incoming(zoneSpread).NodeAffinityField("metadata.name", v1.NodeSelectorOpIn, "a1").
				NodeAffinityField("metadata.name", v1.NodeSelectorOpIn, "b1").Obj(),
			want:      &schedulerOutcome{Feasible: []string{}, Candidates: []string{}},
			rejecting: map[string][]string{"a1": {affinity}, "b1": {affinity}, "c1": {affinity}},
		},
		{
			name:      "soft constraints only -> PodTopologySpread skips, every schedulable node fits",
			nodes:     []*v1.Node{threeZones[0], threeZones[1], zoneNode("c1", "c").Unschedulable().Obj()},
			pods:      counts33,
			pod:       incoming(spreadtest.Constraint(1, v1.LabelTopologyZone).ScheduleAnyway()).Obj(),
			want:      &schedulerOutcome{Feasible: []string{"a1", "b1"}, Candidates: []string{"a1", "b1"}},
			rejecting: map[string][]string{"c1": {unsched}},
		},
	}
	sched := newScheduler(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sched.run(t.Context(), tt.nodes, tt.pods, tt.pod)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if d := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(schedulerOutcome{}, "Rejections", "Labels")); d != "" {
				t.Errorf("scheduler outcome (-want +got):\n%s", d)
			}
			rejecting := map[string][]string{}
			for node, plugins := range got.Rejections {
				for _, p := range filterPlugins {
					if _, ok := plugins[p]; ok {
						rejecting[node] = append(rejecting[node], p)
					}
				}
			}
			if d := cmp.Diff(tt.rejecting, rejecting, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("plugins rejecting each node alone (-want +got):\n%s", d)
			}
		})
	}
}
