package spreadtest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMakePodBuildsWhatItSays(t *testing.T) {
	got := MakePod().Name("p").Namespace("ns").UID("u").Label("app", "a").Node("n1").
		ControlledBy("ReplicaSet", "apps/v1", "rs").NodeSelector("disk", "ssd").
		NodeAffinityIn(v1.LabelTopologyZone, "a", "b").NodeAffinityNotIn("arch", "arm").
		Toleration("k", v1.TolerationOpExists, "", v1.TaintEffectNoSchedule).
		SpreadConstraint(Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "a").MinDomains(3).
			NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).MatchLabelKeys("pod-template-hash").Obj()).
		Obj()
	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"app": "a"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "ReplicaSet/rs",
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: v1.PodSpec{
			NodeName:     "n1",
			NodeSelector: map[string]string{"disk": "ssd"},
			Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{
						{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}},
						{Key: "arch", Operator: v1.NodeSelectorOpNotIn, Values: []string{"arm"}},
					},
				}}},
			}},
			Tolerations: []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule,
				LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
				MinDomains:       new(int32(3)),
				NodeTaintsPolicy: new(v1.NodeInclusionPolicyHonor),
				MatchLabelKeys:   []string{"pod-template-hash"},
			}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MakePod() mismatch (-want +got):\n%s", diff)
	}
}

func TestMakeNodeSetsHostnameAndCordon(t *testing.T) {
	got := MakeNode().Name("n1").Zone("a").Cordoned().Obj()
	want := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.LabelHostname: "n1", v1.LabelTopologyZone: "a"}},
		Spec: v1.NodeSpec{
			Unschedulable: true,
			Taints:        []v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MakeNode() mismatch (-want +got):\n%s", diff)
	}
}

func TestBuildersReturnIndependentCopies(t *testing.T) {
	w := MakePod().Name("p").Label("app", "a")
	first := w.Obj()
	second := w.Label("app", "b").Obj()
	if first.Labels["app"] != "a" || second.Labels["app"] != "b" {
		t.Errorf("labels after reuse: first %v, second %v; want a and b", first.Labels, second.Labels)
	}
}

func TestFakeSourcesLookups(t *testing.T) {
	boom := errors.New("boom")
	src := SelectorSources(
		MakeService().Name("s").Namespace("ns").Selector("app", "a").Obj(),
		MakeService().Name("other").Namespace("elsewhere").Obj(),
		MakeReplicaSet().Name("rs").Namespace("ns").MatchLabel("app", "a").Obj(),
	)
	svcs, err := src.Services("ns")
	if err != nil || len(svcs) != 1 || svcs[0].Name != "s" {
		t.Errorf("Services(ns) = %v, %v; want [s], nil", svcs, err)
	}
	if rs, err := src.ReplicaSet("ns", "rs"); err != nil || rs == nil {
		t.Errorf("ReplicaSet(ns, rs) = %v, %v; want the ReplicaSet", rs, err)
	}
	if rs, err := src.ReplicaSet("ns", "missing"); err != nil || rs != nil {
		t.Errorf("ReplicaSet(ns, missing) = %v, %v; want nil, nil", rs, err)
	}
	if ss, err := src.Fail(LookupStatefulSet, boom).StatefulSet("ns", "ss"); !errors.Is(err, boom) || ss != nil {
		t.Errorf("StatefulSet after Fail = %v, %v; want nil, boom", ss, err)
	}
	if got := src.CallCount(LookupReplicaSet); got != 2 {
		t.Errorf("CallCount(ReplicaSet) = %d, want 2", got)
	}
}

func TestOwnerBuildersSetTheUIDsThatControlledByPointsAt(t *testing.T) {
	pod := MakePod().ControlledBy("ReplicaSet", "apps/v1", "rs").OwnerRef("StatefulSet", "apps/v1", "ss").Obj()
	rs := MakeReplicaSet().Name("rs").Namespace("ns").MatchLabel("app", "a").
		MatchExpression("tier", metav1.LabelSelectorOpIn, "web").Obj()
	ss := MakeStatefulSet().Name("ss").Selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}).Obj()
	rc := MakeReplicationController().Name("rc").Selector("app", "c").Obj()
	svc := MakeService().Name("svc").Selector("app", "d").Obj()

	got := []metav1.ObjectMeta{rs.ObjectMeta, ss.ObjectMeta, rc.ObjectMeta, svc.ObjectMeta}
	want := []metav1.ObjectMeta{
		{Name: "rs", Namespace: "ns", UID: pod.OwnerReferences[0].UID},
		{Name: "ss", Namespace: "default", UID: pod.OwnerReferences[1].UID},
		{Name: "rc", Namespace: "default", UID: "ReplicationController/rc"},
		{Name: "svc", Namespace: "default"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("owner metadata mismatch (-want +got):\n%s", diff)
	}
	wantSelectors := []any{
		&metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "a"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}},
		},
		&metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}},
		map[string]string{"app": "c"},
		map[string]string{"app": "d"},
	}
	gotSelectors := []any{rs.Spec.Selector, ss.Spec.Selector, rc.Spec.Selector, svc.Spec.Selector}
	if diff := cmp.Diff(wantSelectors, gotSelectors); diff != "" {
		t.Errorf("owner selectors mismatch (-want +got):\n%s", diff)
	}
	if ctrl := pod.OwnerReferences[0].Controller; ctrl == nil || !*ctrl {
		t.Errorf("ControlledBy reference has controller %v, want true", ctrl)
	}
	if ctrl := pod.OwnerReferences[1].Controller; ctrl != nil {
		t.Errorf("OwnerRef reference has controller %v, want unset", *ctrl)
	}
}
