package spread

import (
	"cmp"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Check decides feasibility for pod from the index. It returns the same
// Result as Snapshot.Check on the same nodes and pods, for every input.
//
// Its cost does not grow with the number of pods, only with the pods that
// match the pod's selectors, and grows with the number of nodes only as
// bitset words (nodes/64) unless Explain asks for per-node lists. Wording
// a denial adds a few passes over the bits of the nodes it names, with no
// allocation per node.
func (ix *Index) Check(pod *v1.Pod, opts Options) (*Result, error) {
	cs, err := hardConstraints(pod)
	if err != nil {
		return nil, err
	}
	var res *Result
	// A denial's facts read the query: the Result is assembled before the
	// query goes back to the pool.
	ix.withQuery(pod, cs, func(q *query) {
		ev := q.evaluate()
		ev.unserved = ix.unserved
		if len(ix.templates) > 0 && (opts.Explain || ev.feasible == 0) {
			ev.checkTemplates(ix.templates, pod, q)
		}
		if opts.Explain {
			q.detail(ev)
		} else if ev.verdict() == VerdictUnsatisfiable {
			ev.facts = newIndexFacts(q, ev)
		}
		res, err = assemble(ev, opts)
	})
	return res, err
}

// withQuery runs fn with a pooled query started for pod's constraints cs,
// under the read lock; the query is only valid inside fn.
func (ix *Index) withQuery(pod *v1.Pod, cs []constraint, fn func(q *query)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ix.withQueryLocked(pod, cs, fn)
}

// withQueryLocked is withQuery for a caller that holds the read lock, so
// that several queries read one state of the index.
func (ix *Index) withQueryLocked(pod *v1.Pod, cs []constraint, fn func(q *query)) {
	q := ix.scratch.Get().(*query)
	defer ix.scratch.Put(q)
	defer q.finish()
	q.start(ix, pod, cs)
	fn(q)
}

// query is one Check's work on the index, under the read lock. Queries are
// pooled: their bitsets and maps are scratch space reused from check to
// check, which keeps a check's garbage, and so the garbage collector's
// share of its cost, small however large the index is.
type query struct {
	ix    *Index
	pod   *v1.Pod
	cs    []constraint
	arena arena

	// affinity: nodes matching nodeSelector and required node affinity.
	// tainted: nodes with a NoSchedule/NoExecute taint the pod does not
	// tolerate. candidates: live nodes passing affinity, taints and
	// cordons. keyed: live nodes carrying every hard topology key.
	affinity, tainted, candidates, keyed bitset
	eligible                             []bitset
	// feasible: candidates that carry every key and meet every
	// constraint, once evaluated.
	feasible bitset
	// counts holds, per constraint, the matching pods per domain with at
	// least one, as (value, count) pairs sorted by value serial: a slice
	// sorted and merged is cheaper than a map for the few dozen domains a
	// Deployment's pods occupy.
	counts [][]valueCount
	// matched holds, per selector, the nodes of the groups it matches
	// with their pods, one entry per group and node: the constraints of
	// one selector (a zone's and a hostname's) walk a group's nodes once.
	// groupBuf and nodeBuf are their scratch.
	matched  map[string][]nodePods
	groupBuf []*group
	nodeBuf  []nodePods
	// matchedGroups holds, per selector, the groups it matches, as
	// positions in groupBuf; selected is the scratch set a scale-down's
	// departing pods are looked up in.
	matchedGroups map[string][2]int
	selected      map[*group]struct{}
	selectedSpan  [2]int
	// position holds, per constraint and by node ID, the position of the
	// node's domain in a Layout; valuePosition is the scratch map that
	// assigns them.
	position      [][]int32
	valuePosition map[*valueIndex]int32
	groups        []layoutGroup
}

func newQuery() any {
	return &query{
		matched: map[string][]nodePods{}, matchedGroups: map[string][2]int{},
		selected: map[*group]struct{}{}, valuePosition: map[*valueIndex]int32{},
	}
}

// finish drops what q points into, so that a pooled query keeps no pod or
// group alive.
func (q *query) finish() {
	q.ix, q.pod, q.cs, q.feasible = nil, nil, nil, nil
	clear(q.matched)
	clear(q.matchedGroups)
	clear(q.selected)
	q.selectedSpan = [2]int{}
	clear(q.groupBuf[:cap(q.groupBuf)])
	clear(q.nodeBuf[:cap(q.nodeBuf)])
	q.groupBuf, q.nodeBuf = q.groupBuf[:0], q.nodeBuf[:0]
	clear(q.valuePosition)
	clear(q.groups[:cap(q.groups)])
	for i := range q.counts {
		q.counts[i] = q.counts[i][:0]
	}
}

// start prepares q for one check of pod.
func (q *query) start(ix *Index, pod *v1.Pod, cs []constraint) {
	q.ix, q.pod, q.cs = ix, pod, cs
	q.arena.reset(ix.words(), 7+2*len(cs))
	clear(q.matched)
	clear(q.matchedGroups)
	q.eligible = q.eligible[:0]
	for len(q.counts) < len(cs) {
		q.counts = append(q.counts, nil)
	}
	for i := range q.counts {
		q.counts[i] = q.counts[i][:0]
	}
	q.affinity = q.affinityNodes()

	q.tainted = q.arena.get()
	for _, ti := range ix.taints {
		if !tolerates(pod.Spec.Tolerations, &ti.taint) {
			q.tainted.or(ti.nodes)
		}
	}
	q.candidates = q.arena.get()
	q.candidates.copyFrom(q.affinity)
	q.candidates.andNot(q.tainted)
	if !toleratesUnschedulable(pod.Spec.Tolerations) {
		q.candidates.andNot(ix.cordoned)
	}

	q.keyed = q.arena.get()
	q.keyed.copyFrom(ix.live)
	for i := range cs {
		if ki := ix.keys[cs[i].topologyKey]; ki != nil {
			q.keyed.and(ki.nodes)
		} else {
			clear(q.keyed)
		}
	}
}

// evaluate counts and decides, without per-node details.
func (q *query) evaluate() *evaluation {
	ix, cs := q.ix, q.cs
	ev := newEvaluation(cs)
	ns := ix.namespaces[q.pod.Namespace]

	feasible := q.arena.get()
	feasible.copyFrom(q.candidates)
	feasible.and(q.keyed)
	for i := range cs {
		c := &cs[i]
		ev.domainCount[i], ev.smallest[i], ev.globalMin[i] = q.countConstraint(i, ns)
		counts := q.counts[i]
		domains := make(map[string]int, len(counts))
		for _, vc := range counts {
			domains[vc.value.value] = vc.n
		}
		ev.domains[i] = domains

		// CAVEAT: only the domains with a matching pod are visited. That is
		// enough because a domain with 0 pods can never exceed maxSkew:
		// 0 + selfMatch (at most 1) - globalMin (at least 0) <= 1 <= maxSkew.
		// So the nodes that fail this constraint are exactly the nodes of
		// the over-skewed domains with a non-zero count.
		for _, vc := range counts {
			// 'existing matching num' + 'if self-match (1 or 0)' - 'global minimum' <= 'maxSkew'
			if vc.n+c.selfMatch-ev.globalMin[i] > int(c.maxSkew) {
				if vc.value.count == 1 {
					feasible.clear(vc.value.only)
				} else {
					feasible.andNot(vc.value.nodes)
				}
			}
		}
	}
	ev.candidates = q.candidates.count()
	ev.feasible = feasible.count()
	q.feasible = feasible
	return ev
}

// countConstraint counts constraint i of q for a pod of namespace ns:
// it appends the nodes taking part to q.eligible, puts its matching pods
// per domain holding one in q.counts[i], and returns its number of counted
// domains, its smallest domain count (math.MaxInt32 when it has none) and
// its global minimum.
func (q *query) countConstraint(i int, ns *nsIndex) (domainCount, smallest, globalMin int) {
	ix, c := q.ix, &q.cs[i]
	q.eligible = append(q.eligible, q.eligibleFor(c))
	ki := ix.keys[c.topologyKey]
	counts := q.counts[i]
	if ns != nil && c.countsPods() && ki != nil {
		sel := c.selector.String()
		nodes, ok := q.matched[sel]
		if !ok {
			nodes = q.matchedNodes(ns, c.selector, sel)
			q.matched[sel] = nodes
		}
		for _, np := range nodes {
			if q.eligible[i].has(np.node.id) {
				counts = append(counts, valueCount{ki.valueOf[np.node.id], int(np.n)})
			}
		}
		counts = mergeCounts(counts)
		q.counts[i] = counts
	}
	smallest = math.MaxInt32
	for _, vc := range counts {
		smallest = min(smallest, vc.n)
	}
	domainCount = q.domainCount(ki, q.eligible[i])
	if domainCount > len(counts) {
		// Some counted domain holds no matching pod.
		smallest = 0
	}
	return domainCount, smallest, globalMinimum(c, domainCount, smallest)
}

// nodePods is a node and the pods of one group on it.
type nodePods struct {
	node *nodeEntry
	n    int32
}

// matchedNodes lists the nodes holding pods of the groups of ns that sel,
// written key, matches, one entry per group and node, in q's scratch.
func (q *query) matchedNodes(ns *nsIndex, sel labels.Selector, key string) []nodePods {
	from := len(q.groupBuf)
	q.groupBuf = ns.matching(sel, q.groupBuf)
	q.matchedGroups[key] = [2]int{from, len(q.groupBuf)}
	start := len(q.nodeBuf)
	for _, g := range q.groupBuf[from:] {
		for e, n := range g.nodes {
			if e.id >= 0 {
				q.nodeBuf = append(q.nodeBuf, nodePods{e, n})
			}
		}
	}
	return slices.Clip(q.nodeBuf[start:])
}

// counted is templateCounts over the index: whether a node counted for
// constraint i carries value, and the matching pods of that domain.
func (q *query) counted(i int, value string) (int, bool) {
	ki := q.ix.keys[q.cs[i].topologyKey]
	if ki == nil {
		return 0, false
	}
	vi := ki.values[value]
	if vi == nil || !vi.nodes.intersects(q.eligible[i]) {
		return 0, false
	}
	for _, vc := range q.counts[i] {
		if vc.value == vi {
			return vc.n, true
		}
	}
	return 0, true
}

type valueCount struct {
	value *valueIndex
	n     int
}

// mergeCounts sorts pairs by value and adds up the pairs of one value (a
// node holding pods of several matching groups).
func mergeCounts(pairs []valueCount) []valueCount {
	slices.SortFunc(pairs, func(a, b valueCount) int { return cmp.Compare(a.value.serial, b.value.serial) })
	out := pairs[:0]
	for _, p := range pairs {
		if n := len(out); n > 0 && out[n-1].value == p.value {
			out[n-1].n += p.n
		} else {
			out = append(out, p)
		}
	}
	return out
}

// eligibleFor is the set of nodes that take part in c's counting: they
// carry every hard topology key and pass c's inclusion policies.
func (q *query) eligibleFor(c *constraint) bitset {
	b := q.arena.get()
	b.copyFrom(q.keyed)
	if c.nodeAffinityPolicy == v1.NodeInclusionPolicyHonor {
		b.and(q.affinity)
	}
	if c.nodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
		b.andNot(q.tainted)
	}
	return b
}

