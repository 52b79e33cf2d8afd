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

func (b bitset) any() bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
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

// arena hands out zeroed bitsets of one length from a single allocation,
// for the scratch sets of one Check.
type arena struct {
	words int
	buf   []uint64
}

func newArena(words, sets int) *arena {
	return &arena{words: words, buf: make([]uint64, words*sets)}
}

func (a *arena) get() bitset {
	if len(a.buf) < a.words {
		a.buf = make([]uint64, a.words*8)
	}
	b := bitset(a.buf[:a.words:a.words])
	a.buf = a.buf[a.words:]
	return b
}
