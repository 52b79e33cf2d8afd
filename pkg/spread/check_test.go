package spread_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// checkBoth runs Snapshot.Check and Index.Check on the same state, fails
// unless the whole Results agree, and returns the result. The index is
// built twice: from the snapshot, and from events with every pod arriving
// before its node.
func checkBoth(t *testing.T, snap spread.Snapshot, pod *v1.Pod, opts spread.Options) (*spread.Result, error) {
	t.Helper()
	want, wantErr := snap.Check(pod, opts)
	podsFirst := spread.NewIndex()
	for _, p := range snap.Pods {
		podsFirst.AddPod(p)
	}
	for _, n := range snap.Nodes {
		podsFirst.AddNode(n)
	}
	podsFirst.SetTemplates(snap.Templates)
	podsFirst.SetUnservedZones(snap.UnservedZones)
	for name, ix := range map[string]*spread.Index{"IndexFromSnapshot": spread.IndexFromSnapshot(snap), "pods before nodes": podsFirst} {
		got, err := ix.Check(pod, opts)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: Index.Check() error = %v, Snapshot.Check() error = %v", name, err, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: Index.Check() differs from Snapshot.Check() with %+v (-snapshot +index):\n%s", name, opts, diff)
		}
	}
	return want, wantErr
}

// resultWrapper builds the ConstraintResult a check is expected to report.
type resultWrapper struct{ r spread.ConstraintResult }

// counted is the ConstraintResult of the pod's first hard constraint on
// key with maxSkew 1, selector foo=bar (which the incoming pod matches),
// the scheduler's defaults (minDomains 1, nodeAffinityPolicy Honor,
// nodeTaintsPolicy Ignore), a global minimum of 0 and no domain. The
// methods set what differs.
func counted(key string) *resultWrapper {
	return &resultWrapper{spread.ConstraintResult{
		TopologyKey: key, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule, MinDomains: 1,
		NodeAffinityPolicy: v1.NodeInclusionPolicyHonor, NodeTaintsPolicy: v1.NodeInclusionPolicyIgnore,
		Selector: "foo=bar", SelfMatch: 1, Domains: map[string]int{},
	}}
}

func (w *resultWrapper) Obj() spread.ConstraintResult { return w.r }

// Index is the constraint's position in spec.topologySpreadConstraints.
func (w *resultWrapper) Index(i int) *resultWrapper { w.r.Index = i; return w }

func (w *resultWrapper) MaxSkew(n int32) *resultWrapper { w.r.MaxSkew = n; return w }

func (w *resultWrapper) MinDomains(n int32) *resultWrapper { w.r.MinDomains = n; return w }

func (w *resultWrapper) NodeAffinityPolicy(p v1.NodeInclusionPolicy) *resultWrapper {
	w.r.NodeAffinityPolicy = p
	return w
}

func (w *resultWrapper) NodeTaintsPolicy(p v1.NodeInclusionPolicy) *resultWrapper {
	w.r.NodeTaintsPolicy = p
	return w
}

// Selector is the selector's string form, matchLabelKeys merged.
func (w *resultWrapper) Selector(sel string) *resultWrapper { w.r.Selector = sel; return w }

func (w *resultWrapper) SelfMatch(n int) *resultWrapper { w.r.SelfMatch = n; return w }

func (w *resultWrapper) GlobalMin(n int) *resultWrapper { w.r.GlobalMin = n; return w }

// Domains are the domains with a matching pod: a check without Explain
// lists no empty domain.
func (w *resultWrapper) Domains(m map[string]int) *resultWrapper { w.r.Domains = m; return w }

// DomainCount is the number of counted domains, empty ones included.
func (w *resultWrapper) DomainCount(n int) *resultWrapper { w.r.DomainCount = n; return w }

// feasibleOn is the Result of a pod that n nodes can take.
func feasibleOn(n int, constraints ...*resultWrapper) *spread.Result {
	return &spread.Result{Verdict: spread.VerdictFeasible, Constraints: objs(constraints), FeasibleCount: n}
}

// unsatisfiable is the Result of a pod the spread constraints keep off
// every node it could use.
func unsatisfiable(constraints ...*resultWrapper) *spread.Result {
	return &spread.Result{Verdict: spread.VerdictUnsatisfiable, Constraints: objs(constraints)}
}

