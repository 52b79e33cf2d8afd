package forecast

import (
	"math"
	"slices"
)

// scanBudget is how many slots place looks at, from the one after the last
// chosen, before it asks the slot index: replicas of equal load taking
// turns, the next slot at the floor is most often among the first few, and
// a forecast whose every placement finds it there builds no index.
const scanBudget = 32

// slotIndex finds the slot place chooses (the smallest load among the
// feasible slots, the first of them from placement.next) without visiting
// every slot, so that a placement costs what the constraints' domains cost,
// not what the nodes do.
//
// It splits the constraints in two. The private one is a constraint whose
// every domain is the domain of at most one slot (a hostname): a replica
// bound to a slot changes that constraint's count of that slot alone. The
// others are shared (a zone): the slots are grouped in classes by their
// tuple of shared domains, and every slot of a class has the same shared
// counts, so the same shared load and the same shared feasibility. Within
// a class, a slot differs only by its private count, which is both its own
// part of the load and, under one threshold (maxSkew - selfMatch + global
// minimum), its feasibility: the class's best slot is a minimum over its
// private counts, kept in a segment tree per class. A placement then looks
// at each class once (its shared counts, then its tree's minimum and the
// first slot at that minimum from next, O(log slots)) and updates one leaf.
//
// CAVEAT: one constraint at most is private; a second constraint whose
// domains are one slot's each is counted as shared, and then every slot is
// a class of its own, which costs what visiting every slot does.
type slotIndex struct {
	// used is set once the index answered a placement: the scan did not
	// find the floor, and the next placements ask the index first.
	used, built bool
	// private is the private constraint's position, -1 when none is.
	private int
	// shared are the positions of the other constraints.
	shared []int
	// classes are the classes in the order of their first slot.
	classes []slotClass
	// members are the classes' slots, in increasing order, and trees their
	// segment trees: class k owns members[off:off+size] (its first n in
	// use) and tree[2*off:2*off+2*size], whose leaf j is the private count
	// of members[off+j], math.MaxInt when unused.
	members []int32
	tree    []int
	// classOf and posOf are each slot's class and position in it.
	classOf, posOf []int32
	// owner is, per domain of the private constraint, the slot that is in
	// it, -1 for none.
	owner []int32
	// scratch for build.
	table []int32
	seen  []bool
}

// slotClass is one tuple of shared domains and its slots.
type slotClass struct {
	off, n, size int
}

// reset forgets the index, keeping its slices for the next one.
func (ix *slotIndex) reset() slotIndex {
	return slotIndex{
		shared: ix.shared[:0], classes: ix.classes[:0], members: ix.members[:0], tree: ix.tree[:0],
		classOf: ix.classOf[:0], posOf: ix.posOf[:0], owner: ix.owner[:0], table: ix.table[:0], seen: ix.seen[:0],
	}
}

// build indexes p's slots.
func (ix *slotIndex) build(p *placement) {
	*ix = ix.reset()
	ix.built = true
	nslots := len(p.slots)
	// The private constraint: every domain of one slot at most; among
	// several, one whose counts a replica changes.
	ix.private = -1
	for i, c := range p.constraints {
		ix.seen = append(ix.seen[:0], make([]bool, len(c.names))...)
		private := true
		for k := range nslots {
			d := p.slot(k)[i]
			if ix.seen[d] {
				private = false
				break
			}
			ix.seen[d] = true
		}
		if private && (ix.private < 0 || c.selfMatch > p.constraints[ix.private].selfMatch) {
			ix.private = i
		}
	}
	for i := range p.constraints {
		if i != ix.private {
			ix.shared = append(ix.shared, i)
		}
	}
	// Classes by the tuple of shared domains, refined one constraint at a
	// time: (class so far, domain) numbered in a table when it is small,
	// else in a map.
	ix.classOf = append(ix.classOf[:0], make([]int32, nslots)...)
	classes := 1
	for _, i := range ix.shared {
		width := len(p.constraints[i].names)
		var byMap map[int64]int32
		if classes*width <= 4*nslots+1024 {
			ix.table = append(ix.table[:0], make([]int32, classes*width)...)
		} else {
			byMap = make(map[int64]int32, nslots)
		}
		next := int32(0)
		for k := range nslots {
			key := int64(ix.classOf[k])*int64(width) + int64(p.slot(k)[i])
			if byMap != nil {
				id, ok := byMap[key]
				if !ok {
					id, next = next, next+1
					byMap[key] = id
				}
				ix.classOf[k] = id
				continue
			}
			// The table holds id+1, 0 for none yet.
			if ix.table[key] == 0 {
				next++
				ix.table[key] = next
			}
			ix.classOf[k] = ix.table[key] - 1
		}
		classes = int(next)
	}
	if nslots == 0 {
		classes = 0
	}
	// Each class's room: its slots, rounded up to a power of two.
	ix.classes = slices.Grow(ix.classes[:0], classes)[:classes]
	for k := range ix.classes {
		ix.classes[k] = slotClass{}
	}
	for k := range nslots {
		ix.classes[ix.classOf[k]].n++
	}
	off := 0
	for k := range ix.classes {
		c := &ix.classes[k]
		c.off, c.size = off, ceilPow2(c.n)
		off += c.size
		c.n = 0
	}
	ix.members = append(ix.members[:0], make([]int32, off)...)
	ix.posOf = append(ix.posOf[:0], make([]int32, nslots)...)
	ix.tree = append(ix.tree[:0], make([]int, 2*off)...)
	for k := range ix.tree {
		ix.tree[k] = math.MaxInt
	}
	for k := range nslots {
		c := &ix.classes[ix.classOf[k]]
		ix.posOf[k] = int32(c.n)
		ix.members[c.off+c.n] = int32(k)
		ix.tree[2*c.off+c.size+c.n] = ix.own(p, k)
		c.n++
	}
	for k := range ix.classes {
		c := &ix.classes[k]
		t := ix.tree[2*c.off : 2*(c.off+c.size)]
		for j := c.size - 1; j >= 1; j-- {
			t[j] = min(t[2*j], t[2*j+1])
		}
	}
	if ix.private >= 0 {
		ix.owner = append(ix.owner[:0], make([]int32, len(p.constraints[ix.private].names))...)
		for d := range ix.owner {
			ix.owner[d] = -1
		}
		for k := range nslots {
			ix.owner[p.slot(k)[ix.private]] = int32(k)
		}
	}
}

