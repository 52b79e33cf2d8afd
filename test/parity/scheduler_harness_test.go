package parity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/spreadguard/spreadguard/pkg/spread"
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

// TestSchedulerHarnessTemplates pins the scheduler's outcome on the fresh
// node of a template, added alone to the cluster, to outcomes worked out by
// hand.
func TestSchedulerHarnessTemplates(t *testing.T) {
	template := func(name string, node *spreadtest.NodeWrapper) spread.Template {
		n := node.Obj()
		return spread.Template{Name: name, Labels: n.Labels, Taints: n.Spec.Taints}
	}
	zone := func(z string) *spreadtest.NodeWrapper { return spreadtest.MakeNode().Zone(z) }
	web := func(name, node string) *v1.Pod {
		return spreadtest.MakePod().Name(name).Label("app", "web").Node(node).Phase(v1.PodRunning).Obj()
	}
	twoZones := []*v1.Node{spreadtest.MakeNode().Name("a1").Zone("a").Obj(), spreadtest.MakeNode().Name("b1").Zone("b").Obj()}
	counts11 := []*v1.Pod{web("p1", "a1"), web("p2", "b1")}
	incoming := func() *spreadtest.PodWrapper { return spreadtest.MakePod().Name("incoming").Label("app", "web") }
	// minDomains 3 over two zones: the global minimum is 0, so each zone's
	// 1 + 1 - 0 = 2 exceeds maxSkew 1 and no existing node fits.
	threeDomains := func() *spreadtest.PodWrapper {
		return incoming().SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MinDomains(3).Obj())
	}

	pts, taints, affinity := names.PodTopologySpread, names.TaintToleration, names.NodeAffinity
	type outcome struct {
		Name                string
		Feasible, Candidate bool
		// Rejecting lists the plugins that reject the fresh node alone.
		Rejecting []string
	}
	tests := []struct {
		name      string
		nodes     []*v1.Node
		pods      []*v1.Pod
		templates []spread.Template
		pod       *v1.Pod
		want      []outcome
	}{
		{
			name:      "minDomains 3 over zones a and b with counts [1,1]: a template in the new zone c fits, one in zone a does not",
			nodes:     twoZones,
			pods:      counts11,
			templates: []spread.Template{template("zone-c", zone("c")), template("zone-a", zone("a"))},
			pod:       threeDomains().Obj(),
			want: []outcome{
				{Name: "zone-a", Candidate: true, Rejecting: []string{pts}},
				{Name: "zone-c", Feasible: true, Candidate: true},
			},
		},
		{
			name:  "a NoSchedule taint, and the unschedulable taint copied from a cordoned node, keep a template out; PreferNoSchedule does not",
			nodes: twoZones,
			pods:  counts11,
			templates: []spread.Template{
				template("infra", zone("c").Taint("dedicated", "infra", v1.TaintEffectNoSchedule)),
				template("copied", zone("c").Taint(v1.TaintNodeUnschedulable, "", v1.TaintEffectNoSchedule)),
				template("spot", zone("c").Taint("spot", "true", v1.TaintEffectPreferNoSchedule)),
			},
			pod: threeDomains().Obj(),
			want: []outcome{
				{Name: "copied", Rejecting: []string{taints}},
				{Name: "infra", Rejecting: []string{taints}},
				{Name: "spot", Feasible: true, Candidate: true},
			},
		},
		{
			name:      "a tolerated taint lets the template in",
			nodes:     twoZones,
			pods:      counts11,
			templates: []spread.Template{template("infra", zone("c").Taint("dedicated", "infra", v1.TaintEffectNoSchedule))},
			pod:       threeDomains().Toleration("dedicated", v1.TolerationOpExists, "", "").Obj(),
			want:      []outcome{{Name: "infra", Feasible: true, Candidate: true}},
		},
		{
			name:  "a template that fails the nodeSelector is no candidate; one without the zone label is a candidate PodTopologySpread rejects",
			nodes: twoZones,
			pods:  counts11,
			templates: []spread.Template{
				template("hdd", zone("c").Label("disk", "hdd")),
				template("zoneless", spreadtest.MakeNode().Label("disk", "ssd")),
			},
			pod: threeDomains().NodeSelector("disk", "ssd").Obj(),
			want: []outcome{
				{Name: "hdd", Rejecting: []string{affinity}},
				{Name: "zoneless", Candidate: true, Rejecting: []string{pts}},
			},
		},
		{
			name:  "hostname counts {a1:2, b1:1}, maxSkew 1: a fresh hostname is a new domain with 0 pods and fits; a template copying a1's hostname shares a1's domain and does not",
			nodes: twoZones,
			pods:  []*v1.Pod{web("p1", "a1"), web("p2", "a1"), web("p3", "b1")},
			templates: []spread.Template{
				template("fresh", zone("a")),
				template("copy-of-a1", zone("a").Label(v1.LabelHostname, "a1")),
			},
			pod: incoming().SpreadConstraint(spreadtest.Constraint(1, v1.LabelHostname).MatchLabel("app", "web").Obj()).Obj(),
			want: []outcome{
				{Name: "copy-of-a1", Candidate: true, Rejecting: []string{pts}},
				{Name: "fresh", Feasible: true, Candidate: true},
			},
		},
		{
			name:      "a name written twice: the later template counts",
			nodes:     twoZones,
			pods:      counts11,
			templates: []spread.Template{template("pool", zone("a")), template("pool", zone("c"))},
			pod:       threeDomains().Obj(),
			want:      []outcome{{Name: "pool", Feasible: true, Candidate: true}},
		},
	}
	sched := newScheduler(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sched.runTemplates(t.Context(), tt.nodes, tt.pods, tt.templates, tt.pod)
			if err != nil {
				t.Fatalf("runTemplates: %v", err)
			}
			var outcomes []outcome
			for _, o := range got {
				oc := outcome{Name: o.Name, Feasible: o.Feasible, Candidate: o.Candidate}
				for _, p := range filterPlugins {
					if _, ok := o.Rejections[p]; ok {
						oc.Rejecting = append(oc.Rejecting, p)
					}
				}
				outcomes = append(outcomes, oc)
			}
			if d := cmp.Diff(tt.want, outcomes, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("outcomes on the templates' fresh nodes (-want +got):\n%s", d)
			}
		})
	}
}