// noCandidates is the Result of a pod no node takes, spread aside.
func noCandidates(constraints ...*resultWrapper) *spread.Result {
	return &spread.Result{Verdict: spread.VerdictNoCandidateNodes, Constraints: objs(constraints)}
}

func objs(ws []*resultWrapper) []spread.ConstraintResult {
	out := make([]spread.ConstraintResult, len(ws))
	for i, w := range ws {
		out[i] = w.Obj()
	}
	return out
}

// fooPods puts one pod labelled foo=bar on each named node.
// bazPods are foo=baz pods bound to nodes: a label set of their own, which
// a selector for foo=bar must pass over.
func bazPods(nodes ...string) []*v1.Pod {
	var out []*v1.Pod
	for i, n := range nodes {
		out = append(out, st.MakePod().Name(fmt.Sprintf("baz-%d", i)).Label("foo", "baz").Node(n).Obj())
	}
	return out
}

func fooPods(nodes ...string) []*v1.Pod {
	var out []*v1.Pod
	for i, n := range nodes {
		out = append(out, st.MakePod().Name(fmt.Sprintf("foo-%d", i)).Label("foo", "bar").Node(n).Obj())
	}
	return out
}

func zoneNode(name, zone string) *st.NodeWrapper { return st.MakeNode().Name(name).Zone(zone) }

var (
	zoneConstraint = func() *st.ConstraintWrapper {
		return st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar")
	}
	hostConstraint = func() *st.ConstraintWrapper {
		return st.Constraint(1, v1.LabelHostname).MatchLabel("foo", "bar")
	}
	incoming = func() *st.PodWrapper { return st.MakePod().Name("incoming").Label("foo", "bar") }
)

type checkCase struct {
	name  string
	nodes []*v1.Node
	pods  []*v1.Pod
	pod   *v1.Pod
	// want is the Result without Explain, Message aside.
	want *spread.Result
	// wantFeasible and wantExcluded are checked with Explain.
	wantFeasible []string
	wantExcluded map[string]spread.ExclusionReason
	// wantMessage are fragments the message must contain.
	wantMessage []string
}

func runCheckCases(t *testing.T, tests []checkCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := spread.Snapshot{Nodes: tc.nodes, Pods: tc.pods}
			got, err := checkBoth(t, snap, tc.pod, spread.Options{})
			if err != nil {
				t.Fatalf("Check() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(spread.Result{}, "Message")); diff != "" {
				t.Errorf("Check() (-want +got):\n%s", diff)
			}
			for _, frag := range tc.wantMessage {
				if !strings.Contains(got.Message, frag) {
					t.Errorf("Check() message lacks %q:\n%s", frag, got.Message)
				}
			}
			explained, err := checkBoth(t, snap, tc.pod, spread.Options{Explain: true})
			if err != nil {
				t.Fatalf("Check(Explain) error = %v", err)
			}
			if explained.Message != got.Message || explained.Verdict != got.Verdict || explained.FeasibleCount != got.FeasibleCount {
				t.Errorf("Check(Explain) verdict/count/message %s/%d/%q, without Explain %s/%d/%q",
					explained.Verdict, explained.FeasibleCount, explained.Message, got.Verdict, got.FeasibleCount, got.Message)
			}
			if diff := cmp.Diff(tc.wantFeasible, explained.FeasibleNodes); diff != "" {
				t.Errorf("Check(Explain) feasible nodes (-want +got):\n%s", diff)
			}
			if tc.wantExcluded != nil {
				gotExcluded := map[string]spread.ExclusionReason{}
				for _, e := range explained.Excluded {
					gotExcluded[e.Name] = e.Reason
				}
				if diff := cmp.Diff(tc.wantExcluded, gotExcluded); diff != "" {
					t.Errorf("Check(Explain) excluded nodes (-want +got):\n%s", diff)
				}
			}
			for i, c := range explained.Constraints {
				for d, n := range got.Constraints[i].Domains {
					if c.Domains[d] != n {
						t.Errorf("constraint %d domain %q: %d with Explain, %d without", i, d, c.Domains[d], n)
					}
				}
				if len(c.Domains) != c.DomainCount {
					t.Errorf("constraint %d: Explain lists %d domains, DomainCount is %d", i, len(c.Domains), c.DomainCount)
				}
			}
		})
	}
}

