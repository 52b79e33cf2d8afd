package policy

import (
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// MaxConstraints is the most constraints one policy may carry, as the CRD
// schema says (maxItems).
const MaxConstraints = 8

var (
	supportedWhenUnsatisfiable = []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway}
	supportedInclusionPolicies = []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}
	supportedActions           = []v1alpha1.ValidationAction{v1alpha1.ActionDeny, v1alpha1.ActionWarn, v1alpha1.ActionAudit}
	supportedDeletionCosts     = []v1alpha1.DeletionCostMode{v1alpha1.DeletionCostEnabled, v1alpha1.DeletionCostDisabled}
)

// ValidateSpreadPolicy returns every problem of p's spec, each naming its
// field path (e.g. spec.constraints[1].topologyKey). It checks what the CRD
// schema checks as well, because a policy can reach the webhook with the
// schema bypassed (an older CRD, a snapshot file), and what the schema
// cannot: selectors that parse, topology and label keys that are qualified
// names, no two constraints with the same topologyKey and whenUnsatisfiable.
func ValidateSpreadPolicy(p *v1alpha1.SpreadPolicy) field.ErrorList {
	if p == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "the SpreadPolicy is missing")}
	}
	spec := field.NewPath("spec")
	errs := validateSelector(p.Spec.PodSelector, spec.Child("podSelector"))
	return append(errs, validatePolicySpec(&p.Spec, spec)...)
}

// ValidateClusterSpreadPolicy is ValidateSpreadPolicy for a
// ClusterSpreadPolicy; it also checks spec.namespaceSelector.
func ValidateClusterSpreadPolicy(p *v1alpha1.ClusterSpreadPolicy) field.ErrorList {
	if p == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "the ClusterSpreadPolicy is missing")}
	}
	spec := field.NewPath("spec")
	errs := validateSelector(p.Spec.PodSelector, spec.Child("podSelector"))
	errs = append(errs, validateSelector(p.Spec.NamespaceSelector, spec.Child("namespaceSelector"))...)
	return append(errs, validatePolicySpec(&p.Spec.PolicySpec, spec)...)
}

// validatePolicySpec checks the fields every policy has, except
// podSelector, which the callers check first so errors come in field order.
func validatePolicySpec(s *v1alpha1.PolicySpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	cpath := path.Child("constraints")
	switch n := len(s.Constraints); {
	case n == 0:
		errs = append(errs, field.Required(cpath, "a policy needs at least one constraint"))
	case n > MaxConstraints:
		errs = append(errs, field.TooMany(cpath, n, MaxConstraints))
	}
	for i := range s.Constraints {
		errs = append(errs, validateConstraint(&s.Constraints[i], cpath.Index(i))...)
		// The pair is the constraint's identity in a pod: the apiserver
		// refuses a pod that repeats it, so such a policy could only break
		// every pod it touches.
		for j := range i {
			if sameKind(s.Constraints[i], s.Constraints[j]) {
				e := field.Duplicate(cpath.Index(i), fmt.Sprintf("{%s, %s}", s.Constraints[i].TopologyKey, s.Constraints[i].WhenUnsatisfiable))
				e.Detail = fmt.Sprintf("has the same topologyKey and whenUnsatisfiable as %s; the apiserver refuses a pod with two such constraints, so merge them into one", cpath.Index(j))
				errs = append(errs, e)
				break
			}
		}
	}
	if s.Validation != nil && s.Validation.Action != "" && !slices.Contains(supportedActions, s.Validation.Action) {
		errs = append(errs, field.NotSupported(path.Child("validation", "action"), s.Validation.Action, supportedActions))
	}
	if s.DeletionCost != "" && !slices.Contains(supportedDeletionCosts, s.DeletionCost) {
		errs = append(errs, field.NotSupported(path.Child("deletionCost"), s.DeletionCost, supportedDeletionCosts))
	}
	errs = append(errs, validateFallback(s.Fallback, path.Child("fallback"))...)
	return errs
}

// MinFallbackAfter is the shortest fallback.after, as the CRD's schema says:
// a shorter wait would relax the spread before the scheduler has tried
// every node twice.
const MinFallbackAfter = 10 * time.Second

