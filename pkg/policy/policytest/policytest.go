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
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
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

// PolicyOptions are the options every policy has, namespaced or
// cluster-wide: its metadata's (Name, Namespace, Generation, ...) and its
// spec's. A policy wrapper embeds them, bound to its own policy, so that
// each option returns the wrapper W and calls chain.
type PolicyOptions[W any] struct {
	spreadtest.ObjectMetaOptions[W]
	self W
	spec *v1alpha1.PolicySpec
}

func bindPolicy[W any](self W, meta *metav1.ObjectMeta, spec *v1alpha1.PolicySpec) PolicyOptions[W] {
	return PolicyOptions[W]{ObjectMetaOptions: spreadtest.BindObjectMeta(self, meta), self: self, spec: spec}
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind}
}

// Priority sets spec.priority.
func (o PolicyOptions[W]) Priority(p int32) W { o.spec.Priority = p; return o.self }

// PodLabel adds k=v to spec.podSelector.matchLabels.
func (o PolicyOptions[W]) PodLabel(k, v string) W {
	o.spec.PodSelector = spreadtest.WithMatchLabel(o.spec.PodSelector, k, v)
	return o.self
}

// PodExpression adds a requirement to spec.podSelector.matchExpressions.
func (o PolicyOptions[W]) PodExpression(key string, op metav1.LabelSelectorOperator, vals ...string) W {
	o.spec.PodSelector = spreadtest.WithMatchExpression(o.spec.PodSelector, key, op, vals...)
	return o.self
}

// PodSelector sets spec.podSelector.
func (o PolicyOptions[W]) PodSelector(sel *metav1.LabelSelector) W {
	o.spec.PodSelector = sel
	return o.self
}

// Constraint appends to spec.constraints.
func (o PolicyOptions[W]) Constraint(cs ...v1alpha1.Constraint) W {
	o.spec.Constraints = append(o.spec.Constraints, cs...)
	return o.self
}

// Action sets spec.validation.action.
func (o PolicyOptions[W]) Action(a v1alpha1.ValidationAction) W {
	o.spec.Validation = &v1alpha1.ValidationSpec{Action: a}
	return o.self
}

// DeletionCost sets spec.deletionCost.
func (o PolicyOptions[W]) DeletionCost(m v1alpha1.DeletionCostMode) W {
	o.spec.DeletionCost = m
	return o.self
}

// Fallback sets spec.fallback; a zero after or maxDomains stays unset.
func (o PolicyOptions[W]) Fallback(after time.Duration, maxDomains int32) W {
	f := &v1alpha1.FallbackSpec{}
	if after != 0 {
		f.After = &metav1.Duration{Duration: after}
	}
	if maxDomains != 0 {
		f.MaxDomains = &maxDomains
	}
	o.spec.Fallback = f
	return o.self
}

// SpreadPolicyWrapper builds a v1alpha1.SpreadPolicy.
type SpreadPolicyWrapper struct {
	PolicyOptions[*SpreadPolicyWrapper]
	p v1alpha1.SpreadPolicy
}

// MakeSpreadPolicy starts an empty SpreadPolicy.
func MakeSpreadPolicy() *SpreadPolicyWrapper {
	w := &SpreadPolicyWrapper{p: v1alpha1.SpreadPolicy{TypeMeta: typeMeta(v1alpha1.KindSpreadPolicy)}}
	w.PolicyOptions = bindPolicy(w, &w.p.ObjectMeta, &w.p.Spec)
	return w
}

// Obj returns a copy of the policy built so far.
func (w *SpreadPolicyWrapper) Obj() *v1alpha1.SpreadPolicy { return w.p.DeepCopy() }

// ClusterSpreadPolicyWrapper builds a v1alpha1.ClusterSpreadPolicy: the
// options of a SpreadPolicy, and those of its namespaceSelector.
type ClusterSpreadPolicyWrapper struct {
	PolicyOptions[*ClusterSpreadPolicyWrapper]
	p v1alpha1.ClusterSpreadPolicy
}

// MakeClusterSpreadPolicy starts an empty ClusterSpreadPolicy.
func MakeClusterSpreadPolicy() *ClusterSpreadPolicyWrapper {
	w := &ClusterSpreadPolicyWrapper{p: v1alpha1.ClusterSpreadPolicy{TypeMeta: typeMeta(v1alpha1.KindClusterSpreadPolicy)}}
	w.PolicyOptions = bindPolicy(w, &w.p.ObjectMeta, &w.p.Spec.PolicySpec)
	return w
}

// Obj returns a copy of the policy built so far.
func (w *ClusterSpreadPolicyWrapper) Obj() *v1alpha1.ClusterSpreadPolicy { return w.p.DeepCopy() }

// NamespaceLabel adds k=v to spec.namespaceSelector.matchLabels.
func (w *ClusterSpreadPolicyWrapper) NamespaceLabel(k, v string) *ClusterSpreadPolicyWrapper {
	w.p.Spec.NamespaceSelector = spreadtest.WithMatchLabel(w.p.Spec.NamespaceSelector, k, v)
	return w
}

// NamespaceExpression adds a requirement to
// spec.namespaceSelector.matchExpressions.
func (w *ClusterSpreadPolicyWrapper) NamespaceExpression(key string, op metav1.LabelSelectorOperator, vals ...string) *ClusterSpreadPolicyWrapper {
	w.p.Spec.NamespaceSelector = spreadtest.WithMatchExpression(w.p.Spec.NamespaceSelector, key, op, vals...)
	return w
}

// NamespaceSelector sets spec.namespaceSelector.
func (w *ClusterSpreadPolicyWrapper) NamespaceSelector(sel *metav1.LabelSelector) *ClusterSpreadPolicyWrapper {
	w.p.Spec.NamespaceSelector = sel
	return w
}

// NamespaceWrapper builds a *v1.Namespace. Start with MakeNamespace.
type NamespaceWrapper struct {
	spreadtest.ObjectMetaOptions[*NamespaceWrapper]
	ns v1.Namespace
}

// MakeNamespace starts the namespace called name. Like the apiserver, it
// labels it kubernetes.io/metadata.name=<name>; RemoveLabel takes the label
// away, as from a namespace stored before the apiserver added it.
func MakeNamespace(name string) *NamespaceWrapper {
	w := &NamespaceWrapper{}
	w.ObjectMetaOptions = spreadtest.BindObjectMeta(w, &w.ns.ObjectMeta)
	return w.Name(name).Label(v1.LabelMetadataName, name)
}

// Obj returns a copy of the namespace built so far.
func (w *NamespaceWrapper) Obj() *v1.Namespace { return w.ns.DeepCopy() }

// Listed is what Lister holds: a policy or a namespace builder.
type Listed interface {
	addTo(l *policy.SliceLister)
}

func (w *NamespaceWrapper) addTo(l *policy.SliceLister) { l.Namespaces = append(l.Namespaces, w.Obj()) }

func (w *SpreadPolicyWrapper) addTo(l *policy.SliceLister) { l.Policies = append(l.Policies, w.Obj()) }

func (w *ClusterSpreadPolicyWrapper) addTo(l *policy.SliceLister) {
	l.ClusterPolicies = append(l.ClusterPolicies, w.Obj())
}

// Lister returns a policy.SliceLister holding what each builder of objs
// has built.
func Lister(objs ...Listed) policy.SliceLister {
	var l policy.SliceLister
	for _, o := range objs {
		o.addTo(&l)
	}
	return l
}
