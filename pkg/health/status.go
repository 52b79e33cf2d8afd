package health

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
)

// ReadyView is the read-only side of spread.Index that the Ready
// condition needs.
type ReadyView interface {
	HasTopologyKey(key string) bool
	PodsMatching(namespace string, sel labels.Selector) int
}

// Ready is the Ready condition of a policy whose scope is namespaces (the
// SpreadPolicy's own, or those a ClusterSpreadPolicy's namespaceSelector
// selects). It is False, with a reason and a message that name the field,
// for what the schema cannot catch: invalid, the problems policy validation
// found (the webhook passes over such a policy); a topology key no node
// carries; and a podSelector, when set, that no pod of the scope matches.
// Its LastTransitionTime is left for SetStatus.
func Ready(spec *v1alpha1.PolicySpec, invalid field.ErrorList, namespaces []string, c Counts, v ReadyView) metav1.Condition {
	if len(invalid) > 0 {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInvalid,
			Message: invalid.ToAggregate().Error() + "; spreadguard applies this policy to no pod until it is corrected"}
	}
	for i, k := range spec.Constraints {
		if !v.HasTopologyKey(k.TopologyKey) {
			return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUnknownTopologyKey,
				Message: fmt.Sprintf("spec.constraints[%d].topologyKey: no node carries the label %q, so the constraint has no domain to spread over; "+
					"label the nodes or correct the key", i, k.TopologyKey)}
		}
	}
	if spec.PodSelector != nil && (len(spec.PodSelector.MatchLabels) > 0 || len(spec.PodSelector.MatchExpressions) > 0) {
		sel, err := metav1.LabelSelectorAsSelector(spec.PodSelector)
		if err == nil && !slices.ContainsFunc(namespaces, func(ns string) bool { return v.PodsMatching(ns, sel) > 0 }) {
			return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoPodSelected,
				Message: fmt.Sprintf("spec.podSelector: no running or pending pod in the policy's scope matches %s; "+
					"correct the selector or the pods' labels", sel)}
		}
	}
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAudited,
		Message: fmt.Sprintf("%d workloads: %d spread, %d skewed, %d uncovered", c.Workloads, c.Spread, c.Skewed, c.Uncovered)}
}

// SetStatus writes into st the status of a policy at generation with
// ready and c, and reports whether that changed it. The Ready condition
// keeps its LastTransitionTime unless its status changes, so that an audit
// pass that finds what the last one found changes nothing, and nothing is
// written.
func SetStatus(st *v1alpha1.PolicyStatus, generation int64, ready metav1.Condition, c Counts) bool {
	old := st.DeepCopy()
	st.ObservedGeneration = generation
	ready.ObservedGeneration = generation
	meta.SetStatusCondition(&st.Conditions, ready)
	st.Workloads, st.Spread, st.Skewed, st.Uncovered = int32(c.Workloads), int32(c.Spread), int32(c.Skewed), int32(c.Uncovered)
	return !equality.Semantic.DeepEqual(old, st)
}

// ClusterScope returns the namespaces among namespaces that a
// ClusterSpreadPolicy's namespaceSelector selects (all of them when it is
// unset), reading their labels through l.
func ClusterScope(p *v1alpha1.ClusterSpreadPolicy, namespaces []string, l policy.Lister) ([]string, error) {
	if p.Spec.NamespaceSelector == nil {
		return namespaces, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	var out []string
	for _, name := range namespaces {
		ns, err := l.Namespace(name)
		if err != nil {
			return nil, err
		}
		if ns != nil && sel.Matches(labels.Set(ns.Labels)) {
			out = append(out, name)
		}
	}
	return out, nil
}
