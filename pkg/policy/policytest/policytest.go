// Package policytest builds SpreadPolicies, ClusterSpreadPolicies and their
// constraints for tests, with option methods in the style of
// pkg/spread/spreadtest:
//
//	policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Priority(5).
//		PodLabel("app", "web").
//		Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).
//		Obj()
//
// Builders start empty: what a test does not set is unset, so a validation
// test shows exactly what it gets wrong.
package policytest

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// ConstraintWrapper builds a v1alpha1.Constraint.
type ConstraintWrapper struct{ c v1alpha1.Constraint }

// MakeConstraint starts an empty constraint.
func MakeConstraint() *ConstraintWrapper { return &ConstraintWrapper{} }

// Obj returns a copy of the constraint built so far.
func (w *ConstraintWrapper) Obj() v1alpha1.Constraint { return *w.c.DeepCopy() }

// MaxSkew sets maxSkew.
func (w *ConstraintWrapper) MaxSkew(n int32) *ConstraintWrapper { w.c.MaxSkew = n; return w }

// TopologyKey sets topologyKey.
func (w *ConstraintWrapper) TopologyKey(k string) *ConstraintWrapper { w.c.TopologyKey = k; return w }

// Zone sets topologyKey to topology.kubernetes.io/zone.
func (w *ConstraintWrapper) Zone() *ConstraintWrapper { return w.TopologyKey(v1.LabelTopologyZone) }

// Hostname sets topologyKey to kubernetes.io/hostname.
func (w *ConstraintWrapper) Hostname() *ConstraintWrapper { return w.TopologyKey(v1.LabelHostname) }

// WhenUnsatisfiable sets whenUnsatisfiable to any value, valid or not.
func (w *ConstraintWrapper) WhenUnsatisfiable(a v1.UnsatisfiableConstraintAction) *ConstraintWrapper {
	w.c.WhenUnsatisfiable = a
	return w
}

// DoNotSchedule makes the constraint hard.
func (w *ConstraintWrapper) DoNotSchedule() *ConstraintWrapper {
	return w.WhenUnsatisfiable(v1.DoNotSchedule)
}

// ScheduleAnyway makes the constraint soft.
func (w *ConstraintWrapper) ScheduleAnyway() *ConstraintWrapper {
	return w.WhenUnsatisfiable(v1.ScheduleAnyway)
}

// MinDomains sets minDomains.
func (w *ConstraintWrapper) MinDomains(n int32) *ConstraintWrapper { w.c.MinDomains = &n; return w }

// NodeAffinityPolicy sets nodeAffinityPolicy.
func (w *ConstraintWrapper) NodeAffinityPolicy(p v1.NodeInclusionPolicy) *ConstraintWrapper {
	w.c.NodeAffinityPolicy = &p
	return w
}

// NodeTaintsPolicy sets nodeTaintsPolicy.
func (w *ConstraintWrapper) NodeTaintsPolicy(p v1.NodeInclusionPolicy) *ConstraintWrapper {
	w.c.NodeTaintsPolicy = &p
	return w
}

// MatchLabelKeys appends to matchLabelKeys.
func (w *ConstraintWrapper) MatchLabelKeys(keys ...string) *ConstraintWrapper {
	w.c.MatchLabelKeys = append(w.c.MatchLabelKeys, keys...)
	return w
}

// LabelSelector sets the forbidden labelSelector, for tests that check it
// is refused.
func (w *ConstraintWrapper) LabelSelector(sel *metav1.LabelSelector) *ConstraintWrapper {
	w.c.LabelSelector = sel
	return w
}

// SpreadPolicyWrapper builds a v1alpha1.SpreadPolicy.
type SpreadPolicyWrapper struct{ p v1alpha1.SpreadPolicy }

// MakeSpreadPolicy starts an empty SpreadPolicy.
func MakeSpreadPolicy() *SpreadPolicyWrapper {
	return &SpreadPolicyWrapper{p: v1alpha1.SpreadPolicy{TypeMeta: metav1.TypeMeta{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindSpreadPolicy,
	}}}
}

// Obj returns a copy of the policy built so far.
func (w *SpreadPolicyWrapper) Obj() *v1alpha1.SpreadPolicy { return w.p.DeepCopy() }

// Name sets metadata.name.
func (w *SpreadPolicyWrapper) Name(n string) *SpreadPolicyWrapper { w.p.Name = n; return w }

// Namespace sets metadata.namespace.
func (w *SpreadPolicyWrapper) Namespace(ns string) *SpreadPolicyWrapper { w.p.Namespace = ns; return w }

// Generation sets metadata.generation.
func (w *SpreadPolicyWrapper) Generation(g int64) *SpreadPolicyWrapper { w.p.Generation = g; return w }

// Priority sets spec.priority.
func (w *SpreadPolicyWrapper) Priority(p int32) *SpreadPolicyWrapper { w.p.Spec.Priority = p; return w }

// PodLabel adds k=v to spec.podSelector.matchLabels.
func (w *SpreadPolicyWrapper) PodLabel(k, v string) *SpreadPolicyWrapper {
	w.p.Spec.PodSelector = addMatchLabel(w.p.Spec.PodSelector, k, v)
	return w
}

// PodExpression adds a requirement to spec.podSelector.matchExpressions.
func (w *SpreadPolicyWrapper) PodExpression(key string, op metav1.LabelSelectorOperator, vals ...string) *SpreadPolicyWrapper {
	w.p.Spec.PodSelector = addMatchExpression(w.p.Spec.PodSelector, key, op, vals)
	return w
}