// The PodTopologySpread examples of the seed documents: a 4-node cluster,
// node1 and node2 in zoneA, node3 and node4 in zoneB, with foo=bar pods on
// node1, node2 and node3.
func TestCheckSeedExamples(t *testing.T) {
	fourNodes := []*v1.Node{
		zoneNode("node1", "zoneA").Obj(), zoneNode("node2", "zoneA").Obj(),
		zoneNode("node3", "zoneB").Obj(), zoneNode("node4", "zoneB").Obj(),
	}
	threePods := fooPods("node1", "node2", "node3")
	zoneAB := map[string]int{"zoneA": 2, "zoneB": 1}
	hosts := map[string]int{"node1": 1, "node2": 1, "node3": 1}
	runCheckCases(t, []checkCase{
		{
			name:  "single constraint: zones [2,1], maxSkew 1 -> only zoneB (node3, node4)",
			nodes: fourNodes, pods: threePods,
			pod:          incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         feasibleOn(2, counted(v1.LabelTopologyZone).GlobalMin(1).Domains(zoneAB).DomainCount(2)),
			wantFeasible: []string{"node3", "node4"},
			wantExcluded: map[string]spread.ExclusionReason{"node1": spread.ReasonSkew, "node2": spread.ReasonSkew},
		},
		{
			name:  "single constraint with maxSkew 2: zones [2,1] -> every node",
			nodes: fourNodes, pods: threePods,
			pod:          incoming().SpreadConstraint(st.Constraint(2, v1.LabelTopologyZone).MatchLabel("foo", "bar").Obj()).Obj(),
			want:         feasibleOn(4, counted(v1.LabelTopologyZone).MaxSkew(2).GlobalMin(1).Domains(zoneAB).DomainCount(2)),
			wantFeasible: []string{"node1", "node2", "node3", "node4"},
			wantExcluded: map[string]spread.ExclusionReason{},
		},
		{
			name:  "single constraint per node: nodes [1,1,1,0], maxSkew 1 -> only node4",
			nodes: fourNodes, pods: threePods,
			pod:          incoming().SpreadConstraint(hostConstraint().Obj()).Obj(),
			want:         feasibleOn(1, counted(v1.LabelHostname).Domains(hosts).DomainCount(4)),
			wantFeasible: []string{"node4"},
		},
		{
			name:  "two constraints, zone and node: zoneB and node4 -> only node4",
			nodes: fourNodes, pods: threePods,
			pod: incoming().SpreadConstraint(zoneConstraint().Obj()).SpreadConstraint(hostConstraint().Obj()).Obj(),
			want: feasibleOn(1,
				counted(v1.LabelTopologyZone).GlobalMin(1).Domains(zoneAB).DomainCount(2),
				counted(v1.LabelHostname).Index(1).Domains(hosts).DomainCount(4)),
			wantFeasible: []string{"node4"},
			wantExcluded: map[string]spread.ExclusionReason{"node1": spread.ReasonSkew, "node2": spread.ReasonSkew, "node3": spread.ReasonSkew},
		},
		{
			name: "conflicting constraints: zones [3,2] allow only zoneB, nodes [2,1,2] allow only node2 in zoneA -> unsatisfiable",
			nodes: []*v1.Node{
				zoneNode("node1", "zoneA").Obj(), zoneNode("node2", "zoneA").Obj(), zoneNode("node3", "zoneB").Obj(),
			},
			pods: fooPods("node1", "node1", "node2", "node3", "node3"),
			pod:  incoming().SpreadConstraint(zoneConstraint().Obj()).SpreadConstraint(hostConstraint().Obj()).Obj(),
			want: unsatisfiable(
				counted(v1.LabelTopologyZone).GlobalMin(2).Domains(map[string]int{"zoneA": 3, "zoneB": 2}).DomainCount(2),
				counted(v1.LabelHostname).Index(1).GlobalMin(1).Domains(map[string]int{"node1": 2, "node2": 1, "node3": 2}).DomainCount(3)),
			wantExcluded: map[string]spread.ExclusionReason{"node1": spread.ReasonSkew, "node2": spread.ReasonSkew, "node3": spread.ReasonSkew},
			wantMessage: []string{
				"spec.topologySpreadConstraints[0] (topologyKey topology.kubernetes.io/zone, maxSkew 1)",
				"spec.topologySpreadConstraints[1] (topologyKey kubernetes.io/hostname, maxSkew 1) together",
				"the 1 node the first allows (node3)", "zoneA=3, zoneB=2", "node1=2, node2=1, node3=2",
				"raise maxSkew of spec.topologySpreadConstraints[1] to 2",
			},
		},
	})
}

