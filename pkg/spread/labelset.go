package spread

import (
	"encoding/binary"
	"slices"
	"strings"
	"unique"
)

// LabelSet is a pod's labels in one canonical, interned form: equal sets
// are equal LabelSets, compared and hashed as one pointer, and held once in
// memory however many pods carry them (the replicas of a workload). The
// Index files its groups of pods under it, and the webhook's pod cache
// keeps it instead of a map per pod. The zero LabelSet is the empty set.
type LabelSet struct {
	// enc holds the pairs in key order, each key and value prefixed by its
	// length, so that any key or value (whatever bytes it holds) decodes
	// back unchanged.
	enc unique.Handle[string]
}

// labelSetBuffer is the room an encoding gets on the stack; a pod's labels
// rarely need more (a Deployment's pod with seven labels takes about 200
// bytes), and a longer one goes to the heap.
const labelSetBuffer = 512

// LabelSetOf returns the LabelSet of ls. Once the set is interned (another
// pod carries it), it allocates nothing for up to 16 labels.
func LabelSetOf(ls map[string]string) LabelSet {
	if len(ls) == 0 {
		return LabelSet{}
	}
	// The pairs are sorted as they are, so that no value is looked up.
	var pairBuf [16]labelPair
	pairs := pairBuf[:0]
	for k, v := range ls {
		pairs = append(pairs, labelPair{k, v})
	}
	slices.SortFunc(pairs, func(a, b labelPair) int { return strings.Compare(a.key, b.key) })
	var buf [labelSetBuffer]byte
	b := buf[:0]
	for _, p := range pairs {
		b = binary.AppendUvarint(b, uint64(len(p.key)))
		b = append(b, p.key...)
		b = binary.AppendUvarint(b, uint64(len(p.value)))
		b = append(b, p.value...)
	}
	// unique.Make copies the string only when it interns a new set.
	return LabelSet{unique.Make(string(b))}
}

// Map returns the labels of s, or nil for the empty set. The strings share
// the interned encoding's memory.
func (s LabelSet) Map() map[string]string {
	if s == (LabelSet{}) {
		return nil
	}
	enc := s.enc.Value()
	ls := map[string]string{}
	for len(enc) > 0 {
		k, rest, ok := cut(enc)
		if !ok {
			break
		}
		v, rest, ok := cut(rest)
		if !ok {
			break
		}
		ls[k] = v
		enc = rest
	}
	return ls
}

// cut splits one length-prefixed string off the front of s. Only
// LabelSetOf makes encodings, so a truncated one cannot occur; if it did,
// Map would return the pairs before the damage.
func cut(s string) (field, rest string, ok bool) {
	n, w := uvarint(s)
	if w == 0 || uint64(len(s)-w) < n {
		return "", "", false
	}
	return s[w : w+int(n)], s[w+int(n):], true
}

// uvarint decodes the unsigned varint binary.AppendUvarint wrote at the
// front of s, and returns it with its width: 0 when s starts with none.
func uvarint(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<(7*i), i + 1
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, 0
}
