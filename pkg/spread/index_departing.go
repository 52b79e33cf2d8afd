package spread

import (
	v1 "k8s.io/api/core/v1"
)

// This file answers, for a scale-down, where the pods a controller is about
// to delete are counted. It reads only what the index already keeps of
// every pod (its node and label set, by namespace and name), so a pod event
// costs nothing more for it: a StatefulSet's pods are named by their
// ordinals, and a ReplicaSet's pods are named by whoever ranked them.

// Departures are where the pods a scale-down deletes are counted, for the
// Layout of one of their workload's pods, read from the index with it.
// Its slices are the layout's: Release gives them back too.
type Departures struct {
	// Names are the pods asked about, in the order given.
	Names []string
	// Nodes are the nodes the index counts the pods on: "" for a pod it
	// does not count (unknown, unbound, terminating, Succeeded or Failed),
	// whose deletion changes no count.
	Nodes []string
	// Domains holds, per pod and hard constraint, the position in
	// Layout.Domains of the domain that counts the pod, or -1 when that
	// constraint does not count it (its node left out by the constraint's
	// inclusion policies, or its labels not selected); flat, see DomainsOf.
	Domains []int32
	// constraints is the number of hard constraints.
	constraints int
}

// DomainsOf returns the domains of pod k of d.Names, per hard constraint a
// position in that constraint's Layout.Domains or -1.
func (d *Departures) DomainsOf(k int) []int32 {
	n := d.constraints
	return d.Domains[k*n : (k+1)*n : (k+1)*n]
}

// LayoutDeparting is Layout for a pod of a workload about to lose the pods
// named departing (of the pod's namespace), with where each of them is
// counted (Layout.Departing), read under the same lock as the counts, so
// that taking the departing pods off the layout's counts leaves the counts
// the scale-down leaves. It costs a Layout plus a map lookup per departing
// pod and, once, a set of the groups its constraints' selectors matched.
func (ix *Index) LayoutDeparting(pod *v1.Pod, detail MessageDetail, departing []string) (*Layout, error) {
	cs, err := hardConstraints(pod)
	if err != nil {
		return nil, err
	}
	var l *Layout
	ix.withQuery(pod, cs, func(q *query) {
		if l, err = q.layout(detail); err == nil {
			q.departures(departing, &l.Departing)
		}
	})
	return l, err
}

// selects reports whether the groups at span of q.groupBuf, those a
// selector matched when counting, hold g.
func (q *query) selects(span [2]int, g *group) bool {
	if len(q.selected) == 0 || q.selectedSpan != span {
		clear(q.selected)
		for _, g := range q.groupBuf[span[0]:span[1]] {
			q.selected[g] = struct{}{}
		}
		q.selectedSpan = span
	}
	_, ok := q.selected[g]
	return ok
}

// departures reads into d where the pods named are counted, after q.layout
// has recorded the positions of the counted nodes' domains.
func (q *query) departures(names []string, d *Departures) {
	n := len(q.cs)
	// Whether a pod's group is counted is read from the groups its
	// constraint's selector matched when counting (the same groups: those
	// of the pod's namespace that the selector matches), not matched
	// again per pod: a StatefulSet's thousand pods are a thousand groups.
	// A ReplicaSet's pods share one, whose answer is kept from the pod
	// before.
	spans, counted := make([][2]int, n), make([]bool, n)
	for i := range q.cs {
		// Not there when no node carries the key or the constraint
		// counts no pod: then it counts none of them.
		spans[i], counted[i] = q.matchedGroups[q.cs[i].selector.String()]
	}
	var last *group
	matches := make([]bool, n)
	d.Names = append(d.Names, names...)
	for k, name := range names {
		d.Nodes = append(d.Nodes, "")
		for range n {
			d.Domains = append(d.Domains, -1)
		}
		rec, ok := q.ix.pods[podKey{q.pod.Namespace, name}]
		if !ok || rec.node.id < 0 {
			continue
		}
		if rec.group != last {
			last = rec.group
			for i := range q.cs {
				matches[i] = counted[i] && q.selects(spans[i], rec.group)
			}
		}
		d.Nodes[k] = rec.node.name
		domains := d.DomainsOf(k)
		for i := range q.cs {
			// As evaluate counts: a node that takes part, a group the
			// selector matches.
			if q.eligible[i].has(rec.node.id) && q.cs[i].countsPods() && matches[i] {
				domains[i] = q.position[i][rec.node.id]
			}
		}
	}
}