// ceilPow2 is the smallest power of two at least n, and at least 1.
func ceilPow2(n int) int {
	s := 1
	for s < n {
		s *= 2
	}
	return s
}

// own is slot k's private count, 0 without a private constraint.
func (ix *slotIndex) own(p *placement, k int) int {
	if ix.private < 0 {
		return 0
	}
	return p.constraints[ix.private].counts[p.slot(k)[ix.private]]
}

// best returns the slot place chooses, -1 when no slot is feasible.
func (ix *slotIndex) best(p *placement) int {
	if !ix.built {
		ix.build(p)
	}
	ix.used = true
	// ceiling is the largest private count that fits.
	ceiling := math.MaxInt
	if ix.private >= 0 {
		c := p.constraints[ix.private]
		ceiling = int(c.maxSkew) - c.selfMatch + c.globalMin()
	}
	nslots := len(p.slots)
	best, bestLoad, bestDist := -1, 0, 0
	for k := range ix.classes {
		c := &ix.classes[k]
		first := p.slot(int(ix.members[c.off]))
		load, ok := 0, true
		for _, i := range ix.shared {
			s := p.constraints[i]
			if !s.fits(first[i]) {
				ok = false
				break
			}
			load += s.counts[first[i]]
		}
		t := ix.tree[2*c.off : 2*(c.off+c.size)]
		if !ok || t[1] > ceiling {
			continue
		}
		load += t[1]
		if best >= 0 && load > bestLoad {
			continue
		}
		slot := ix.firstAt(c, t, p.next)
		dist := (slot - p.next + nslots) % nslots
		if best < 0 || load < bestLoad || dist < bestDist {
			best, bestLoad, bestDist = slot, load, dist
		}
	}
	return best
}

// firstAt returns class c's first slot from next on, around the end, whose
// private count is the class's least.
func (ix *slotIndex) firstAt(c *slotClass, t []int, next int) int {
	members := ix.members[c.off : c.off+c.n]
	lo, _ := slices.BinarySearch(members, int32(next))
	j := firstAtMost(t, 1, 0, c.size, lo, t[1])
	if j < 0 {
		j = firstAtMost(t, 1, 0, c.size, 0, t[1])
	}
	return int(members[j])
}

// firstAtMost returns the first leaf from lo on, below tree node v that
// spans leaves [from, to), whose value is at most m, -1 when none is.
func firstAtMost(t []int, v, from, to, lo, m int) int {
	if to <= lo || t[v] > m {
		return -1
	}
	if to-from == 1 {
		return from
	}
	mid := (from + to) / 2
	if j := firstAtMost(t, 2*v, from, mid, lo, m); j >= 0 {
		return j
	}
	return firstAtMost(t, 2*v+1, mid, to, lo, m)
}

// bound updates the index after a replica was bound to slot k: its private
// count is the only one the index keeps.
func (ix *slotIndex) bound(p *placement, k int) {
	if !ix.built || ix.private < 0 {
		return
	}
	c := &ix.classes[ix.classOf[k]]
	ix.set(c, int(ix.posOf[k]), ix.own(p, k))
}

// set changes leaf j of class c to v.
func (ix *slotIndex) set(c *slotClass, j, v int) {
	t := ix.tree[2*c.off : 2*(c.off+c.size)]
	j += c.size
	t[j] = v
	for j /= 2; j >= 1; j /= 2 {
		t[j] = min(t[2*j], t[2*j+1])
	}
}

// added takes in slot k, a template's new node appended to p.slots: into
// the class of its shared domains when that class has room and its private
// domain is no other slot's; else the index is built again at the next
// placement.
func (ix *slotIndex) added(p *placement, k int) {
	if !ix.built {
		return
	}
	ix.built = false
	domains := p.slot(k)
	if ix.private >= 0 {
		d := int(domains[ix.private])
		for len(ix.owner) <= d {
			ix.owner = append(ix.owner, -1)
		}
		if ix.owner[d] >= 0 {
			return
		}
		ix.owner[d] = int32(k)
	}
	for id := range ix.classes {
		c := &ix.classes[id]
		first := p.slot(int(ix.members[c.off]))
		same := true
		for _, i := range ix.shared {
			same = same && first[i] == domains[i]
		}
		if !same {
			continue
		}
		if c.n == c.size {
			return
		}
		ix.members[c.off+c.n] = int32(k)
		ix.classOf = append(ix.classOf, int32(id))
		ix.posOf = append(ix.posOf, int32(c.n))
		c.n++
		ix.set(c, c.n-1, ix.own(p, k))
		ix.built = true
		return
	}
}
