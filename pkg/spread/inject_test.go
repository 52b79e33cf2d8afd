package spread_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestInjectConstraints(t *testing.T) {
	zone := st.Constraint(1, v1.LabelTopologyZone).MinDomains(3)
	host := st.Constraint(2, v1.LabelHostname).ScheduleAnyway().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore)
	appA := labels.SelectorFromSet(labels.Set{"app": "a"})
	tests := []struct {
		name     string
		pod      *v1.Pod
		sel      labels.Selector
		defaults []v1.TopologySpreadConstraint
		want     []v1.TopologySpreadConstraint
		wantErr  string
	}{
		{
			name:     "pod without constraints, selector app=a -> defaults with that selector, nodeTaintsPolicy Honor unless set",
			pod:      st.MakePod().Name("p").Label("app", "a").Obj(),
			sel:      appA,
			defaults: []v1.TopologySpreadConstraint{zone.Obj(), host.Obj()},
			want: []v1.TopologySpreadConstraint{
				st.Constraint(1, v1.LabelTopologyZone).MinDomains(3).MatchLabel("app", "a").NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj(),
				st.Constraint(2, v1.LabelHostname).ScheduleAnyway().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).MatchLabel("app", "a").Obj(),
			},
		},
		{
			name: "set-based selector from a ReplicaSet -> matchExpressions",
			pod:  st.MakePod().Name("p").Label("app", "a").Obj(),
			sel: func() labels.Selector {
				r, _ := labels.NewRequirement("tier", selection.In, []string{"web", "api"})
				return appA.Add(*r)
			}(),
			defaults: []v1.TopologySpreadConstraint{zone.Obj()},
			want: []v1.TopologySpreadConstraint{
				st.Constraint(1, v1.LabelTopologyZone).MinDomains(3).MatchLabel("app", "a").
					MatchExpression("tier", metav1.LabelSelectorOpIn, "api", "web").NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj(),
			},
		},
		{
			name:     "pod that already declares a constraint -> nil, as the scheduler only defaults pods without any",
			pod:      st.MakePod().Name("p").Label("app", "a").SpreadConstraint(host.Obj()).Obj(),
			sel:      appA,
			defaults: []v1.TopologySpreadConstraint{zone.Obj()},
			want:     nil,
		},
		{
			name:     "empty selector (no Service, no controller) -> nil",
			pod:      st.MakePod().Name("p").Obj(),
			sel:      labels.Everything(),
			defaults: []v1.TopologySpreadConstraint{zone.Obj()},
			want:     nil,
		},
		{
			name:     "nil selector -> nil",
			pod:      st.MakePod().Name("p").Obj(),
			defaults: []v1.TopologySpreadConstraint{zone.Obj()},
			want:     nil,
		},
		{
			name: "no defaults -> nil",
			pod:  st.MakePod().Name("p").Obj(),
			sel:  appA,
			want: nil,
		},
		{
			name:     "default that carries its own labelSelector -> error",
			pod:      st.MakePod().Name("p").Obj(),
			sel:      appA,
			defaults: []v1.TopologySpreadConstraint{zone.Obj(), st.Constraint(1, "rack").MatchLabel("x", "y").Obj()},
			wantErr:  `default constraint 1 (topologyKey "rack") sets labelSelector`,
		},
		{
			name: "selector with Gt -> error",
			pod:  st.MakePod().Name("p").Obj(),
			sel: func() labels.Selector {
				r, _ := labels.NewRequirement("gen", selection.GreaterThan, []string{"1"})
				return appA.Add(*r)
			}(),
			defaults: []v1.TopologySpreadConstraint{zone.Obj()},
			wantErr:  `requirement "gen>1"`,
		},
		{
			name:    "nil pod -> error",
			sel:     appA,
			wantErr: "nil pod",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before *v1.Pod
			if tc.pod != nil {
				before = tc.pod.DeepCopy()
			}
			got, err := spread.InjectConstraints(tc.pod, tc.sel, tc.defaults)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("InjectConstraints() error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("InjectConstraints() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InjectConstraints() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.pod); diff != "" {
				t.Errorf("InjectConstraints() modified its pod (-before +after):\n%s", diff)
			}
		})
	}
}

func TestInjectConstraintsIsIdempotentAndCopies(t *testing.T) {
	defaults := []v1.TopologySpreadConstraint{st.Constraint(1, v1.LabelTopologyZone).MatchLabelKeys("pod-template-hash").Obj()}
	pod := st.MakePod().Name("p").Label("app", "a").Obj()
	sel := labels.SelectorFromSet(labels.Set{"app": "a"})
	first, err := spread.InjectConstraints(pod, sel, defaults)
	if err != nil || len(first) != 1 {
		t.Fatalf("first InjectConstraints() = %v, %v; want one constraint", first, err)
	}
	first[0].MatchLabelKeys[0] = "changed"
	first[0].LabelSelector.MatchLabels["app"] = "changed"
	if defaults[0].MatchLabelKeys[0] != "pod-template-hash" {
		t.Errorf("the result shares matchLabelKeys with the defaults")
	}
	pod.Spec.TopologySpreadConstraints = first
	second, err := spread.InjectConstraints(pod, sel, defaults)
	if err != nil || second != nil {
		t.Errorf("second InjectConstraints() = %v, %v; want nil, nil", second, err)
	}
}

func TestInjectConstraintsFoldsMatchLabelKeysTheSelectorNames(t *testing.T) {
	pod := st.MakePod().Name("web-1").Namespace("shop").
		Label("app", "web").Label("track", "stable").Label("pod-template-hash", "abc").Obj()
	tests := []struct {
		name           string
		selector       string
		matchLabelKeys []string
		wantKeys       []string
		wantSelector   *metav1.LabelSelector
	}{
		{
			name:           "a key the selector pins to the pod's value is dropped from matchLabelKeys",
			selector:       "app=web,pod-template-hash=abc",
			matchLabelKeys: []string{"pod-template-hash", "track"},
			wantKeys:       []string{"track"},
			wantSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "abc"}},
		},
		{
			name:           "a key the selector names as a set becomes key In (pod's value)",
			selector:       "app in (api,web)",
			matchLabelKeys: []string{"app"},
			wantSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"api", "web"}},
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
			}},
		},
		{
			name:           "keys the selector does not name stay in matchLabelKeys",
			selector:       "app=web",
			matchLabelKeys: []string{"track", "missing"},
			wantKeys:       []string{"track", "missing"},
			wantSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := labels.Parse(tc.selector)
			if err != nil {
				t.Fatalf("parsing %q: %v", tc.selector, err)
			}
			defaults := []v1.TopologySpreadConstraint{st.Constraint(1, v1.LabelTopologyZone).
				DoNotSchedule().MatchLabelKeys(tc.matchLabelKeys...).Obj()}
			got, err := spread.InjectConstraints(pod, sel, defaults)
			if err != nil {
				t.Fatalf("InjectConstraints: %v", err)
			}
			if len(got) != 1 {
				t.Fatalf("InjectConstraints returned %d constraints, want 1", len(got))
			}
			if diff := cmp.Diff(tc.wantKeys, got[0].MatchLabelKeys); diff != "" {
				t.Errorf("matchLabelKeys (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSelector, got[0].LabelSelector); diff != "" {
				t.Errorf("labelSelector (-want +got):\n%s", diff)
			}
		})
	}
}
