package spread

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// What the index tells beyond the verdict: the aggregates a denial is
// worded from (indexFacts), or, when Options.Explain asks for them, a
// report per node (detail).

// indexFacts answers a denial's questions from the index's bitsets, domain
// by domain, so that wording a denial does not cost a report per node. It
// reads the query's sets and counts, so it is used before the query is
// finished.
type indexFacts struct {
	q  *query
	ev *evaluation
	// keyed is the keyed candidates; over[i] the nodes of the domains
	// where constraint i's skew would exceed maxSkew, empty[i] constraint
	// i's counted domains without a matching pod, both built on first use.
	keyed bitset
	over  []bitset
	empty []*nameSample
}

func newIndexFacts(q *query, ev *evaluation) *indexFacts {
	f := &indexFacts{q: q, ev: ev, keyed: q.arena.get(), over: make([]bitset, len(q.cs)), empty: make([]*nameSample, len(q.cs))}
	f.keyed.copyFrom(q.candidates)
	f.keyed.and(q.keyed)
	return f
}

func (f *indexFacts) nodeCounts() (candidates, keyed int) {
	return f.ev.candidates, f.keyed.count()
}

func (f *indexFacts) lacking(i int) nameSample {
	var s nameSample
	ix := f.q.ix
	ki := ix.keys[f.q.cs[i].topologyKey]
	f.q.candidates.each(func(id int32) {
		if ki == nil || !ki.nodes.has(id) {
			s.add(ix.slots[id].name)
		}
	})
	return s
}

// overSkewed is the nodes of constraint i's domains where
// 'existing matching num' + 'if self-match (1 or 0)' - 'global minimum' > 'maxSkew'.
// As in evaluate, only the domains with a matching pod can be there.
func (f *indexFacts) overSkewed(i int) bitset {
	if f.over[i] == nil {
		c := &f.q.cs[i]
		f.over[i] = f.q.arena.get()
		for _, vc := range f.q.counts[i] {
			if vc.n+c.selfMatch-f.ev.globalMin[i] > int(c.maxSkew) {
				f.over[i].or(vc.value.nodes)
			}
		}
	}
	return f.over[i]
}

// acceptedBy is the keyed candidates constraint by accepts, in a scratch
// set.
func (f *indexFacts) acceptedBy(by int) bitset {
	b := f.q.arena.get()
	b.copyFrom(f.keyed)
	if by >= 0 {
		b.andNot(f.overSkewed(by))
	}
	return b
}

func (f *indexFacts) rejected(j, by int) int {
	b := f.acceptedBy(by)
	b.and(f.overSkewed(j))
	return b.count()
}

func (f *indexFacts) accepted(by int) nameSample {
	var s nameSample
	f.acceptedBy(by).each(func(id int32) { s.add(f.q.ix.slots[id].name) })
	return s
}

// countOf is the matching pods of constraint i in domain vi.
func (f *indexFacts) countOf(i int, vi *valueIndex) int {
	counts := f.q.counts[i]
	k, ok := slices.BinarySearchFunc(counts, vi.serial, func(vc valueCount, serial uint64) int { return cmp.Compare(vc.value.serial, serial) })
	if !ok {
		return 0
	}
	return counts[k].n
}

// eachDomain calls visit once for each of constraint i's values carried
// by a node of nodes.
func (f *indexFacts) eachDomain(i int, nodes bitset, visit func(vi *valueIndex)) {
	ki := f.q.ix.keys[f.q.cs[i].topologyKey]
	switch {
	case ki == nil:
	case ki.shared == 0:
		// Every value is on one node only (hostname).
		nodes.each(func(id int32) { visit(ki.valueOf[id]) })
	case len(ki.values) <= 64:
		for _, vi := range ki.values {
			if vi.nodes.intersects(nodes) {
				visit(vi)
			}
		}
	default:
		seen := map[*valueIndex]bool{}
		nodes.each(func(id int32) {
			if vi := ki.valueOf[id]; !seen[vi] {
				seen[vi] = true
				visit(vi)
			}
		})
	}
}

func (f *indexFacts) usable(i, by int) domainSample {
	var s domainSample
	f.eachDomain(i, f.acceptedBy(by), func(vi *valueIndex) { s.add(vi.value, f.countOf(i, vi)) })
	return s
}

