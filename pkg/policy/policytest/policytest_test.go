package policytest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

func TestPolicyBuildersWriteMetadataAndSpecOfTheirOwnPolicy(t *testing.T) {
	zone := MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()
	sp := MakeSpreadPolicy().Namespace("shop").Name("zones").Generation(2).Priority(5).
		PodLabel("app", "web").PodExpression("tier", metav1.LabelSelectorOpIn, "front").
		Constraint(zone).Action(v1alpha1.ActionWarn)
	csp := MakeClusterSpreadPolicy().Name("default").Priority(1).Constraint(zone).
		NamespaceLabel("env", "prod")
	ns := MakeNamespace("shop").Label("env", "prod")

	spec := v1alpha1.PolicySpec{
		Priority: 5,
		PodSelector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front"}}},
		},
		Constraints: []v1alpha1.Constraint{zone},
		Validation:  &v1alpha1.ValidationSpec{Action: v1alpha1.ActionWarn},
	}
	got := Lister(csp, sp, ns)

	wantNamespaces := []*v1.Namespace{{ObjectMeta: metav1.ObjectMeta{
		Name: "shop", Labels: map[string]string{v1.LabelMetadataName: "shop", "env": "prod"},
	}}}
	if diff := cmp.Diff(wantNamespaces, got.Namespaces); diff != "" {
		t.Errorf("namespaces mismatch (-want +got):\n%s", diff)
	}
	wantPolicies := []*v1alpha1.SpreadPolicy{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "spreadguard.io/v1alpha1", Kind: "SpreadPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "zones", Generation: 2},
		Spec:       spec,
	}}
	if diff := cmp.Diff(wantPolicies, got.Policies); diff != "" {
		t.Errorf("SpreadPolicies mismatch (-want +got):\n%s", diff)
	}
	wantClusterPolicies := []*v1alpha1.ClusterSpreadPolicy{{
		TypeMeta:   metav1.TypeMeta{APIVersion: "spreadguard.io/v1alpha1", Kind: "ClusterSpreadPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.ClusterSpreadPolicySpec{
			PolicySpec:        v1alpha1.PolicySpec{Priority: 1, Constraints: []v1alpha1.Constraint{zone}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		},
	}}
	if diff := cmp.Diff(wantClusterPolicies, got.ClusterPolicies); diff != "" {
		t.Errorf("ClusterSpreadPolicies mismatch (-want +got):\n%s", diff)
	}
}

func TestPolicyBuildersReturnIndependentCopies(t *testing.T) {
	w := MakeSpreadPolicy().Name("p").Priority(1)
	first := w.Obj()
	second := w.Priority(2).Obj()
	if first.Spec.Priority != 1 || second.Spec.Priority != 2 {
		t.Errorf("priorities after reuse: first %d, second %d; want 1 and 2", first.Spec.Priority, second.Spec.Priority)
	}
}