func TestCheckTraps(t *testing.T) {
	// Zones a and b hold 2 foo=bar pods each; the 2 nodes of zone c are
	// cordoned, carrying the node.kubernetes.io/unschedulable taint.
	cordonedZone := []*v1.Node{
		zoneNode("a1", "a").Obj(), zoneNode("a2", "a").Obj(),
		zoneNode("b1", "b").Obj(), zoneNode("b2", "b").Obj(),
		zoneNode("c1", "c").Taint(v1.TaintNodeUnschedulable, "", v1.TaintEffectNoSchedule).Obj(),
		zoneNode("c2", "c").Taint(v1.TaintNodeUnschedulable, "", v1.TaintEffectNoSchedule).Obj(),
	}
	fourPods := fooPods("a1", "a2", "b1", "b2")
	threeZones := []*v1.Node{zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj(), zoneNode("c1", "c").Obj()}

	runCheckCases(t, []checkCase{
		{
			name:  "3 zones, counts [2,2,0], zone c tainted unschedulable, nodeTaintsPolicy Ignore -> c pins the minimum at 0, unsatisfiable",
			nodes: cordonedZone, pods: fourPods,
			pod:  incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want: unsatisfiable(counted(v1.LabelTopologyZone).Domains(map[string]int{"a": 2, "b": 2}).DomainCount(3)),
			wantExcluded: map[string]spread.ExclusionReason{
				"a1": spread.ReasonSkew, "a2": spread.ReasonSkew, "b1": spread.ReasonSkew, "b2": spread.ReasonSkew,
				"c1": spread.ReasonUntoleratedTaint, "c2": spread.ReasonUntoleratedTaint,
			},
			wantMessage: []string{
				"spec.topologySpreadConstraints[0] (topologyKey topology.kubernetes.io/zone, maxSkew 1)",
				"a=2, b=2, c=0", "global minimum of spec.topologySpreadConstraints[0] is 0: zone c has the fewest",
				"2 nodes (c1, c2) in zone c are excluded: untolerated taint node.kubernetes.io/unschedulable:NoSchedule",
				"Remedy: set nodeTaintsPolicy: Honor",
			},
		},
		{
			name:  "same cluster, nodeTaintsPolicy Honor -> zone c is not counted, counts [2,2], feasible everywhere but c",
			nodes: cordonedZone, pods: fourPods,
			pod:          incoming().SpreadConstraint(zoneConstraint().NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()).Obj(),
			want:         feasibleOn(4, counted(v1.LabelTopologyZone).GlobalMin(2).Domains(map[string]int{"a": 2, "b": 2}).DomainCount(2).NodeTaintsPolicy(v1.NodeInclusionPolicyHonor)),
			wantFeasible: []string{"a1", "a2", "b1", "b2"},
			wantExcluded: map[string]spread.ExclusionReason{"c1": spread.ReasonUntoleratedTaint, "c2": spread.ReasonUntoleratedTaint},
		},
		{
			name: "zone c cordoned by spec.unschedulable only, nodeTaintsPolicy Honor -> Honor reads taints only, still unsatisfiable",
			nodes: []*v1.Node{
				zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj(), zoneNode("c1", "c").Unschedulable().Obj(),
			},
			pods:         fooPods("a1", "b1"),
			pod:          incoming().SpreadConstraint(zoneConstraint().NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()).Obj(),
			want:         unsatisfiable(counted(v1.LabelTopologyZone).Domains(map[string]int{"a": 1, "b": 1}).DomainCount(3).NodeTaintsPolicy(v1.NodeInclusionPolicyHonor)),
			wantExcluded: map[string]spread.ExclusionReason{"a1": spread.ReasonSkew, "b1": spread.ReasonSkew, "c1": spread.ReasonUnschedulable},
			wantMessage:  []string{"node c1 in zone c is excluded: cordoned (spec.unschedulable)", "Remedy: uncordon the nodes in zone c"},
		},
		{
			name:  "cordoned zone, but the pod tolerates node.kubernetes.io/unschedulable -> zone c is usable and feasible",
			nodes: cordonedZone, pods: fourPods,
			pod: incoming().Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).
				SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         feasibleOn(2, counted(v1.LabelTopologyZone).Domains(map[string]int{"a": 2, "b": 2}).DomainCount(3)),
			wantFeasible: []string{"c1", "c2"},
		},
		{
			name:        "2 zones, counts [1,1], minDomains 3 -> global minimum 0 from too few domains, unsatisfiable",
			nodes:       []*v1.Node{zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj()},
			pods:        fooPods("a1", "b1"),
			pod:         incoming().SpreadConstraint(zoneConstraint().MinDomains(3).Obj()).Obj(),
			want:        unsatisfiable(counted(v1.LabelTopologyZone).Domains(map[string]int{"a": 1, "b": 1}).DomainCount(2).MinDomains(3)),
			wantMessage: []string{"is 0: fewer domains (2) than minDomains (3)", "Remedy: add nodes the pod can use in 1 more domain, labelled topology.kubernetes.io/zone, or lower minDomains to 2"},
		},
		{
			name:         "2 zones, counts [0,0], minDomains 3 -> 0 + 1 - 0 <= 1, feasible",
			nodes:        []*v1.Node{zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj()},
			pod:          incoming().SpreadConstraint(zoneConstraint().MinDomains(3).Obj()).Obj(),
			want:         feasibleOn(2, counted(v1.LabelTopologyZone).DomainCount(2).MinDomains(3)),
			wantFeasible: []string{"a1", "b1"},
		},
		{
			name: "node without the zone label -> left out of counting and not feasible",
			nodes: []*v1.Node{
				zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj(), st.MakeNode().Name("bare").Obj(),
			},
			pods:         fooPods("a1", "bare", "bare"),
			pod:          incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         feasibleOn(1, counted(v1.LabelTopologyZone).Domains(map[string]int{"a": 1}).DomainCount(2)),
			wantFeasible: []string{"b1"},
			wantExcluded: map[string]spread.ExclusionReason{"a1": spread.ReasonSkew, "bare": spread.ReasonMissingTopologyKey},
		},
		{
			name:        "no node carries the zone label -> unsatisfiable, remedy is to label nodes",
			nodes:       []*v1.Node{st.MakeNode().Name("n1").Obj(), st.MakeNode().Name("n2").Obj()},
			pod:         incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:        unsatisfiable(counted(v1.LabelTopologyZone)),
			wantMessage: []string{"2 nodes (n1, n2) lack the label topology.kubernetes.io/zone", "Remedy: label the nodes"},
		},
		{
			name:  "nodeSelector confines the pod to zone a holding 2 pods, nodeAffinityPolicy Honor -> only zone a counts, feasible",
			nodes: threeZones, pods: fooPods("a1", "a1"),
			pod:          incoming().NodeSelector(v1.LabelTopologyZone, "a").SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         feasibleOn(1, counted(v1.LabelTopologyZone).GlobalMin(2).Domains(map[string]int{"a": 2}).DomainCount(1)),
			wantFeasible: []string{"a1"},
			wantExcluded: map[string]spread.ExclusionReason{"b1": spread.ReasonNodeAffinity, "c1": spread.ReasonNodeAffinity},
		},
		{
			name:  "nodeSelector confines the pod to full zone a, nodeAffinityPolicy Ignore -> empty zones count, unsatisfiable",
			nodes: threeZones, pods: fooPods("a1", "a1"),
			pod: incoming().NodeSelector(v1.LabelTopologyZone, "a").
				SpreadConstraint(zoneConstraint().NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj(),
			want:        unsatisfiable(counted(v1.LabelTopologyZone).Domains(map[string]int{"a": 2}).DomainCount(3).NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore)),
			wantMessage: []string{"zone a (2 + 1 - 0 = 3)", "Remedy: set nodeAffinityPolicy: Honor"},
		},
		{
			name:  "required node affinity NotIn zone a,b -> only zone c, feasible",
			nodes: threeZones, pods: fooPods("a1", "b1"),
			pod:          incoming().NodeAffinityNotIn(v1.LabelTopologyZone, "a", "b").SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         feasibleOn(1, counted(v1.LabelTopologyZone).DomainCount(1)),
			wantFeasible: []string{"c1"},
		},
		{
			name:  "terminating, Succeeded and Failed pods, other namespaces and unbound pods are not counted -> [2,0,0]",
			nodes: threeZones,
			pods: []*v1.Pod{
				st.MakePod().Name("counted").Label("foo", "bar").Node("a1").Obj(),
				st.MakePod().Name("terminating").Label("foo", "bar").Node("b1").Terminating().Obj(),
				st.MakePod().Name("succeeded").Label("foo", "bar").Node("b1").Phase(v1.PodSucceeded).Obj(),
				st.MakePod().Name("failed").Label("foo", "bar").Node("b1").Phase(v1.PodFailed).Obj(),
				st.MakePod().Name("elsewhere").Namespace("other").Label("foo", "bar").Node("c1").Obj(),
				st.MakePod().Name("pending").Label("foo", "bar").Obj(),
				st.MakePod().Name("on-unknown-node").Label("foo", "bar").Node("gone").Obj(),
				st.MakePod().Name("running").Label("foo", "bar").Node("a1").Phase(v1.PodRunning).Obj(),
			},
			pod:          incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         feasibleOn(2, counted(v1.LabelTopologyZone).Domains(map[string]int{"a": 2}).DomainCount(3)),
			wantFeasible: []string{"b1", "c1"},
		},
		{
			name:  "matchLabelKeys pod-template-hash: only the pods of the same revision count -> [1,0,0]",
			nodes: threeZones,
			pods: []*v1.Pod{
				st.MakePod().Name("old-1").Label("foo", "bar").Label("pod-template-hash", "v1").Node("b1").Obj(),
				st.MakePod().Name("old-2").Label("foo", "bar").Label("pod-template-hash", "v1").Node("c1").Obj(),
				st.MakePod().Name("new-1").Label("foo", "bar").Label("pod-template-hash", "v2").Node("a1").Obj(),
			},
			pod:          incoming().Label("pod-template-hash", "v2").SpreadConstraint(zoneConstraint().MatchLabelKeys("pod-template-hash").Obj()).Obj(),
			want:         feasibleOn(2, counted(v1.LabelTopologyZone).Selector("foo=bar,pod-template-hash=v2").Domains(map[string]int{"a": 1}).DomainCount(3)),
			wantFeasible: []string{"b1", "c1"},
		},
		{
			name:  "selector foo In [bar, bar], zones [1,0,0] beside foo=baz pods, maxSkew 2 -> a selector is a set: counts [1,0,0], every node feasible",
			nodes: threeZones, pods: append(fooPods("a1"), bazPods("b1", "c1")...),
			pod: incoming().SpreadConstraint(st.Constraint(2, v1.LabelTopologyZone).DoNotSchedule().
				MatchExpression("foo", metav1.LabelSelectorOpIn, "bar", "bar").Obj()).Obj(),
			want:         feasibleOn(3, counted(v1.LabelTopologyZone).MaxSkew(2).Selector("foo in (bar,bar)").Domains(map[string]int{"a": 1}).DomainCount(3)),
			wantFeasible: []string{"a1", "b1", "c1"},
		},
		{
			name:  "selector foo In [bar] twice beside foo Exists, zones [2,1,1] beside foo=baz pods, maxSkew 1 -> counts [2,1,1], zone a excluded",
			nodes: threeZones, pods: append(fooPods("a1", "a1", "b1", "c1"), bazPods("b1", "b1", "c1")...),
			pod: incoming().SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().
				MatchExpression("foo", metav1.LabelSelectorOpIn, "bar").
				MatchExpression("foo", metav1.LabelSelectorOpIn, "bar").
				MatchExpression("foo", metav1.LabelSelectorOpExists).Obj()).Obj(),
			want:         feasibleOn(2, counted(v1.LabelTopologyZone).Selector("foo in (bar),foo in (bar),foo").GlobalMin(1).Domains(map[string]int{"a": 2, "b": 1, "c": 1}).DomainCount(3)),
			wantFeasible: []string{"b1", "c1"},
			wantExcluded: map[string]spread.ExclusionReason{"a1": spread.ReasonSkew},
		},
		{
			name:  "empty labelSelector -> counts no pods but the pod matches itself",
			nodes: threeZones, pods: fooPods("a1", "a1", "a1"),
			pod:          incoming().SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).Selector(&metav1.LabelSelector{}).Obj()).Obj(),
			want:         feasibleOn(3, counted(v1.LabelTopologyZone).Selector("").DomainCount(3)),
			wantFeasible: []string{"a1", "b1", "c1"},
		},
		{
			name:  "nil labelSelector -> selects nothing, not even the pod",
			nodes: threeZones, pods: fooPods("a1", "a1", "a1"),
			pod:          incoming().SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).Obj()).Obj(),
			want:         feasibleOn(3, counted(v1.LabelTopologyZone).Selector("").SelfMatch(0).DomainCount(3)),
			wantFeasible: []string{"a1", "b1", "c1"},
		},
		{
			name: "every node tainted NoExecute -> no candidate node, not a spread problem",
			nodes: []*v1.Node{
				zoneNode("a1", "a").Taint("dedicated", "gpu", v1.TaintEffectNoExecute).Obj(),
				zoneNode("b1", "b").Taint("dedicated", "gpu", v1.TaintEffectNoSchedule).Obj(),
			},
			pod:          incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         noCandidates(counted(v1.LabelTopologyZone).DomainCount(2)),
			wantExcluded: map[string]spread.ExclusionReason{"a1": spread.ReasonUntoleratedTaint, "b1": spread.ReasonUntoleratedTaint},
			wantMessage:  []string{"topology spread is not what keeps it from being scheduled"},
		},
		{
			name: "PreferNoSchedule taint and a tolerated taint -> ignored, feasible",
			nodes: []*v1.Node{
				zoneNode("a1", "a").Taint("soft", "", v1.TaintEffectPreferNoSchedule).Obj(),
				zoneNode("b1", "b").Taint("dedicated", "web", v1.TaintEffectNoSchedule).Obj(),
			},
			pod:          incoming().Toleration("dedicated", v1.TolerationOpEqual, "web", "").SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want:         feasibleOn(2, counted(v1.LabelTopologyZone).DomainCount(2)),
			wantFeasible: []string{"a1", "b1"},
		},
		{
			name: "Gt toleration with the comparison operators gate off (v1.37 default) -> tolerates nothing",
			nodes: []*v1.Node{
				zoneNode("a1", "a").Taint("tier", "5", v1.TaintEffectNoSchedule).Obj(),
			},
			pod:  incoming().Toleration("tier", v1.TolerationOpGt, "1", v1.TaintEffectNoSchedule).SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want: noCandidates(counted(v1.LabelTopologyZone).DomainCount(1)),
		},
		{
			name:  "only ScheduleAnyway constraints -> no hard constraints",
			nodes: threeZones, pods: fooPods("a1", "a1"),
			pod: incoming().SpreadConstraint(zoneConstraint().ScheduleAnyway().Obj()).Obj(),
			want: &spread.Result{
				Verdict:       spread.VerdictNoHardConstraints,
				Constraints:   []spread.ConstraintResult{},
				FeasibleCount: 3,
			},
			wantFeasible: []string{"a1", "b1", "c1"},
		},
	})
}

