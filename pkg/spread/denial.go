package spread

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// A denial's message is worded from the answers to a few questions about
// the nodes (how many, which domains, a few example names), never from a
// list of every node: at hostname level a cluster of 5,000 nodes has 5,000
// domains, and a denial must cost what an admission costs. The per-node
// detail is built only when Options.Explain asks for it.
//
// Two implementations answer the questions: reportFacts from per-node
// reports (Snapshot, and the Index with Explain), indexFacts from the
// index's bitsets. The tests hold their messages equal.

// denialFacts answers what the message of an unsatisfiable pod needs.
// "Keyed candidates" are the nodes that pass node affinity, nodeSelector,
// taints and cordons and carry every hard topology key. A constraint index
// by < 0 means "no constraint": all keyed candidates.
type denialFacts interface {
	// nodeCounts is the number of candidates, and of keyed candidates.
	nodeCounts() (candidates, keyed int)
	// lacking is the candidates that lack constraint i's topology key.
	lacking(i int) nameSample
	// rejected is how many keyed candidates constraint j rejects among
	// those constraint by accepts.
	rejected(j, by int) int
	// accepted names the keyed candidates constraint by accepts.
	accepted(by int) nameSample
	// usable is constraint i's domains of the keyed candidates that
	// constraint by accepts.
	usable(i, by int) domainSample
	// zeros is constraint i's counted domains that hold no matching pod.
	zeros(i int) nameSample
	// exclusions groups, for constraint i, the nodes that are not keyed
	// candidates or that take no part in i's counting.
	exclusions(i int) []exclusionGroup
	// pinned describes the nodes counted for constraint i in its domain
	// value: whether all carry an untolerated taint, all are outside the
	// pod's node affinity, and whether any is cordoned.
	pinned(i int, value string) (allTainted, allOutside, anyCordoned bool)
}

// sampleSize is how many names a sample keeps: a message lists at most 10
// domains and 3 nodes of a kind.
const sampleSize = maxListedDomains

// nameSample is a count and the smallest names of a set.
type nameSample struct {
	n     int
	first []string
}

// add counts name and keeps it when it is among the smallest seen.
func (s *nameSample) add(name string) {
	s.n++
	if len(s.first) == sampleSize && name >= s.first[sampleSize-1] {
		return
	}
	i, _ := slices.BinarySearch(s.first, name)
	if len(s.first) == sampleSize {
		s.first = s.first[:sampleSize-1]
	}
	s.first = slices.Insert(s.first, i, name)
}

// merge adds the names of o.
func (s *nameSample) merge(o nameSample) {
	n := s.n + o.n
	for _, name := range o.first {
		s.add(name)
	}
	s.n = n
}

// list is "a, b, c" or "a, b, c, ..." when there are more than limit.
func (s nameSample) list(limit int) string {
	shown := s.first[:min(limit, len(s.first))]
	if s.n <= limit {
		return strings.Join(shown, ", ")
	}
	return strings.Join(shown, ", ") + ", ..."
}

// domainSample is a set of domains of one constraint: how many, the
// smallest values with their matching pod counts, and how many domains
// hold each count.
type domainSample struct {
	n       int
	first   []domainCount
	byCount map[int]int
}

type domainCount struct {
	value string
	n     int
}

func (s *domainSample) add(value string, n int) {
	s.n++
	if s.byCount == nil {
		s.byCount = map[int]int{}
	}
	s.byCount[n]++
	if len(s.first) == sampleSize && value >= s.first[sampleSize-1].value {
		return
	}
	i, _ := slices.BinarySearchFunc(s.first, value, func(d domainCount, v string) int { return strings.Compare(d.value, v) })
	if len(s.first) == sampleSize {
		s.first = s.first[:sampleSize-1]
	}
	s.first = slices.Insert(s.first, i, domainCount{value, n})
}

