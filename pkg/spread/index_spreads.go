package spread

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// This file is the index's read-only side for spread health (pkg/health): how
// the pods a constraint selects are spread now, with the counting rules of
// Check, so that "skewed" in a report means what the scheduler would see.

// Spread is how the pods one topology spread constraint selects are spread
// over the domains that take part in its counting.
type Spread struct {
	// Index is the position of the constraint in
	// pod.spec.topologySpreadConstraints.
	Index             int                              `json:"index"`
	TopologyKey       string                           `json:"topologyKey"`
	MaxSkew           int32                            `json:"maxSkew"`
	WhenUnsatisfiable v1.UnsatisfiableConstraintAction `json:"whenUnsatisfiable"`
	// Domains maps counted domains to their number of matching pods. It
	// holds every domain with a pod and, for keys of at most 64 distinct
	// values (zones, not the hostnames of a large cluster), the empty
	// counted domains too: a zone that lost its pods is what an operator
	// looks for. It is never nil.
	Domains map[string]int `json:"domains"`
	// DomainCount is the number of counted domains, empty ones included.
	DomainCount int `json:"domainCount"`
	// Min is the global minimum as Check computes it: the smallest domain
	// count, 0 when a counted domain is empty or there are fewer domains
	// than minDomains. Max is the largest domain count.
	Min int `json:"min"`
	Max int `json:"max"`
	// Skew is Max - Min.
	Skew int `json:"skew"`
}

// Spreads returns, for every topology spread constraint of pod, hard and
// soft in the pod's order, how the existing pods it selects are spread. A
// constraint's counting is Check's: the nodes taking part carry the topology
// key of every constraint of the same kind (hard or soft, as the
// scheduler's Filter and Score require) and pass the constraint's node
// inclusion policies for pod's nodeSelector, affinity and tolerations;
// matchLabelKeys are merged with pod's labels. The pod itself is not
// counted: it stands for its workload's pods, which are.
func (ix *Index) Spreads(pod *v1.Pod) ([]Spread, error) {
	kinds, err := constraintsByKind(pod)
	if err != nil {
		return nil, err
	}
	out := make([]Spread, 0, len(pod.Spec.TopologySpreadConstraints))
	for _, k := range kinds {
		spreads := ix.spreads(k.pod, k.cs)
		for i := range spreads {
			spreads[i].Index = k.positions[i]
			spreads[i].WhenUnsatisfiable = k.when
		}
		out = append(out, spreads...)
	}
	slices.SortFunc(out, func(a, b Spread) int { return a.Index - b.Index })
	return out, nil
}

func (ix *Index) spreads(pod *v1.Pod, cs []constraint) []Spread {
	out := make([]Spread, len(cs))
	ix.withQuery(pod, cs, func(q *query) {
		ev := q.evaluate()
		for i := range cs {
			s := Spread{
				TopologyKey: cs[i].topologyKey,
				MaxSkew:     cs[i].maxSkew,
				Domains:     ev.domains[i],
				DomainCount: ev.domainCount[i],
				Min:         ev.globalMin[i],
			}
			for _, n := range s.Domains {
				s.Max = max(s.Max, n)
			}
			s.Skew = s.Max - s.Min
			if ki := ix.keys[cs[i].topologyKey]; ki != nil && len(ki.values) <= 64 {
				for v, vi := range ki.values {
					if _, ok := s.Domains[v]; !ok && vi.nodes.intersects(q.eligible[i]) {
						s.Domains[v] = 0
					}
				}
			}
			out[i] = s
		}
	})
	return out
}

// HasTopologyKey reports whether some node carries the label key.
func (ix *Index) HasTopologyKey(key string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.keys[key] != nil
}

// Namespaces returns the namespaces that hold a counted pod, sorted.
func (ix *Index) Namespaces() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]string, 0, len(ix.namespaces))
	for ns := range ix.namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// PodsMatching returns the number of counted pods of namespace that sel
// selects.
func (ix *Index) PodsMatching(namespace string, sel labels.Selector) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ns := ix.namespaces[namespace]
	if ns == nil {
		return 0
	}
	n := 0
	for _, g := range ns.matching(sel, nil) {
		n += g.pods
	}
	return n
}

// LabelSets calls f with every distinct label set of the counted pods of
// namespace and their number, in no particular order. The labels must not
// be modified. f must not call the index.
func (ix *Index) LabelSets(namespace string, f func(labels map[string]string, pods int)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ns := ix.namespaces[namespace]; ns != nil {
		for g := range ns.groups {
			f(g.labels, g.pods)
		}
	}
}

// Carried returns the topology spread constraints that the counted pods of
// namespace that sel selects carry, leaving out the pods whose labels one
// of except selects (the pods a Service stands for are those no controller
// selects). When they differ, it is the set most of them carry: pods of
// one template revision were created alike, except those created before
// spreadguard was installed next to ones created after. A tie goes to the
// set with no constraint, then to the first set in the encodings' order,
// so that every pass answers alike. The zero set when no pod is selected.
func (ix *Index) Carried(namespace string, sel labels.Selector, except []labels.Selector) ConstraintSet {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ns := ix.namespaces[namespace]
	if ns == nil {
		return ConstraintSet{}
	}
	tally := map[ConstraintSet]int{}
	for _, g := range ns.matching(sel, nil) {
		if slices.ContainsFunc(except, func(s labels.Selector) bool { return s.Matches(labels.Set(g.labels)) }) {
			continue
		}
		for _, c := range g.carried {
			tally[c.set] += int(c.pods)
		}
	}
	var best ConstraintSet
	most := 0
	for set, n := range tally {
		if n > most || n == most && before(set, best) {
			best, most = set, n
		}
	}
	return best
}

// before orders constraint sets: the zero set first, then by encoding.
func before(a, b ConstraintSet) bool {
	switch {
	case a == b || a == (ConstraintSet{}):
		return a != b
	case b == (ConstraintSet{}):
		return false
	}
	return a.enc.Value() < b.enc.Value()
}
