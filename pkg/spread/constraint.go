package spread

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ErrInvalidConstraint marks a pod whose hard constraints the apiserver
// would not have accepted (maxSkew below 1, no topologyKey, a selector that
// does not parse, ...). Check wraps it, so that callers can tell bad input
// from an internal fault with errors.Is.
var ErrInvalidConstraint = errors.New("invalid topology spread constraint")

// constraint is a hard v1.TopologySpreadConstraint with its defaults applied
// and its selector parsed once, as topologySpreadConstraint is in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/podtopologyspread/common.go
// Everything downstream works on this type.
type constraint struct {
	// index is the position in pod.spec.topologySpreadConstraints.
	index       int
	maxSkew     int32
	topologyKey string
	// selector has matchLabelKeys merged in.
	selector           labels.Selector
	minDomains         int32
	nodeAffinityPolicy v1.NodeInclusionPolicy
	nodeTaintsPolicy   v1.NodeInclusionPolicy
	// selfMatch is 1 when the incoming pod matches selector: placing it
	// adds one to its domain.
	selfMatch int
}

// hardConstraints returns the pod's DoNotSchedule constraints, in order.
//
// matchLabelKeys are always merged into the selector from the pod's
// labels, as the scheduler does with its MatchLabelKeysInPodTopologySpread
// gate (on by default since v1.27). Since v1.34 the apiserver may already
// have merged them into labelSelector; merging again only repeats an
// equality the selector already has, which selects the same pods.
func hardConstraints(pod *v1.Pod) ([]constraint, error) {
	if pod == nil {
		return nil, errors.New("checking spread: nil pod")
	}
	var out []constraint
	for i, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != v1.DoNotSchedule {
			continue
		}
		where := constraintPath(i)
		if c.MaxSkew < 1 {
			return nil, fmt.Errorf("%w: %s: maxSkew %d is below 1", ErrInvalidConstraint, where, c.MaxSkew)
		}
		if c.TopologyKey == "" {
			return nil, fmt.Errorf("%w: %s: topologyKey is empty", ErrInvalidConstraint, where)
		}
		if c.MinDomains != nil && *c.MinDomains < 1 {
			return nil, fmt.Errorf("%w: %s: minDomains %d is below 1", ErrInvalidConstraint, where, *c.MinDomains)
		}
		sel, err := parseLabelSelector(c.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: labelSelector: %w", ErrInvalidConstraint, where, err)
		}
		if len(c.MatchLabelKeys) > 0 {
			matchLabels := labels.Set{}
			for _, k := range c.MatchLabelKeys {
				if v, ok := pod.Labels[k]; ok {
					matchLabels[k] = v
				}
			}
			if len(matchLabels) > 0 {
				sel = mergeLabelSetWithSelector(matchLabels, sel)
			}
		}
		tc := constraint{
			index:              i,
			maxSkew:            c.MaxSkew,
			topologyKey:        c.TopologyKey,
			selector:           sel,
			minDomains:         1,
			nodeAffinityPolicy: v1.NodeInclusionPolicyHonor,
			nodeTaintsPolicy:   v1.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			tc.minDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			if tc.nodeAffinityPolicy, err = inclusionPolicy(*c.NodeAffinityPolicy); err != nil {
				return nil, fmt.Errorf("%w: %s: nodeAffinityPolicy: %w", ErrInvalidConstraint, where, err)
			}
		}
		if c.NodeTaintsPolicy != nil {
			if tc.nodeTaintsPolicy, err = inclusionPolicy(*c.NodeTaintsPolicy); err != nil {
				return nil, fmt.Errorf("%w: %s: nodeTaintsPolicy: %w", ErrInvalidConstraint, where, err)
			}
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			tc.selfMatch = 1
		}
		out = append(out, tc)
	}
	return out, nil
}

// kindConstraints are a pod's constraints of one kind, hard or soft, made
// hard so that Check's counting applies to them: the nodes taking part
// carry the topology key of every constraint of the same kind, as the
// scheduler's Filter (hard) and Score (soft) each require.
type kindConstraints struct {
	when v1.UnsatisfiableConstraintAction
	// pod holds the namespace, labels, nodeSelector, affinity and
	// tolerations of the pod, and only these constraints, made hard.
	pod *v1.Pod
	cs  []constraint
	// positions are the constraints' places in the pod's
	// spec.topologySpreadConstraints.
	positions []int
}

// constraintsByKind returns the pod's hard constraints, then its soft
// ones, each kind parsed, defaulted and validated exactly as Check parses
// hard constraints. A kind the pod has none of is left out.
func constraintsByKind(pod *v1.Pod) ([]kindConstraints, error) {
	var out []kindConstraints
	for _, when := range []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway} {
		k := kindConstraints{when: when}
		var tscs []v1.TopologySpreadConstraint
		for i, c := range pod.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == when {
				c.WhenUnsatisfiable = v1.DoNotSchedule
				tscs = append(tscs, c)
				k.positions = append(k.positions, i)
			}
		}
		if len(tscs) == 0 {
			continue
		}
		k.pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Labels: pod.Labels}}
		k.pod.Spec.NodeSelector, k.pod.Spec.Affinity, k.pod.Spec.Tolerations = pod.Spec.NodeSelector, pod.Spec.Affinity, pod.Spec.Tolerations
		k.pod.Spec.TopologySpreadConstraints = tscs
		var err error
		if k.cs, err = hardConstraints(k.pod); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

func inclusionPolicy(p v1.NodeInclusionPolicy) (v1.NodeInclusionPolicy, error) {
	switch p {
	case v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore:
		return p, nil
	}
	return "", fmt.Errorf("%q is neither Honor nor Ignore", p)
}

// constraintPath names the i-th constraint in an error. It is a
// fmt.Stringer, worded only when an error is.
type constraintPath int

func (i constraintPath) String() string {
	return fmt.Sprintf("spec.topologySpreadConstraints[%d]", int(i))
}

// parseLabelSelector is metav1.LabelSelectorAsSelector, which checks every
// key and value against its pattern, but for the selector of matchLabels
// only whose keys and values labelSelectorValid takes: the selector
// DefaultSelector derives, which every pod the webhook constrains carries.
// That one is built from the validated set, the same sorted equalities.
func parseLabelSelector(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls != nil && len(ls.MatchExpressions) == 0 && len(ls.MatchLabels) > 0 && labelSelectorValid(ls) {
		return labels.SelectorFromValidatedSet(ls.MatchLabels), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// mergeLabelSetWithSelector puts the matchLabelKeys equalities in front of
// the selector's own requirements. A selector without requirements
// (labels.Nothing, from a nil labelSelector) stays as it is: it selects
// nothing, whatever is added.
func mergeLabelSetWithSelector(matchLabels labels.Set, s labels.Selector) labels.Selector {
	reqs, ok := s.Requirements()
	if !ok {
		return s
	}
	return labels.SelectorFromSet(matchLabels).Add(reqs...)
}

// countsPods reports whether a selector counts pods at all: upstream's
// countPodsMatchSelector counts 0 for an empty selector, although that
// selector matches the incoming pod itself.
func (c *constraint) countsPods() bool { return !c.selector.Empty() }

// hasAllKeys reports whether nodeLabels carry the topology key of every hard
// constraint (nodeLabelsMatchSpreadConstraints upstream), and otherwise the
// first key missing.
func hasAllKeys(nodeLabels map[string]string, cs []constraint) (string, bool) {
	for i := range cs {
		if _, ok := nodeLabels[cs[i].topologyKey]; !ok {
			return cs[i].topologyKey, false
		}
	}
	return "", true
}
