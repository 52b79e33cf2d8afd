package spread_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// templateWrapper builds a spread.Template.
type templateWrapper struct{ t spread.Template }

func makeTemplate(name string) *templateWrapper {
	return &templateWrapper{spread.Template{Name: name, Source: "NodePool " + name, Labels: map[string]string{}}}
}

func (w *templateWrapper) Zone(z string) *templateWrapper {
	return w.Label(v1.LabelTopologyZone, z)
}

func (w *templateWrapper) Label(k, v string) *templateWrapper { w.t.Labels[k] = v; return w }

func (w *templateWrapper) Taint(key, value string, effect v1.TaintEffect) *templateWrapper {
	w.t.Taints = append(w.t.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

func (w *templateWrapper) Obj() spread.Template { return w.t }

// webPods returns n running pods labelled foo=bar on each of the nodes.
func webPods(n int, nodes ...string) []*v1.Pod {
	var out []*v1.Pod
	for _, node := range nodes {
		for i := range n {
			out = append(out, st.MakePod().Name(fmt.Sprintf("%s-%d", node, i)).Label("foo", "bar").Node(node).Obj())
		}
	}
	return out
}

func TestCheckWithTemplates(t *testing.T) {
	twoZones := []*v1.Node{
		st.MakeNode().Name("a1").Zone("a").Obj(),
		st.MakeNode().Name("b1").Zone("b").Obj(),
	}
	cordonedC := append(twoZones[:2:2], st.MakeNode().Name("c1").Zone("c").Cordoned().Obj())
	zone := st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar")
	minDomains3 := st.MakePod().Name("incoming").Label("foo", "bar").
		SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar").MinDomains(3).Obj())
	countsCordoned := st.MakePod().Name("incoming").Label("foo", "bar").
		SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar").NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj())
	gpuOnly := st.MakePod().Name("incoming").Label("foo", "bar").NodeSelector("gpu", "true").
		Toleration("gpu", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).SpreadConstraint(zone.Obj())
	perHost := st.MakePod().Name("incoming").Label("foo", "bar").SpreadConstraint(st.Constraint(1, v1.LabelHostname).MatchLabel("foo", "bar").MinDomains(3).Obj())

	tests := []struct {
		name        string
		snap        spread.Snapshot
		pod         *v1.Pod
		wantVerdict spread.Verdict
		// wantFeasible are the feasible templates, with Explain.
		wantFeasible []string
		// wantMessage are substrings of the message, wantNoMessage
		// substrings it must not have.
		wantMessage, wantNoMessage []string
	}{
		{
			name: "minDomains 3, nodes in 2 zones with 1 pod each, a NodePool allowing zone c -> a new node in zone c would take it",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("nodepool/default/a").Zone("a").Obj(), makeTemplate("nodepool/default/c").Zone("c").Obj()}},
			pod:          minDomains3.Obj(),
			wantVerdict:  spread.VerdictFeasibleOnNewNode,
			wantFeasible: []string{"nodepool/default/c"},
			wantMessage:  []string{"no current node fits; a new node from NodePool nodepool/default/c in zone c would"},
		},
		{
			name: "minDomains 3, nodes in 2 zones, templates only in those zones -> unsatisfiable, the templates named",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("nodepool/default/a").Zone("a").Obj()}},
			pod:         minDomains3.Obj(),
			wantVerdict: spread.VerdictUnsatisfiable,
			wantMessage: []string{"No node an autoscaler can add fits either (1 template: nodepool/default/a would exceed maxSkew)."},
		},
		{
			name: "zone c cordoned and counted, a node group in zone c -> a new node in zone c would take it",
			snap: spread.Snapshot{Nodes: cordonedC, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("nodegroup/ng/c").Zone("c").Obj()}},
			pod:          countsCordoned.Obj(),
			wantVerdict:  spread.VerdictFeasibleOnNewNode,
			wantFeasible: []string{"nodegroup/ng/c"},
		},
		{
			name: "zone c cordoned, its node group's template tainted and not tolerated -> unsatisfiable",
			snap: spread.Snapshot{Nodes: cordonedC, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("nodegroup/ng/c").Zone("c").Taint("dedicated", "batch", v1.TaintEffectNoSchedule).Obj()}},
			pod:         countsCordoned.Obj(),
			wantVerdict: spread.VerdictUnsatisfiable,
			wantMessage: []string{"nodegroup/ng/c has a taint the pod does not tolerate (dedicated=batch:NoSchedule)"},
		},
		{
			name: "affinity fits only a GPU group scaled to zero -> a new node of that group would take it",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1"),
				Templates: []spread.Template{makeTemplate("gpu").Zone("a").Label("gpu", "true").Taint("gpu", "true", v1.TaintEffectNoSchedule).Obj()}},
			pod:          gpuOnly.Obj(),
			wantVerdict:  spread.VerdictFeasibleOnNewNode,
			wantFeasible: []string{"gpu"},
		},
		{
			name:        "affinity fits neither a node nor a template -> no candidate nodes",
			snap:        spread.Snapshot{Nodes: twoZones, Templates: []spread.Template{makeTemplate("cpu").Zone("a").Obj()}},
			pod:         gpuOnly.Obj(),
			wantVerdict: spread.VerdictNoCandidateNodes,
		},
		{
			name: "a feasible node exists -> feasible, and with Explain the templates are listed too",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1"),
				Templates: []spread.Template{makeTemplate("b").Zone("b").Obj(), makeTemplate("a").Zone("a").Obj()}},
			pod:          st.MakePod().Name("incoming").Label("foo", "bar").SpreadConstraint(zone.Obj()).Obj(),
			wantVerdict:  spread.VerdictFeasible,
			wantFeasible: []string{"b"},
		},
		{
			name: "per-host spread with minDomains 3 on 2 hosts with 1 pod each, a template without a hostname -> its fresh host is the third domain",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("any").Zone("a").Obj()}},
			pod:          perHost.Obj(),
			wantVerdict:  spread.VerdictFeasibleOnNewNode,
			wantFeasible: []string{"any"},
			wantMessage:  []string{"no current node fits; a new node from NodePool any would"},
		},
		{
			name: "per-host spread with minDomains 3, a template whose hostname is an existing full host -> it joins that domain, unsatisfiable",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("a1-again").Label(v1.LabelHostname, "a1").Obj()}},
			pod:         perHost.Obj(),
			wantVerdict: spread.VerdictUnsatisfiable,
			wantMessage: []string{"a1-again would exceed maxSkew"},
		},
		{
			name: "minDomains 3, nodes in 2 zones with 1 pod each, a template only in zone b -> unsatisfiable, and no source reaches a third zone",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("nodepool/default/b").Zone("b").Obj()}},
			pod:         minDomains3.Obj(),
			wantVerdict: spread.VerdictUnsatisfiable,
			wantMessage: []string{
				"The nodes and every node an autoscaler can add reach only 2 domains of topology.kubernetes.io/zone, fewer than minDomains 3, " +
					"so the global minimum stays 0 and each domain is full at maxSkew 1 matching pod: the pods beyond stay Pending until a node exists in another domain.",
				"Remedy: let the autoscaler add nodes the pod can use in 1 more zone (the zones of a NodePool or of its node class, or the chart's autoscaler.zones), or lower minDomains to 2.",
			},
		},
		{
			name: "minDomains 4, nodes in 2 zones, a template in zone c with a taint the pod does not tolerate -> that zone is out of the pod's reach too",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("nodegroup/tainted/c").Zone("c").Taint("dedicated", "batch", v1.TaintEffectNoSchedule).Obj()}},
			pod: st.MakePod().Name("incoming").Label("foo", "bar").
				SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar").MinDomains(4).Obj()).Obj(),
			wantVerdict: spread.VerdictUnsatisfiable,
			wantMessage: []string{"reach only 2 domains of topology.kubernetes.io/zone, fewer than minDomains 4", "in 2 more zones", "or lower minDomains to 2."},
		},
		{
			name: "per-host spread with minDomains 3, a template whose hostname is an existing host -> only 2 hosts within reach",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("a1-again").Label(v1.LabelHostname, "a1").Obj()}},
			pod:         perHost.Obj(),
			wantVerdict: spread.VerdictUnsatisfiable,
			wantMessage: []string{"reach only 2 domains of kubernetes.io/hostname, fewer than minDomains 3", "in 1 more domain of kubernetes.io/hostname"},
		},
		{
			name: "minDomains 3, a template in zone c that another constraint rejects -> unsatisfiable, but zone c is within reach",
			snap: spread.Snapshot{Nodes: twoZones, Pods: append(webPods(2, "a1"), webPods(1, "b1")...),
				Templates: []spread.Template{makeTemplate("c-on-a1").Zone("c").Label(v1.LabelHostname, "a1").Obj()}},
			pod: st.MakePod().Name("incoming").Label("foo", "bar").
				SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar").MinDomains(3).Obj()).
				SpreadConstraint(st.Constraint(1, v1.LabelHostname).MatchLabel("foo", "bar").Obj()).Obj(),
			wantVerdict:   spread.VerdictUnsatisfiable,
			wantNoMessage: []string{"reach only"},
		},
		{
			name: "a template without the topology key -> not feasible",
			snap: spread.Snapshot{Nodes: twoZones, Pods: webPods(1, "a1", "b1"),
				Templates: []spread.Template{makeTemplate("zoneless").Obj()}},
			pod:         minDomains3.Obj(),
			wantVerdict: spread.VerdictUnsatisfiable,
			wantMessage: []string{"zoneless lacks a topology key of the pod's hard constraints (topology.kubernetes.io/zone)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := checkBoth(t, tt.snap, tt.pod, spread.Options{Explain: true})
			if err != nil {
				t.Fatal(err)
			}
			fast, err := checkBoth(t, tt.snap, tt.pod, spread.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tt.wantVerdict || fast.Verdict != tt.wantVerdict {
				t.Fatalf("verdict = %s (Explain), %s (without), want %s; message %q", res.Verdict, fast.Verdict, tt.wantVerdict, res.Message)
			}
			if diff := cmp.Diff(tt.wantFeasible, res.FeasibleTemplates); diff != "" {
				t.Errorf("feasible templates (-want +got):\n%s", diff)
			}
			if got := len(res.FeasibleTemplates) + len(res.ExcludedTemplates); got != len(tt.snap.Templates) {
				t.Errorf("%d templates feasible or excluded, want all %d accounted for", got, len(tt.snap.Templates))
			}
			if res.Message != fast.Message {
				t.Errorf("message with Explain %q differs from without %q", res.Message, fast.Message)
			}
			for _, s := range tt.wantMessage {
				if !strings.Contains(res.Message, s) {
					t.Errorf("message %q does not contain %q", res.Message, s)
				}
			}
			for _, s := range tt.wantNoMessage {
				if strings.Contains(res.Message, s) {
					t.Errorf("message %q contains %q", res.Message, s)
				}
			}
		})
	}
}