// fewest is the smallest count of the set's domains.
func (s domainSample) fewest() int {
	least := -1
	for n := range s.byCount {
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

// exclusionGroup is the nodes of one domain left out for one reason.
// domain is "" for nodes without the key and at hostname level.
type exclusionGroup struct {
	domain string
	reason ExclusionReason
	// counted: the reason is an inclusion policy or a missing key, so the
	// nodes took no part in counting; otherwise they were counted but the
	// pod cannot use them.
	counted bool
	detail  string
	nodes   nameSample
}

// addExcluded adds node to the group of groups that g describes, or to a
// new one.
func addExcluded(groups []exclusionGroup, g exclusionGroup, node string) []exclusionGroup {
	k := slices.IndexFunc(groups, func(o exclusionGroup) bool {
		return o.domain == g.domain && o.reason == g.reason && o.counted == g.counted && o.detail == g.detail
	})
	if k < 0 {
		groups = append(groups, g)
		k = len(groups) - 1
	}
	groups[k].nodes.add(node)
	return groups
}

// reportFacts answers from per-node reports sorted by name.
type reportFacts struct{ ev *evaluation }

func (f reportFacts) keyedCandidates(yield func(*nodeReport) bool) {
	for i := range f.ev.nodes {
		r := &f.ev.nodes[i]
		if reason, _ := r.filterReason(); reason == "" && r.missingKey == "" {
			if !yield(r) {
				return
			}
		}
	}
}

func (f reportFacts) nodeCounts() (candidates, keyed int) {
	for i := range f.ev.nodes {
		r := &f.ev.nodes[i]
		if reason, _ := r.filterReason(); reason == "" {
			candidates++
			if r.missingKey == "" {
				keyed++
			}
		}
	}
	return candidates, keyed
}

func (f reportFacts) lacking(i int) nameSample {
	var s nameSample
	key := f.ev.constraints[i].topologyKey
	for j := range f.ev.nodes {
		r := &f.ev.nodes[j]
		if reason, _ := r.filterReason(); reason != "" {
			continue
		}
		if _, ok := r.labels[key]; !ok {
			s.add(r.name)
		}
	}
	return s
}

func (f reportFacts) rejects(i int, r *nodeReport) bool {
	if i < 0 {
		return false
	}
	_, _, skew := f.ev.skewOf(i, r)
	return skew > int(f.ev.constraints[i].maxSkew)
}

func (f reportFacts) rejected(j, by int) int {
	n := 0
	for r := range f.keyedCandidates {
		if !f.rejects(by, r) && f.rejects(j, r) {
			n++
		}
	}
	return n
}

func (f reportFacts) accepted(by int) nameSample {
	var s nameSample
	for r := range f.keyedCandidates {
		if !f.rejects(by, r) {
			s.add(r.name)
		}
	}
	return s
}

func (f reportFacts) usable(i, by int) domainSample {
	var s domainSample
	seen := map[string]bool{}
	for r := range f.keyedCandidates {
		if f.rejects(by, r) {
			continue
		}
		domain, count, _ := f.ev.skewOf(i, r)
		if !seen[domain] {
			seen[domain] = true
			s.add(domain, count)
		}
	}
	return s
}

func (f reportFacts) zeros(i int) nameSample {
	var s nameSample
	for d, n := range f.ev.domains[i] {
		if n == 0 {
			s.add(d)
		}
	}
	return s
}

func (f reportFacts) exclusions(i int) []exclusionGroup {
	c := &f.ev.constraints[i]
	var groups []exclusionGroup
	for j := range f.ev.nodes {
		r := &f.ev.nodes[j]
		g := exclusionGroup{counted: true}
		g.reason, g.detail = f.ev.countingExclusion(i, r)
		if g.reason == "" {
			g.counted = false
			g.reason, g.detail = r.filterReason()
		}
		if g.reason == "" {
			continue
		}
		// The detail is the missing key or the taint alone (the policy is
		// worded from counted); the other reasons are worded without one.
		switch g.reason {
		case ReasonMissingTopologyKey:
			g.detail = r.missingKey
		case ReasonUntoleratedTaint:
			g.detail = r.taint.ToString()
		default:
			g.detail = ""
		}
		if d, ok := r.labels[c.topologyKey]; ok && c.topologyKey != v1.LabelHostname {
			g.domain = d
		}
		groups = addExcluded(groups, g, r.name)
	}
	return groups
}

func (f reportFacts) pinned(i int, value string) (allTainted, allOutside, anyCordoned bool) {
	key := f.ev.constraints[i].topologyKey
	allTainted, allOutside = true, true
	for j := range f.ev.nodes {
		r := &f.ev.nodes[j]
		if reason, _ := f.ev.countingExclusion(i, r); reason != "" || r.labels[key] != value {
			continue
		}
		allTainted = allTainted && r.taint != nil
		allOutside = allOutside && !r.affinity
		anyCordoned = anyCordoned || r.cordoned
	}
	return allTainted, allOutside, anyCordoned
}