// zeros visits the counted nodes outside every domain with a matching
// pod: their domains are the empty ones. The message asks for them up to
// three times (counts, minimum, remedy), so they are kept.
func (f *indexFacts) zeros(i int) nameSample {
	if f.empty[i] == nil {
		b := f.q.arena.get()
		b.copyFrom(f.q.eligible[i])
		for _, vc := range f.q.counts[i] {
			b.andNot(vc.value.nodes)
		}
		s := &nameSample{}
		f.eachDomain(i, b, func(vi *valueIndex) { s.add(vi.value) })
		f.empty[i] = s
	}
	return *f.empty[i]
}

// exclusions visits only the nodes that are not keyed candidates or not
// counted: in a cluster where the pod could go anywhere but for spread,
// none.
func (f *indexFacts) exclusions(i int) []exclusionGroup {
	q, ix, c := f.q, f.q.ix, &f.q.cs[i]
	ki := ix.keys[c.topologyKey]
	left := q.arena.get()
	left.copyFrom(f.keyed)
	left.and(q.eligible[i])
	out := q.arena.get()
	out.copyFrom(ix.live)
	out.andNot(left)
	tolerable := toleratesUnschedulable(q.pod.Spec.Tolerations)
	var groups []exclusionGroup
	taints := map[taintKey]string{}
	out.each(func(id int32) {
		e := ix.slots[id]
		g := exclusionGroup{counted: !q.eligible[i].has(id)}
		switch {
		case g.counted && !q.keyed.has(id):
			g.reason = ReasonMissingTopologyKey
			for k := range q.cs {
				if kk := ix.keys[q.cs[k].topologyKey]; kk == nil || !kk.nodes.has(id) {
					g.detail = q.cs[k].topologyKey
					break
				}
			}
		case g.counted && c.nodeAffinityPolicy == v1.NodeInclusionPolicyHonor && !q.affinity.has(id):
			g.reason = ReasonNodeAffinity
		case g.counted:
			g.reason = ReasonUntoleratedTaint
		case e.unschedulable && !tolerable:
			g.reason = ReasonUnschedulable
		case q.tainted.has(id):
			g.reason = ReasonUntoleratedTaint
		case !q.affinity.has(id):
			g.reason = ReasonNodeAffinity
		}
		if g.reason == ReasonUntoleratedTaint {
			// Nodes share few taints: each is worded once.
			t, _ := untoleratedTaint(e.taints, q.pod.Spec.Tolerations)
			tk := taintKey{t.Key, t.Value, t.Effect}
			if taints[tk] == "" {
				taints[tk] = t.ToString()
			}
			g.detail = taints[tk]
		}
		if ki != nil && ki.nodes.has(id) && c.topologyKey != v1.LabelHostname {
			g.domain = ki.valueOf[id].value
		}
		groups = addExcluded(groups, g, e.name)
	})
	return groups
}

func (f *indexFacts) pinned(i int, value string) (allTainted, allOutside, anyCordoned bool) {
	q := f.q
	vi := q.ix.value(q.cs[i].topologyKey, value)
	if vi == nil {
		return true, true, false
	}
	counted := q.arena.get()
	counted.copyFrom(vi.nodes)
	counted.and(q.eligible[i])
	untainted := q.arena.get()
	untainted.copyFrom(counted)
	untainted.andNot(q.tainted)
	allTainted = !untainted.any()
	allOutside = !counted.intersects(q.affinity)
	anyCordoned = !toleratesUnschedulable(q.pod.Spec.Tolerations) && counted.intersects(q.ix.cordoned)
	return allTainted, allOutside, anyCordoned
}

// detail fills in every counted domain and the per-node facts, which
// Explain lists and from which reportFacts words a denial.
func (q *query) detail(ev *evaluation) {
	ix := q.ix
	q.addEmptyDomains(ev)
	tolerable := toleratesUnschedulable(q.pod.Spec.Tolerations)
	ev.nodes = make([]nodeReport, 0, ix.live.count())
	ix.live.each(func(id int32) {
		e := ix.slots[id]
		r := nodeReport{
			name:     e.name,
			labels:   e.labels,
			cordoned: e.unschedulable && !tolerable,
			affinity: q.affinity.has(id),
		}
		if t, untolerated := untoleratedTaint(e.taints, q.pod.Spec.Tolerations); untolerated {
			r.taint = &t
		}
		r.missingKey, _ = hasAllKeys(e.labels, q.cs)
		ev.nodes = append(ev.nodes, r)
	})
	slices.SortFunc(ev.nodes, func(a, b nodeReport) int { return cmp.Compare(a.name, b.name) })
	ev.detailed = true
}