func TestAMinDomainsOutOfReachIsWordedAlikeUnderEveryMessageDetail(t *testing.T) {
	snap := spread.Snapshot{
		Nodes:     []*v1.Node{st.MakeNode().Name("a1").Zone("a").Obj(), st.MakeNode().Name("b1").Zone("b").Obj()},
		Pods:      webPods(1, "a1", "b1"),
		Templates: []spread.Template{makeTemplate("nodepool/secret-team/b").Zone("b").Obj()},
	}
	pod := st.MakePod().Name("incoming").Label("foo", "bar").
		SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar").MinDomains(3).Obj()).Obj()
	// outOfReach is the part of the message the out-of-reach case adds:
	// from its first sentence to the end of its remedy.
	outOfReach := func(detail spread.MessageDetail) string {
		t.Helper()
		res, err := checkBoth(t, snap, pod, spread.Options{Detail: detail})
		if err != nil {
			t.Fatal(err)
		}
		start := strings.Index(res.Message, "The nodes and every node an autoscaler can add")
		end := strings.Index(res.Message, "or lower minDomains to 2.")
		if start < 0 || end < start {
			t.Fatalf("message %q has no out-of-reach sentence and remedy", res.Message)
		}
		return res.Message[start:end]
	}
	nodes, domains := outOfReach(spread.DetailNodes), outOfReach(spread.DetailDomains)
	if nodes != domains {
		t.Errorf("the out-of-reach sentences differ:\nnodes:   %q\ndomains: %q", nodes, domains)
	}
	if strings.Contains(domains, "secret-team") {
		t.Errorf("the out-of-reach sentence %q names the template", domains)
	}
}

