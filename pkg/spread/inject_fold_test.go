package spread_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestInjectConstraintsFoldsMatchLabelKeysTheSelectorNames(t *testing.T) {
	pod := spreadtest.MakePod().Name("web-1").Namespace("shop").
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
			defaults := []v1.TopologySpreadConstraint{spreadtest.Constraint(1, v1.LabelTopologyZone).
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