// PodSelector sets spec.podSelector.
func (w *SpreadPolicyWrapper) PodSelector(sel *metav1.LabelSelector) *SpreadPolicyWrapper {
	w.p.Spec.PodSelector = sel
	return w
}

// Constraint appends to spec.constraints.
func (w *SpreadPolicyWrapper) Constraint(cs ...v1alpha1.Constraint) *SpreadPolicyWrapper {
	w.p.Spec.Constraints = append(w.p.Spec.Constraints, cs...)
	return w
}

// Action sets spec.validation.action.
func (w *SpreadPolicyWrapper) Action(a v1alpha1.ValidationAction) *SpreadPolicyWrapper {
	w.p.Spec.Validation = &v1alpha1.ValidationSpec{Action: a}
	return w
}

// ClusterSpreadPolicyWrapper builds a v1alpha1.ClusterSpreadPolicy.
type ClusterSpreadPolicyWrapper struct{ p v1alpha1.ClusterSpreadPolicy }

// MakeClusterSpreadPolicy starts an empty ClusterSpreadPolicy.
func MakeClusterSpreadPolicy() *ClusterSpreadPolicyWrapper {
	return &ClusterSpreadPolicyWrapper{p: v1alpha1.ClusterSpreadPolicy{TypeMeta: metav1.TypeMeta{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindClusterSpreadPolicy,
	}}}
}

// Obj returns a copy of the policy built so far.
func (w *ClusterSpreadPolicyWrapper) Obj() *v1alpha1.ClusterSpreadPolicy { return w.p.DeepCopy() }

// Name sets metadata.name.
func (w *ClusterSpreadPolicyWrapper) Name(n string) *ClusterSpreadPolicyWrapper {
	w.p.Name = n
	return w
}

// Generation sets metadata.generation.
func (w *ClusterSpreadPolicyWrapper) Generation(g int64) *ClusterSpreadPolicyWrapper {
	w.p.Generation = g
	return w
}

// Priority sets spec.priority.
func (w *ClusterSpreadPolicyWrapper) Priority(p int32) *ClusterSpreadPolicyWrapper {
	w.p.Spec.Priority = p
	return w
}

// PodLabel adds k=v to spec.podSelector.matchLabels.
func (w *ClusterSpreadPolicyWrapper) PodLabel(k, v string) *ClusterSpreadPolicyWrapper {
	w.p.Spec.PodSelector = addMatchLabel(w.p.Spec.PodSelector, k, v)
	return w
}

// PodExpression adds a requirement to spec.podSelector.matchExpressions.
func (w *ClusterSpreadPolicyWrapper) PodExpression(key string, op metav1.LabelSelectorOperator, vals ...string) *ClusterSpreadPolicyWrapper {
	w.p.Spec.PodSelector = addMatchExpression(w.p.Spec.PodSelector, key, op, vals)
	return w
}

// PodSelector sets spec.podSelector.
func (w *ClusterSpreadPolicyWrapper) PodSelector(sel *metav1.LabelSelector) *ClusterSpreadPolicyWrapper {
	w.p.Spec.PodSelector = sel
	return w
}

// NamespaceLabel adds k=v to spec.namespaceSelector.matchLabels.
func (w *ClusterSpreadPolicyWrapper) NamespaceLabel(k, v string) *ClusterSpreadPolicyWrapper {
	w.p.Spec.NamespaceSelector = addMatchLabel(w.p.Spec.NamespaceSelector, k, v)
	return w
}

// NamespaceExpression adds a requirement to
// spec.namespaceSelector.matchExpressions.
func (w *ClusterSpreadPolicyWrapper) NamespaceExpression(key string, op metav1.LabelSelectorOperator, vals ...string) *ClusterSpreadPolicyWrapper {
	w.p.Spec.NamespaceSelector = addMatchExpression(w.p.Spec.NamespaceSelector, key, op, vals)
	return w
}

// NamespaceSelector sets spec.namespaceSelector.
func (w *ClusterSpreadPolicyWrapper) NamespaceSelector(sel *metav1.LabelSelector) *ClusterSpreadPolicyWrapper {
	w.p.Spec.NamespaceSelector = sel
	return w
}

// Constraint appends to spec.constraints.
func (w *ClusterSpreadPolicyWrapper) Constraint(cs ...v1alpha1.Constraint) *ClusterSpreadPolicyWrapper {
	w.p.Spec.Constraints = append(w.p.Spec.Constraints, cs...)
	return w
}

// Action sets spec.validation.action.
func (w *ClusterSpreadPolicyWrapper) Action(a v1alpha1.ValidationAction) *ClusterSpreadPolicyWrapper {
	w.p.Spec.Validation = &v1alpha1.ValidationSpec{Action: a}
	return w
}

// MakeNamespace returns a namespace with labels. Like the apiserver, it
// adds kubernetes.io/metadata.name=<name>.
func MakeNamespace(name string, labels map[string]string) *v1.Namespace {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelMetadataName: name}}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	return ns
}

func addMatchLabel(sel *metav1.LabelSelector, k, v string) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[k] = v
	return sel
}

func addMatchExpression(sel *metav1.LabelSelector, key string, op metav1.LabelSelectorOperator, vals []string) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: vals})
	return sel
}