// validateFallback holds what reaches the webhook to the CRD's rules (an
// older CRD lets any value through).
func validateFallback(f *v1alpha1.FallbackSpec, path *field.Path) field.ErrorList {
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	if f.After != nil && f.After.Duration < MinFallbackAfter {
		errs = append(errs, field.Invalid(path.Child("after"), f.After.Duration.String(), fmt.Sprintf("must be at least %s, such as 10m", MinFallbackAfter)))
	}
	if f.MaxDomains != nil && *f.MaxDomains < 1 {
		errs = append(errs, field.Invalid(path.Child("maxDomains"), *f.MaxDomains, "must be at least 1; leave fallback out to keep the spread strict"))
	}
	return errs
}

func sameKind(a, b v1alpha1.Constraint) bool {
	return a.TopologyKey == b.TopologyKey && a.WhenUnsatisfiable == b.WhenUnsatisfiable
}

// validateConstraint mirrors the apiserver's validation of a pod's
// topologySpreadConstraints, so that what a policy injects is never refused:
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/apis/core/validation/validation.go
// It is stricter on topologyKey (a node label key, so a qualified name),
// since a key that no node label can have makes every node drop out.
func validateConstraint(c *v1alpha1.Constraint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.MaxSkew < 1 {
		errs = append(errs, field.Invalid(path.Child("maxSkew"), c.MaxSkew, "must be at least 1"))
	}
	if c.TopologyKey == "" {
		errs = append(errs, field.Required(path.Child("topologyKey"), "the node label whose values are the domains, e.g. topology.kubernetes.io/zone"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelName(c.TopologyKey, path.Child("topologyKey"))...)
	}
	switch {
	case c.WhenUnsatisfiable == "":
		errs = append(errs, field.Required(path.Child("whenUnsatisfiable"), "must be DoNotSchedule or ScheduleAnyway"))
	case !slices.Contains(supportedWhenUnsatisfiable, c.WhenUnsatisfiable):
		errs = append(errs, field.NotSupported(path.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, supportedWhenUnsatisfiable))
	}
	if c.MinDomains != nil {
		if *c.MinDomains < 1 {
			errs = append(errs, field.Invalid(path.Child("minDomains"), *c.MinDomains, "must be at least 1"))
		}
		if c.WhenUnsatisfiable != v1.DoNotSchedule {
			errs = append(errs, field.Invalid(path.Child("minDomains"), *c.MinDomains,
				fmt.Sprintf("can only be used with whenUnsatisfiable: DoNotSchedule, not %q", c.WhenUnsatisfiable)))
		}
	}
	if c.NodeAffinityPolicy != nil && !slices.Contains(supportedInclusionPolicies, *c.NodeAffinityPolicy) {
		errs = append(errs, field.NotSupported(path.Child("nodeAffinityPolicy"), *c.NodeAffinityPolicy, supportedInclusionPolicies))
	}
	if c.NodeTaintsPolicy != nil && !slices.Contains(supportedInclusionPolicies, *c.NodeTaintsPolicy) {
		errs = append(errs, field.NotSupported(path.Child("nodeTaintsPolicy"), *c.NodeTaintsPolicy, supportedInclusionPolicies))
	}
	seen := sets.New[string]()
	for i, key := range c.MatchLabelKeys {
		kpath := path.Child("matchLabelKeys").Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(key, kpath)...)
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(kpath, key))
		}
		seen.Insert(key)
	}
	if c.LabelSelector != nil {
		errs = append(errs, field.Forbidden(path.Child("labelSelector"),
			"must not be set: spreadguard derives each pod's selector from the Services and controller that select it, as kube-scheduler's DefaultSelector does; remove labelSelector and use matchLabelKeys to narrow the selector by the pod's own labels"))
	}
	return errs
}

// validateSelector checks that sel parses. A nil selector is valid: it
// selects everything.
func validateSelector(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
	if len(errs) > 0 {
		return errs
	}
	// Resolve parses with LabelSelectorAsSelector; refuse here anything it
	// would refuse there, so a valid policy always resolves.
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		errs = append(errs, field.Invalid(path, sel, err.Error()))
	}
	return errs
}
