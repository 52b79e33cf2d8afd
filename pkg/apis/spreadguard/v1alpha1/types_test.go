package v1alpha1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

func ptr[T any](v T) *T { return &v }

func TestToTopologySpreadConstraint(t *testing.T) {
	tests := []struct {
		name string
		in   v1alpha1.Constraint
		want v1.TopologySpreadConstraint
	}{
		{
			name: "required fields only -> the same, every optional field nil",
			in:   v1alpha1.Constraint{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule},
			want: v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule},
		},
		{
			name: "every field, labelSelector included -> every field but labelSelector",
			in: v1alpha1.Constraint{
				MaxSkew: 2, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule, MinDomains: ptr(int32(3)),
				NodeAffinityPolicy: ptr(v1.NodeInclusionPolicyIgnore), NodeTaintsPolicy: ptr(v1.NodeInclusionPolicyHonor),
				MatchLabelKeys: []string{"pod-template-hash"},
				LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			},
			want: v1.TopologySpreadConstraint{
				MaxSkew: 2, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule, MinDomains: ptr(int32(3)),
				NodeAffinityPolicy: ptr(v1.NodeInclusionPolicyIgnore), NodeTaintsPolicy: ptr(v1.NodeInclusionPolicyHonor),
				MatchLabelKeys: []string{"pod-template-hash"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := *tt.in.DeepCopy()
			got := tt.in.ToTopologySpreadConstraint()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("ToTopologySpreadConstraint (-want +got):\n%s", diff)
			}
			// The result goes into a pod; the constraint may sit in an
			// informer cache. Writing through the result must not reach it.
			if got.MinDomains != nil {
				*got.MinDomains = 99
				*got.NodeAffinityPolicy = "changed"
				*got.NodeTaintsPolicy = "changed"
				got.MatchLabelKeys[0] = "changed"
			}
			if diff := cmp.Diff(before, tt.in); diff != "" {
				t.Errorf("writing through the result changed the constraint (-before +after):\n%s", diff)
			}
		})
	}
}

func TestSchemeDecodesBothKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	tests := []struct {
		name string
		doc  string
		want runtime.Object
	}{
		{
			name: "SpreadPolicy with a flat spec",
			doc: `{"apiVersion":"spreadguard.io/v1alpha1","kind":"SpreadPolicy","metadata":{"name":"zones","namespace":"shop"},
			       "spec":{"priority":2,"constraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}],
			               "validation":{"action":"Warn"}}}`,
			want: &v1alpha1.SpreadPolicy{
				TypeMeta:   metav1.TypeMeta{APIVersion: "spreadguard.io/v1alpha1", Kind: "SpreadPolicy"},
				ObjectMeta: metav1.ObjectMeta{Name: "zones", Namespace: "shop"},
				Spec: v1alpha1.SpreadPolicySpec{Priority: 2, Validation: &v1alpha1.ValidationSpec{Action: v1alpha1.ActionWarn},
					Constraints: []v1alpha1.Constraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule}}},
			},
		},
		{
			name: "ClusterSpreadPolicy: the embedded PolicySpec is inline, beside namespaceSelector",
			doc: `{"apiVersion":"spreadguard.io/v1alpha1","kind":"ClusterSpreadPolicy","metadata":{"name":"defaults"},
			       "spec":{"namespaceSelector":{"matchLabels":{"env":"prod"}},"podSelector":{"matchLabels":{"app":"web"}},
			               "constraints":[{"maxSkew":1,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"ScheduleAnyway"}]}}`,
			want: &v1alpha1.ClusterSpreadPolicy{
				TypeMeta:   metav1.TypeMeta{APIVersion: "spreadguard.io/v1alpha1", Kind: "ClusterSpreadPolicy"},
				ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
				Spec: v1alpha1.ClusterSpreadPolicySpec{
					PolicySpec: v1alpha1.PolicySpec{
						PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
						Constraints: []v1alpha1.Constraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway}},
					},
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := decoder.Decode([]byte(tt.doc), nil, nil)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}
