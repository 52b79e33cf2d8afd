package spread

import (
	"encoding/binary"
	"maps"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Layout is what placing many replicas of one pod needs to know of the
// cluster, from one check: every counted domain with its count and, among
// the nodes and templates, those a replica could take once the counts
// allow it. pkg/forecast places a workload's replicas on it.
//
// It answers what Check with Explain would, without the per-node reasons
// that make an explained check cost milliseconds at thousands of nodes:
// the nodes that only the skew excludes today are the nodes a later
// placement may open, and every node of a tuple of domains is the same
// node to the spread. Domains are positions, not names, so that a layout
// of thousands of hostnames builds no map of them; and a layout given back
// with Release lends its slices to the next one, so that a forecast per
// admission request does not leave them for the garbage collector.
type Layout struct {
	// Result is Check's result without Explain.
	Result *Result
	// Domains are, per hard constraint in the order of
	// Result.Constraints, its counted domains, those with no matching pod
	// too (they take part in the global minimum); NodeDomains are
	// positions in them.
	Domains []LayoutDomains
	// Nodes are the nodes that pass the pod's filters and carry every hard
	// topology key, one per distinct tuple of domains: the first of the
	// tuple by name. The tuples of feasible nodes come first, then those
	// the skew alone excludes, each part in the order of its nodes' names
	// (so the order of Check's FeasibleNodes, then its Excluded).
	Nodes []string
	// NodeDomains are the domains of Nodes, one per constraint and node,
	// flat (see NodeDomainsOf): thousands of nodes cost two slices, not a
	// slice each.
	NodeDomains []int32
	// Templates are the templates whose fresh node is feasible or excluded
	// by the skew alone, by name.
	Templates []Template
	// Departing are where the pods LayoutDeparting was asked about are
	// counted.
	Departing Departures
}

// layouts keeps the layouts given back by Release.
var layouts = sync.Pool{New: func() any { return new(Layout) }}

// Release gives l back, to lend its slices to a later layout. Neither l
// nor any slice read from it (Domains, Nodes, NodeDomains, Templates,
// Departing) may be used after; Result, and the strings, may.
func (l *Layout) Release() {
	for i := range l.Domains {
		clear(l.Domains[i].Names)
	}
	clear(l.Nodes)
	clear(l.Templates)
	clear(l.Departing.Names)
	clear(l.Departing.Nodes)
	l.Result = nil
	layouts.Put(l)
}

// newLayout returns a layout for n constraints whose slices are empty,
// with the room a released one had.
func newLayout(res *Result, n int) *Layout {
	l := layouts.Get().(*Layout)
	l.Result = res
	if cap(l.Domains) < n {
		l.Domains = append(l.Domains[:cap(l.Domains)], make([]LayoutDomains, n-cap(l.Domains))...)
	}
	l.Domains = l.Domains[:n]
	for i := range l.Domains {
		l.Domains[i].Names, l.Domains[i].Counts = l.Domains[i].Names[:0], l.Domains[i].Counts[:0]
	}
	l.Nodes, l.NodeDomains, l.Templates = l.Nodes[:0], l.NodeDomains[:0], l.Templates[:0]
	d := &l.Departing
	d.Names, d.Nodes, d.Domains, d.constraints = d.Names[:0], d.Nodes[:0], d.Domains[:0], n
	return l
}

// LayoutDomains are one constraint's counted domains, in no particular
// order, and their matching pods.
type LayoutDomains struct {
	Names  []string
	Counts []int
}

// NodeDomainsOf returns the domains of node k of l.Nodes, per constraint
// a position in that constraint's l.Domains.
func (l *Layout) NodeDomainsOf(k int) []int32 {
	n := len(l.Domains)
	return l.NodeDomains[k*n : (k+1)*n : (k+1)*n]
}

// Layout checks pod as Check does without Explain, its message worded to
// detail, and returns what placing its replicas needs. It costs a check
// plus one pass over the counted and the candidate nodes.
func (ix *Index) Layout(pod *v1.Pod, detail MessageDetail) (*Layout, error) {
	cs, err := hardConstraints(pod)
	if err != nil {
		return nil, err
	}
	var l *Layout
	ix.withQuery(pod, cs, func(q *query) { l, err = q.layout(detail) })
	return l, err
}

// layout is Layout on a started query.
func (q *query) layout(detail MessageDetail) (*Layout, error) {
	ev := q.evaluate()
	ev.checkTemplates(q.ix.templates, q.pod, q)
	if ev.verdict() == VerdictUnsatisfiable {
		ev.facts = newIndexFacts(q, ev)
	}
	res, err := assemble(ev, Options{Detail: detail})
	if err != nil {
		return nil, err
	}
	l := newLayout(res, len(q.cs))
	for i := range q.cs {
		q.layoutDomains(i, ev, &l.Domains[i])
	}
	l.Nodes, l.NodeDomains = q.layoutNodes(l.Nodes, l.NodeDomains)
	for _, r := range ev.templates {
		if r.reason == "" || r.reason == ReasonSkew {
			l.Templates = append(l.Templates, *r.template)
		}
	}
	if len(l.Templates) == 0 {
		l.Templates = nil // none, as a layout never released says it
	}
	return l, nil
}

// addEmptyDomains adds to ev.domains, with 0, each counted domain that
// holds no matching pod.
func (q *query) addEmptyDomains(ev *evaluation) {
	for i := range q.cs {
		domains := ev.domains[i]
		if len(domains) < ev.domainCount[i] {
			// Grown once to its size rather than doubling thousands of
			// hostname domains in.
			domains = make(map[string]int, ev.domainCount[i])
			maps.Copy(domains, ev.domains[i])
			ev.domains[i] = domains
		}
		q.eachDomain(i, func(_ int32, v *valueIndex) {
			if _, ok := domains[v.value]; !ok {
				domains[v.value] = 0
			}
		})
	}
}

// layoutDomains lists constraint i's counted domains into d, and records
// each counted node's position among them in q.position[i].
func (q *query) layoutDomains(i int, ev *evaluation, d *LayoutDomains) {
	d.Names, d.Counts = slices.Grow(d.Names, ev.domainCount[i]), slices.Grow(d.Counts, ev.domainCount[i])
	for len(q.position) <= i {
		q.position = append(q.position, nil)
	}
	if n := len(q.ix.slots); cap(q.position[i]) < n {
		q.position[i] = make([]int32, n)
	}
	q.position[i] = q.position[i][:len(q.ix.slots)]
	at := q.valuePosition
	clear(at)
	q.eachDomain(i, func(id int32, v *valueIndex) {
		// A value of one node needs no lookup: its node is its only
		// visit.
		p, ok := int32(0), false
		if v.count > 1 {
			p, ok = at[v]
		}
		if !ok {
			p = int32(len(d.Names))
			d.Names = append(d.Names, v.value)
			d.Counts = append(d.Counts, 0)
			if v.count > 1 {
				at[v] = p
			}
		}
		q.position[i][id] = p
	})
	// The domains holding a matching pod, the few among thousands of
	// hostnames, are told by their counts, found by position rather than
	// by name: every one is a domain of a counted node.
	for _, vc := range q.counts[i] {
		p, v := int32(0), vc.value
		if v.count == 1 {
			p = q.position[i][v.only]
		} else {
			p = at[v]
		}
		d.Counts[p] = vc.n
	}
}

// eachDomain visits each node counted for constraint i with its domain.
func (q *query) eachDomain(i int, visit func(id int32, v *valueIndex)) {
	ki := q.ix.keys[q.cs[i].topologyKey]
	if ki == nil {
		return
	}
	q.eligible[i].each(func(id int32) { visit(id, ki.valueOf[id]) })
}

// layoutGroup is a tuple of domains of a Layout, by its first node.
type layoutGroup struct {
	id       int32
	feasible bool
}

// layoutNodes groups the candidate nodes that carry every key by their
// tuple of domains, appended to names and domains; see Layout.Nodes. It
// reads the positions that layoutDomains recorded: a candidate carrying
// every key is counted for every constraint (the inclusion policies only
// drop nodes the filters drop too).
//
// The nodes are visited in the index's order of names, so the first node
// of a tuple is the one that names it, and the tuples come in the order of
// their names: thousands of hostnames cost no sort.
func (q *query) layoutNodes(names []string, domains []int32) ([]string, []int32) {
	ix, n := q.ix, len(q.cs)
	groups := q.groups[:0]
	defer func() { q.groups = groups[:0] }()
	// A tuple is its positions: packed in a word for up to two
	// constraints, so that a node costs no allocation; as bytes beyond.
	// When a key's every value is on one node (a hostname), every node is
	// a tuple of its own and needs no lookup at all.
	unique := false
	for i := range q.cs {
		ki := ix.keys[q.cs[i].topologyKey]
		if ki == nil {
			return names, domains // no node carries the key
		}
		unique = unique || ki.shared == 0
	}
	var short map[uint64]struct{}
	var long map[string]struct{}
	var buf []byte
	feasible := 0
	for _, id := range ix.byName {
		if !q.candidates.has(id) || !q.keyed.has(id) {
			continue
		}
		switch {
		case unique:
		case n <= 2:
			var k uint64
			for i := range n {
				k = k<<32 | uint64(uint32(q.position[i][id]))
			}
			if _, ok := short[k]; ok {
				continue
			}
			if short == nil {
				short = map[uint64]struct{}{}
			}
			short[k] = struct{}{}
		default:
			buf = buf[:0]
			for i := range n {
				buf = binary.LittleEndian.AppendUint32(buf, uint32(q.position[i][id]))
			}
			if _, ok := long[string(buf)]; ok {
				continue
			}
			if long == nil {
				long = map[string]struct{}{}
			}
			long[string(buf)] = struct{}{}
		}
		gr := layoutGroup{id: id, feasible: q.feasible.has(id)}
		if gr.feasible {
			feasible++
		}
		groups = append(groups, gr)
	}
	if len(groups) == 0 {
		return names, domains
	}
	// Feasibility is a function of the tuple (the filters passed, only the
	// counts of its domains decide), so each group is wholly feasible or
	// not: the feasible ones first, each part in the order of names.
	names, domains = slices.Grow(names, len(groups)), slices.Grow(domains, len(groups)*n)
	for _, want := range []bool{true, false} {
		if want && feasible == 0 || !want && feasible == len(groups) {
			continue
		}
		for _, gr := range groups {
			if gr.feasible != want {
				continue
			}
			names = append(names, ix.slots[gr.id].name)
			for i := range n {
				domains = append(domains, q.position[i][gr.id])
			}
		}
	}
	return names, domains
}