// domainCount is the number of distinct values of a key among nodes.
func (q *query) domainCount(ki *keyIndex, nodes bitset) int {
	switch {
	case ki == nil:
		return 0
	case ki.shared == 0:
		// Every value is on one node only (hostname): one domain per node.
		return nodes.count()
	case len(ki.values) <= 64:
		n := 0
		for _, vi := range ki.values {
			if vi.nodes.intersects(nodes) {
				n++
			}
		}
		return n
	}
	seen := map[*valueIndex]struct{}{}
	nodes.each(func(id int32) { seen[ki.valueOf[id]] = struct{}{} })
	return len(seen)
}

// matching appends to out the groups of the namespace that sel selects. It starts
// from the requirement that narrows the groups most through the inverted
// index, then checks the whole selector once per group.
func (ns *nsIndex) matching(sel labels.Selector, out []*group) []*group {
	reqs, ok := sel.Requirements()
	if !ok {
		return out
	}
	var from []map[*group]struct{}
	best := len(ns.groups) + 1
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			var sets []map[*group]struct{}
			n := 0
			vals := r.ValuesUnsorted()
			for i, v := range vals {
				// A selector is a set: "In [api, api]" must not gather the
				// groups of api twice. Values are few; a scan allocates
				// nothing.
				if slices.Contains(vals[:i], v) {
					continue
				}
				if s := ns.byLabel[labelPair{r.Key(), v}]; s != nil {
					sets = append(sets, s)
					n += len(s)
				}
			}
			if n < best {
				from, best = sets, n
			}
		case selection.Exists:
			if s := ns.byKey[r.Key()]; len(s) < best {
				from, best = []map[*group]struct{}{s}, len(s)
			}
		}
	}
	// The groups of the one requirement a selector has are those it
	// matches: a StatefulSet's pods, a group each, are not matched again.
	exact := len(reqs) == 1 && best <= len(ns.groups)
	if best > len(ns.groups) {
		from = []map[*group]struct{}{ns.groups}
	}
	// A group carries one value per key, so the sets of an In requirement's
	// distinct values are disjoint and no group is seen twice.
	for _, s := range from {
		for g := range s {
			if exact || sel.Matches(labels.Set(g.labels)) {
				out = append(out, g)
			}
		}
	}
	return out
}