func TestCheckRejectsInvalidConstraints(t *testing.T) {
	nodes := []*v1.Node{zoneNode("a1", "a").Obj()}
	tests := []struct {
		name string
		pod  *v1.Pod
	}{
		{"maxSkew 0", incoming().SpreadConstraint(st.Constraint(0, v1.LabelTopologyZone).Obj()).Obj()},
		{"empty topologyKey", incoming().SpreadConstraint(st.Constraint(1, "").Obj()).Obj()},
		{"minDomains 0", incoming().SpreadConstraint(zoneConstraint().MinDomains(0).Obj()).Obj()},
		{"unknown nodeTaintsPolicy", incoming().SpreadConstraint(zoneConstraint().NodeTaintsPolicy("Sometimes").Obj()).Obj()},
		{"unknown nodeAffinityPolicy", incoming().SpreadConstraint(zoneConstraint().NodeAffinityPolicy("Sometimes").Obj()).Obj()},
		{"selector with an unknown operator", incoming().SpreadConstraint(zoneConstraint().MatchExpression("foo", "Like", "b").Obj()).Obj()},
	}
	for _, tc := range tests {
		t.Run(tc.name+" -> ErrInvalidConstraint", func(t *testing.T) {
			_, err := checkBoth(t, spread.Snapshot{Nodes: nodes}, tc.pod, spread.Options{})
			if !errors.Is(err, spread.ErrInvalidConstraint) {
				t.Errorf("Check() error = %v, want ErrInvalidConstraint", err)
			}
		})
	}
	if _, err := spread.NewIndex().Check(nil, spread.Options{}); err == nil {
		t.Error("Index.Check(nil) returned no error")
	}
	if _, err := (spread.Snapshot{}).Check(nil, spread.Options{}); err == nil {
		t.Error("Snapshot.Check(nil) returned no error")
	}
}
