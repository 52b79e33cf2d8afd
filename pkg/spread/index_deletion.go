package spread

import (
	"k8s.io/apimachinery/pkg/labels"
)

// This file is the index's read-only side for the deletion order
// (deletion.go): under one read lock, how many pods each domain of a
// workload's constraints holds, the global minima, and where each of the
// workload's pods named is counted, with the counting rules of Check.

// orderRead is what one DeletionOrder.Update reads from the index. Its
// slices and maps are reused from update to update.
type orderRead struct {
	// nodeGen is the index's node generation at the read.
	nodeGen uint64
	// globalMin is, per constraint, the global minimum as Check computes
	// it: 0 when a counted domain is empty or there are fewer domains than
	// minDomains.
	globalMin []int
	// placed are the pods read: every pod of the order when the nodes
	// changed since the last read, else only those named.
	placed []placement
	// domains holds, flat, per placed pod and constraint, the domain the
	// pod is counted in; counted says whether it is counted at all.
	domains []string
	counted []bool
	// matches caches, per kind, whether a group's labels match each
	// constraint: a workload's pods share one or two label sets.
	matches []groupMatch
	// family caches whether a group's pods are the workload's or another
	// revision's of it.
	family []groupMatch
}

// placement is one pod as the index counts it.
type placement struct {
	name string
	// present is whether the index counts the pod at all: bound, not
	// terminating, not Succeeded or Failed.
	present bool
	// unready: the ReplicaSet controller deletes it before it compares
	// any cost (PodRecord.Unready).
	unready bool
	rec     counted
}

type groupMatch struct {
	g    *group
	mask uint64
}

// NodeGeneration returns a number that changes whenever a node change may
// move a pod between domains or change which nodes a constraint counts
// (labels, NoSchedule and NoExecute taints, cordoning, a node added or
// lost), and only then: a status heartbeat leaves it as it is. A deletion
// order's Update reads every pod's domains again once it changed.
func (ix *Index) NodeGeneration() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.nodeGen
}

// readOrder reads what o needs for one update from the index, under one
// read lock so that the counts and the pods agree: the global minimum of
// each of o's constraints, the domains of the pods named (of all of o's
// pods and those named when a node changed since o's last read), and the
// matching pods, the order's own included, of each domain holding a pod
// of the order, which it sets on the domain (count, read) with o.epoch.
func (ix *Index) readOrder(o *DeletionOrder, names []string) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	r := &o.read
	all := ix.nodeGen != o.nodeGen
	r.nodeGen = ix.nodeGen
	r.placed = r.placed[:0]
	add := func(name string) {
		rec, ok := ix.pods[podKey{o.namespace, name}]
		r.placed = append(r.placed, placement{name: name, present: ok, unready: rec.unready, rec: rec})
	}
	if all {
		for name := range o.pods {
			add(name)
		}
	}
	for _, name := range names {
		if !all || o.pods[name] == nil {
			add(name)
		}
	}
	m := len(o.cons)
	r.domains = grow(r.domains, len(r.placed)*m)
	r.counted = grow(r.counted, len(r.placed)*m)
	r.family = r.family[:0]
	for ki := range o.kinds {
		k := &o.kinds[ki]
		ix.withQueryLocked(k.pod, k.cs, func(q *query) {
			ns := ix.namespaces[o.namespace]
			r.matches = r.matches[:0]
			for j := range k.cs {
				c := &k.cs[j]
				i := k.at[j]
				_, _, r.globalMin[i] = q.countConstraint(j, ns)
				keyIndex := ix.keys[c.topologyKey]
				for p := range r.placed {
					pl := &r.placed[p]
					r.counted[p*m+i], r.domains[p*m+i] = false, ""
					if !pl.present || pl.rec.node.id < 0 || !q.eligible[j].has(pl.rec.node.id) || !r.match(k, pl.rec.group, j) {
						continue
					}
					r.counted[p*m+i], r.domains[p*m+i] = true, keyIndex.valueOf[pl.rec.node.id].value
					// So that its count is read below.
					o.cons[i].domain(r.domains[p*m+i], i)
				}
				// The domains of the order are few beside all those
				// counted (hostnames), or all of them: a lookup each.
				domains := o.cons[i].domains
				for _, vc := range q.counts[j] {
					if d := domains[vc.value.value]; d != nil {
						d.count, d.family, d.read = vc.n, 0, o.epoch
					}
				}
				// Of those, the workload's own and its other revisions',
				// as the index counts them now: the order may not have
				// heard of all of them yet.
				if ns == nil || !c.countsPods() || keyIndex == nil {
					continue
				}
				span := q.matchedGroups[c.selector.String()]
				for _, g := range q.groupBuf[span[0]:span[1]] {
					if !r.inFamily(o, g) {
						continue
					}
					for e, n := range g.nodes {
						if e.id < 0 || !q.eligible[j].has(e.id) {
							continue
						}
						if d := domains[keyIndex.valueOf[e.id].value]; d != nil && d.read == o.epoch {
							d.family += int(n)
						}
					}
				}
			}
		})
	}
	// The records point into the index, which may change once unlocked.
	for p := range r.placed {
		r.placed[p].rec = counted{}
	}
	clear(r.family)
	r.family = r.family[:0]
}

// inFamily reports whether the pods of group g are the order's workload's
// or another revision's of it (DeletionOrder.sameWorkload).
func (r *orderRead) inFamily(o *DeletionOrder, g *group) bool {
	for _, gm := range r.family {
		if gm.g == g {
			return gm.mask != 0
		}
	}
	var mask uint64
	if o.sameWorkload(g.labels) {
		mask = 1
	}
	r.family = append(r.family, groupMatch{g, mask})
	return mask != 0
}

// match reports whether constraint j of kind k counts the pods of group g.
func (r *orderRead) match(k *orderKind, g *group, j int) bool {
	if j >= 64 {
		c := &k.cs[j]
		return c.countsPods() && c.selector.Matches(labels.Set(g.labels))
	}
	for _, gm := range r.matches {
		if gm.g == g {
			return gm.mask&(1<<j) != 0
		}
	}
	var mask uint64
	for j := range min(len(k.cs), 64) {
		if c := &k.cs[j]; c.countsPods() && c.selector.Matches(labels.Set(g.labels)) {
			mask |= 1 << j
		}
	}
	r.matches = append(r.matches, groupMatch{g, mask})
	return mask&(1<<j) != 0
}

// grow returns s with length n, reusing its array when it can.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
