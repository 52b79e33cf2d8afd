package fallback

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const zoneKey = "topology.kubernetes.io/zone"

func injected(cs ...v1.TopologySpreadConstraint) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Annotations: map[string]string{"spreadguard.io/policy": "shop/zones"}},
		Spec:       v1.PodSpec{TopologySpreadConstraints: cs},
	}
}

func tsc(key string, when v1.UnsatisfiableConstraintAction) v1.TopologySpreadConstraint {
	return v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
}

func notIn(values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: zoneKey, Operator: v1.NodeSelectorOpNotIn, Values: values}
}

func TestRelax(t *testing.T) {
	honor := v1.NodeInclusionPolicyHonor
	ignore := v1.NodeInclusionPolicyIgnore
	withAffinity := func(p *v1.Pod, terms ...v1.NodeSelectorTerm) *v1.Pod {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
		return p
	}
	arch := v1.NodeSelectorRequirement{Key: "kubernetes.io/arch", Operator: v1.NodeSelectorOpIn, Values: []string{"arm64"}}
	gpu := v1.NodeSelectorRequirement{Key: "gpu", Operator: v1.NodeSelectorOpExists}
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		domains     []string
		wantChanged bool
		wantTerms   []v1.NodeSelectorTerm
		wantPolicy  []*v1.NodeInclusionPolicy // per constraint
	}{
		{
			name:        "a pod with no affinity gets one term excluding the full zone, its zone constraint honors it",
			pod:         injected(tsc(zoneKey, v1.DoNotSchedule)),
			domains:     []string{"zone-c"},
			wantChanged: true,
			wantTerms:   []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{notIn("zone-c")}}},
			wantPolicy:  []*v1.NodeInclusionPolicy{&honor},
		},
		{
			name:        "every ORed term of an existing affinity gets the exclusion",
			pod:         withAffinity(injected(tsc(zoneKey, v1.DoNotSchedule)), v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{arch}}, v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{gpu}}),
			domains:     []string{"zone-c", "zone-b", "zone-c"},
			wantChanged: true,
			wantTerms: []v1.NodeSelectorTerm{
				{MatchExpressions: []v1.NodeSelectorRequirement{arch, notIn("zone-b", "zone-c")}},
				{MatchExpressions: []v1.NodeSelectorRequirement{gpu, notIn("zone-b", "zone-c")}},
			},
			wantPolicy: []*v1.NodeInclusionPolicy{&honor},
		},
		{
			name: "a policy's Ignore becomes Honor on the zone constraint only; the hostname one is left alone",
			pod: func() *v1.Pod {
				z := tsc(zoneKey, v1.DoNotSchedule)
				z.NodeAffinityPolicy = &ignore
				h := tsc("kubernetes.io/hostname", v1.DoNotSchedule)
				return injected(z, h)
			}(),
			domains:     []string{"zone-c"},
			wantChanged: true,
			wantTerms:   []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{notIn("zone-c")}}},
			wantPolicy:  []*v1.NodeInclusionPolicy{&honor, nil},
		},
		{
			name:       "a soft zone constraint strands nothing and is not relaxed",
			pod:        injected(tsc(zoneKey, v1.ScheduleAnyway)),
			domains:    []string{"zone-c"},
			wantPolicy: []*v1.NodeInclusionPolicy{nil},
		},
		{
			name:       "no domain: nothing changes",
			pod:        injected(tsc(zoneKey, v1.DoNotSchedule)),
			wantPolicy: []*v1.NodeInclusionPolicy{nil},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Relax(tc.pod, zoneKey, tc.domains); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			var terms []v1.NodeSelectorTerm
			if a := tc.pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			}
			if diff := cmp.Diff(tc.wantTerms, terms); diff != "" {
				t.Errorf("required node affinity terms (-want,+got):\n%s", diff)
			}
			var policies []*v1.NodeInclusionPolicy
			for _, c := range tc.pod.Spec.TopologySpreadConstraints {
				policies = append(policies, c.NodeAffinityPolicy)
			}
			if diff := cmp.Diff(tc.wantPolicy, policies); diff != "" {
				t.Errorf("nodeAffinityPolicy per constraint (-want,+got):\n%s", diff)
			}
			if tc.wantChanged {
				if got, want := tc.pod.Annotations[AnnotationDomains], Describe(zoneKey, terms[0].MatchExpressions[len(terms[0].MatchExpressions)-1].Values); got != want {
					t.Errorf("annotation %s = %q, want %q", AnnotationDomains, got, want)
				}
				// Idempotent: a second pass over the relaxed pod changes nothing.
				before := tc.pod.DeepCopy()
				if Relax(tc.pod, zoneKey, tc.domains) {
					t.Error("a second Relax with the same domains changed the pod")
				}
				if diff := cmp.Diff(before, tc.pod); diff != "" {
					t.Errorf("second pass (-first,+second):\n%s", diff)
				}
			}
		})
	}
}
