package spread

import "math/bits"

// bitset is a set of node IDs. A bitset may be shorter than the index's
// word count: missing words are zero, so a set never has to grow when
// nodes are added elsewhere.
type bitset []uint64

func (b bitset) has(id int32) bool {
	w := int(id >> 6)
	return w < len(b) && b[w]&(1<<(uint(id)&63)) != 0
}

func (b *bitset) set(id int32) {
	w := int(id >> 6)
	for len(*b) <= w {
		*b = append(*b, 0)
	}
	(*b)[w] |= 1 << (uint(id) & 63)
}

func (b bitset) clear(id int32) {
	if w := int(id >> 6); w < len(b) {
		b[w] &^= 1 << (uint(id) & 63)
	}
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// any reports whether the set has a member.
func (b bitset) any() bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
}

// first is the smallest member, or -1.
func (b bitset) first() int32 {
	for i, w := range b {
		if w != 0 {
			return int32(i<<6 + bits.TrailingZeros64(w))
		}
	}
	return -1
}

// copyFrom makes b (full length) equal to src.
func (b bitset) copyFrom(src bitset) {
	n := copy(b, src)
	clear(b[n:])
}

func (b bitset) or(src bitset) {
	for i := range min(len(b), len(src)) {
		b[i] |= src[i]
	}
}

func (b bitset) and(src bitset) {
	n := min(len(b), len(src))
	for i := range n {
		b[i] &= src[i]
	}
	clear(b[n:])
}

func (b bitset) andNot(src bitset) {
	for i := range min(len(b), len(src)) {
		b[i] &^= src[i]
	}
}

func (b bitset) intersects(src bitset) bool {
	for i := range min(len(b), len(src)) {
		if b[i]&src[i] != 0 {
			return true
		}
	}
	return false
}

// each calls f for every member, in increasing order.
func (b bitset) each(f func(id int32)) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			f(int32(wi<<6 + t))
			w &= w - 1
		}
	}
}

// arena hands out zeroed bitsets of one length, carved from one buffer
// that Index reuses across checks through a sync.Pool.
type arena struct {
	words int
	buf   []uint64
	next  int
}

// reset prepares a for sets bitsets of words words each.
func (a *arena) reset(words, sets int) {
	a.words, a.next = words, 0
	if need := words * sets; cap(a.buf) < need {
		a.buf = make([]uint64, need)
	} else {
		a.buf = a.buf[:need]
		clear(a.buf)
	}
}

func (a *arena) get() bitset {
	end := a.next + a.words
	switch {
	case end <= len(a.buf):
	case end <= cap(a.buf):
		// Room an earlier, larger check left: take it, zeroed.
		a.buf = a.buf[:end]
		clear(a.buf[a.next:])
	default:
		// More sets than reset planned for (wording a denial, a pod with
		// many affinity terms): grow, leaving the sets handed out so far
		// in place. The new buffer is twice as large, so that the pooled
		// query serves the next such check without allocating.
		a.buf = make([]uint64, a.words, 2*cap(a.buf)+8*a.words)
		a.next, end = 0, a.words
	}
	b := bitset(a.buf[a.next:end:end])
	a.next = end
	return b
}
