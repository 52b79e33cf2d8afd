package fallback

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// AnnotationDomains names, on a pod whose injected spread was relaxed, the
// domains it skips ("topology.kubernetes.io/zone NotIn zone-c"), so that
// status, events and the next pass can tell such a pod from a strict one.
const AnnotationDomains = "spreadguard.io/fallback"

// Relax bends the hard constraints on key that spreadguard injected into
// pod over domains: the pod may not go there (a required node affinity
// term "key NotIn domains", added to each of its terms, since terms are
// ORed), and those domains' nodes no longer count towards the constraint's
// skew (nodeAffinityPolicy: Honor), so the constraint stays DoNotSchedule
// over the domains that can take pods:
//
//	for every domain d left:  count(d) + selfMatch - min over the domains left <= maxSkew
//
// docs/fallback.md says why this, and not ScheduleAnyway. The caller passes
// only pods whose constraints spreadguard injected; a pod that declared its
// own is never relaxed. It changes pod in place and reports whether it
// changed anything: a second call with the same domains changes nothing.
func Relax(pod *v1.Pod, key string, domains []string) bool {
	if len(domains) == 0 {
		return false
	}
	domains = slices.Clone(domains)
	slices.Sort(domains)
	domains = slices.Compact(domains)
	changed := false
	hard := false
	honor := v1.NodeInclusionPolicyHonor
	for i := range pod.Spec.TopologySpreadConstraints {
		c := &pod.Spec.TopologySpreadConstraints[i]
		if c.TopologyKey != key || c.WhenUnsatisfiable != v1.DoNotSchedule {
			continue
		}
		hard = true
		if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy != honor {
			c.NodeAffinityPolicy = &honor
			changed = true
		}
	}
	if !hard {
		return changed
	}
	req := v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpNotIn, Values: domains}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &v1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(*terms) == 0 {
		*terms = append(*terms, v1.NodeSelectorTerm{})
	}
	for i := range *terms {
		t := &(*terms)[i]
		if slices.ContainsFunc(t.MatchExpressions, func(r v1.NodeSelectorRequirement) bool { return sameRequirement(r, req) }) {
			continue
		}
		t.MatchExpressions = append(t.MatchExpressions, req)
		changed = true
	}
	if changed {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[AnnotationDomains] = Describe(key, domains)
	}
	return changed
}

// Describe is the value of AnnotationDomains for domains of key.
func Describe(key string, domains []string) string {
	s := key + " NotIn "
	for i, d := range domains {
		if i > 0 {
			s += ","
		}
		s += d
	}
	return s
}

func sameRequirement(a, b v1.NodeSelectorRequirement) bool {
	return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
}