func TestADenialOverZonesSaysWhichZonesNoNodeComesUpIn(t *testing.T) {
	// a1 holds 2 matching pods; b1, the only node in zone b, has a taint
	// the pod does not tolerate: only a1 is a candidate, at skew 3.
	nodes := []*v1.Node{st.MakeNode().Name("a1").Zone("a").Obj(), st.MakeNode().Name("b1").Zone("b").Taint("dedicated", "batch", v1.TaintEffectNoSchedule).Obj()}
	zoneD := []spread.UnservedZone{{Zone: "d", NodePool: "general", NodeClass: "EC2NodeClass default"}}
	overZones := st.MakePod().Name("incoming").Label("foo", "bar").SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar").Obj()).Obj()
	overHosts := st.MakePod().Name("incoming").Label("foo", "bar").SpreadConstraint(st.Constraint(1, v1.LabelHostname).MatchLabel("foo", "bar").Obj()).Obj()
	tests := []struct {
		name      string
		pod       *v1.Pod
		unserved  []spread.UnservedZone
		templates []spread.Template
		detail    spread.MessageDetail
		// want ends the message; "" when no zone is said to be unserved.
		want string
		// verdict is VerdictUnsatisfiable when not set.
		verdict spread.Verdict
	}{
		{
			name:     "zones a, b, counts [2,0], b tainted, NodePool general requires d its EC2NodeClass cannot serve, messageDetail domains -> denied, zone d named, not the NodePool",
			pod:      overZones,
			unserved: zoneD,
			detail:   spread.DetailDomains,
			want:     " Zone d is required by an autoscaler's node pool whose node class cannot serve it: no node comes up there, so pods that need it stay Pending.",
		},
		{
			name:     "the same under messageDetail nodes -> the NodePool and its node class named",
			pod:      overZones,
			unserved: zoneD,
			detail:   spread.DetailNodes,
			want:     " Zone d is required by NodePool general (EC2NodeClass default), whose node class cannot serve it: no node comes up there, so pods that need it stay Pending.",
		},
		{
			name:     "zones d and e of two NodePools unserved, messageDetail domains -> both zones named once",
			pod:      overZones,
			unserved: []spread.UnservedZone{{Zone: "e", NodePool: "spot", NodeClass: "EC2NodeClass spot"}, {Zone: "d", NodePool: "general", NodeClass: "EC2NodeClass default"}},
			detail:   spread.DetailDomains,
			want:     " Zones d, e are required by an autoscaler's node pool whose node class cannot serve them: no node comes up there, so pods that need them stay Pending.",
		},
		{
			name:      "zones a, b, counts [2,0], b tainted, a template in zone c, d unserved -> admitted for a new node in zone c, zone d named after it",
			pod:       overZones,
			unserved:  zoneD,
			templates: []spread.Template{makeTemplate("nodepool/general/c").Zone("c").Obj()},
			detail:    spread.DetailDomains,
			want:      "no current node fits; a new node that an autoscaler can add in zone c would. Zone d is required by an autoscaler's node pool whose node class cannot serve it: no node comes up there, so pods that need it stay Pending.",
			verdict:   spread.VerdictFeasibleOnNewNode,
		},
		{
			name:     "a zone constraint and a nodeSelector for zone d, where no node is, d unserved, messageDetail domains -> no candidate node, zone d named after it",
			pod:      st.MakePod().Name("incoming").Label("foo", "bar").NodeSelector(v1.LabelTopologyZone, "d").SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("foo", "bar").Obj()).Obj(),
			unserved: zoneD,
			detail:   spread.DetailDomains,
			want:     "until such a node exists. Zone d is required by an autoscaler's node pool whose node class cannot serve it: no node comes up there, so pods that need it stay Pending.",
			verdict:  spread.VerdictNoCandidateNodes,
		},
		{
			name:     "a constraint over hostnames denied the same way, d unserved -> no word of zones",
			pod:      overHosts,
			unserved: zoneD,
			detail:   spread.DetailNodes,
		},
		{
			name:   "the zone constraint denied, every zone served -> no word of unserved zones",
			pod:    overZones,
			detail: spread.DetailNodes,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := spread.Snapshot{Nodes: nodes, Pods: webPods(2, "a1"), Templates: tt.templates, UnservedZones: tt.unserved}
			res, err := checkBoth(t, snap, tt.pod, spread.Options{Detail: tt.detail})
			if err != nil {
				t.Fatal(err)
			}
			want := tt.verdict
			if want == "" {
				want = spread.VerdictUnsatisfiable
			}
			if res.Verdict != want {
				t.Fatalf("verdict %s, want %s: %s", res.Verdict, want, res.Message)
			}
			if tt.want == "" {
				if strings.Contains(res.Message, "required by") {
					t.Errorf("message %q speaks of an unserved zone", res.Message)
				}
				if len(res.Unserved) != 0 {
					t.Errorf("Unserved = %v, want none", res.Unserved)
				}
				return
			}
			// What the callers that word a message of their own read.
			if diff := cmp.Diff(spread.SortedUnservedZones(tt.unserved), res.Unserved); diff != "" {
				t.Errorf("Unserved (-want +got):\n%s", diff)
			}
			got := res.Message[max(0, len(res.Message)-len(tt.want)):]
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("end of the message (-want +got):\n%s\nwhole message: %s", diff, res.Message)
			}
		})
	}
}
