package spread

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// InjectConstraints returns the constraints to write into a pod that
// declares none: a deep copy of each default with labelSelector set to sel
// (converted by SelectorToLabelSelector) and nodeTaintsPolicy set to Honor
// where the default leaves it unset, so cordoned and tainted nodes do not
// pin the global minimum at 0.
//
// It returns nil, and so changes nothing, when the pod already declares a
// constraint (as the scheduler only defaults pods without any), when sel is
// nil or empty (the pod belongs to no Service or controller), or when there
// are no defaults. That makes it idempotent: a pod that went through it once
// gets nil the second time. A default that carries its own labelSelector is
// an error, because the selector is always derived from the pod.
//
// The scheduler's equivalent is buildDefaultConstraints in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/podtopologyspread/common.go
func InjectConstraints(pod *v1.Pod, sel labels.Selector, defaults []v1.TopologySpreadConstraint) ([]v1.TopologySpreadConstraint, error) {
	if pod == nil {
		return nil, errors.New("injecting constraints: nil pod")
	}
	if len(pod.Spec.TopologySpreadConstraints) > 0 || sel == nil || sel.Empty() || len(defaults) == 0 {
		return nil, nil
	}
	for i, d := range defaults {
		if d.LabelSelector != nil {
			return nil, fmt.Errorf("injecting constraints: default constraint %d (topologyKey %q) sets labelSelector, which is derived from the pod", i, d.TopologyKey)
		}
	}
	ls, err := SelectorToLabelSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("injecting constraints: %w", err)
	}
	out := make([]v1.TopologySpreadConstraint, 0, len(defaults))
	for _, d := range defaults {
		c := *d.DeepCopy()
		c.LabelSelector = ls.DeepCopy()
		if c.NodeTaintsPolicy == nil {
			c.NodeTaintsPolicy = new(v1.NodeInclusionPolicyHonor)
		}
		foldMatchLabelKeys(&c, pod.Labels)
		out = append(out, c)
	}
	return out, nil
}

// foldMatchLabelKeys moves the matchLabelKeys that the derived selector
// already names into the selector itself. The apiserver refuses a pod whose
// constraint names a key in both places, and a policy cannot know which keys
// the derived selector will use. Folding keeps the meaning: matchLabelKeys
// narrows the selector to the pod's own value of the key, and so does
// "key In (value)"; a key the pod does not carry narrows nothing.
func foldMatchLabelKeys(c *v1.TopologySpreadConstraint, podLabels map[string]string) {
	if len(c.MatchLabelKeys) == 0 || c.LabelSelector == nil {
		return
	}
	named := map[string]bool{}
	for k := range c.LabelSelector.MatchLabels {
		named[k] = true
	}
	for _, e := range c.LabelSelector.MatchExpressions {
		named[e.Key] = true
	}
	keep := c.MatchLabelKeys[:0:0]
	for _, key := range c.MatchLabelKeys {
		if !named[key] {
			keep = append(keep, key)
			continue
		}
		value, ok := podLabels[key]
		if !ok || c.LabelSelector.MatchLabels[key] == value {
			continue
		}
		c.LabelSelector.MatchExpressions = append(c.LabelSelector.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: key, Operator: metav1.LabelSelectorOpIn, Values: []string{value},
		})
	}
	if len(keep) == 0 {
		keep = nil
	}
	c.MatchLabelKeys = keep
}
