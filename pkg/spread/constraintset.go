package spread

import (
	"encoding/binary"
	"slices"
	"strings"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConstraintSet is a pod's topology spread constraints in one canonical,
// interned form, as LabelSet is its labels: equal lists are equal
// ConstraintSets, compared as one pointer and held once however many pods
// carry them. A pod's constraints are in its spec only: the webhook
// injects them at creation, so its template says nothing of them. The
// Index tallies the sets its pods carry (Carried), so that the audit knows
// them without reading a pod from the API server. The zero ConstraintSet
// is no constraint.
type ConstraintSet struct {
	// enc holds the constraints in order, each field in a fixed order,
	// strings prefixed by their length (as LabelSet's), a selector's
	// matchLabels sorted by key, so that the encoding decodes back to
	// equal constraints whatever bytes the strings hold.
	enc unique.Handle[string]
}

// constraintSetBuffer is the room an encoding gets on the stack: two
// constraints over a Deployment pod's selector take about 200 bytes, and a
// longer list goes to the heap.
const constraintSetBuffer = 1024

// ConstraintSetOf returns the ConstraintSet of cs. Once the set is
// interned (another pod carries it), it allocates nothing for selectors of
// up to 16 matchLabels.
func ConstraintSetOf(cs []v1.TopologySpreadConstraint) ConstraintSet {
	if len(cs) == 0 {
		return ConstraintSet{}
	}
	var buf [constraintSetBuffer]byte
	b := binary.AppendUvarint(buf[:0], uint64(len(cs)))
	for i := range cs {
		b = appendConstraint(b, &cs[i])
	}
	// unique.Make copies the string only when it interns a new set.
	return ConstraintSet{unique.Make(string(b))}
}

func appendConstraint(b []byte, c *v1.TopologySpreadConstraint) []byte {
	b = binary.AppendUvarint(b, uint64(uint32(c.MaxSkew)))
	b = appendString(b, c.TopologyKey)
	b = appendString(b, string(c.WhenUnsatisfiable))
	b = appendSelector(b, c.LabelSelector)
	b = appendFlag(b, c.MinDomains != nil)
	if c.MinDomains != nil {
		b = binary.AppendUvarint(b, uint64(uint32(*c.MinDomains)))
	}
	b = appendFlag(b, c.NodeAffinityPolicy != nil)
	if c.NodeAffinityPolicy != nil {
		b = appendString(b, string(*c.NodeAffinityPolicy))
	}
	b = appendFlag(b, c.NodeTaintsPolicy != nil)
	if c.NodeTaintsPolicy != nil {
		b = appendString(b, string(*c.NodeTaintsPolicy))
	}
	b = binary.AppendUvarint(b, uint64(len(c.MatchLabelKeys)))
	for _, k := range c.MatchLabelKeys {
		b = appendString(b, k)
	}
	return b
}

func appendSelector(b []byte, s *metav1.LabelSelector) []byte {
	b = appendFlag(b, s != nil)
	if s == nil {
		return b
	}
	// The pairs are sorted as they are, so that no value is looked up.
	var pairBuf [16]labelPair
	pairs := pairBuf[:0]
	for k, v := range s.MatchLabels {
		pairs = append(pairs, labelPair{k, v})
	}
	slices.SortFunc(pairs, func(a, b labelPair) int { return strings.Compare(a.key, b.key) })
	b = binary.AppendUvarint(b, uint64(len(pairs)))
	for _, p := range pairs {
		b = appendString(b, p.key)
		b = appendString(b, p.value)
	}
	b = binary.AppendUvarint(b, uint64(len(s.MatchExpressions)))
	for _, r := range s.MatchExpressions {
		b = appendString(b, r.Key)
		b = appendString(b, string(r.Operator))
		b = binary.AppendUvarint(b, uint64(len(r.Values)))
		for _, v := range r.Values {
			b = appendString(b, v)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendFlag(b []byte, set bool) []byte {
	if set {
		return append(b, 1)
	}
	return append(b, 0)
}

// Constraints returns the constraints of s, newly allocated (nil for the
// zero set): the caller may keep and modify them.
func (s ConstraintSet) Constraints() []v1.TopologySpreadConstraint {
	if s == (ConstraintSet{}) {
		return nil
	}
	d := decoder{s: s.enc.Value()}
	out := make([]v1.TopologySpreadConstraint, d.uint())
	for i := range out {
		c := &out[i]
		c.MaxSkew = int32(uint32(d.uint()))
		c.TopologyKey = d.str()
		c.WhenUnsatisfiable = v1.UnsatisfiableConstraintAction(d.str())
		if d.flag() {
			c.LabelSelector = &metav1.LabelSelector{}
			if n := d.uint(); n > 0 {
				c.LabelSelector.MatchLabels = make(map[string]string, n)
				for range n {
					k := d.str()
					c.LabelSelector.MatchLabels[k] = d.str()
				}
			}
			if n := d.uint(); n > 0 {
				c.LabelSelector.MatchExpressions = make([]metav1.LabelSelectorRequirement, n)
				for j := range c.LabelSelector.MatchExpressions {
					r := &c.LabelSelector.MatchExpressions[j]
					r.Key = d.str()
					r.Operator = metav1.LabelSelectorOperator(d.str())
					if m := d.uint(); m > 0 {
						r.Values = make([]string, m)
						for k := range r.Values {
							r.Values[k] = d.str()
						}
					}
				}
			}
		}
		if d.flag() {
			n := int32(uint32(d.uint()))
			c.MinDomains = &n
		}
		if d.flag() {
			p := v1.NodeInclusionPolicy(d.str())
			c.NodeAffinityPolicy = &p
		}
		if d.flag() {
			p := v1.NodeInclusionPolicy(d.str())
			c.NodeTaintsPolicy = &p
		}
		if n := d.uint(); n > 0 {
			c.MatchLabelKeys = make([]string, n)
			for j := range c.MatchLabelKeys {
				c.MatchLabelKeys[j] = d.str()
			}
		}
	}
	return out
}

// decoder reads what ConstraintSetOf wrote. Only ConstraintSetOf makes
// encodings, so a truncated one cannot occur; if it did, the decoder
// would read zeros and empty strings past the damage.
type decoder struct{ s string }

func (d *decoder) uint() uint64 {
	n, w := uvarint(d.s)
	d.s = d.s[w:]
	return n
}

func (d *decoder) flag() bool { return d.uint() != 0 }

func (d *decoder) str() string {
	field, rest, ok := cut(d.s)
	if !ok {
		d.s = ""
		return ""
	}
	d.s = rest
	return field
}

// Matches reports whether s is the set of cs, as ConstraintSetOf(cs) ==
// s would, without encoding cs: it reads s's encoding and compares field
// by field, matchLabels by lookup. It allocates nothing, so that a pod
// cache that remembers the set a workload's pods carry recognizes the
// next replica's for less than interning costs.
func (s ConstraintSet) Matches(cs []v1.TopologySpreadConstraint) bool {
	if s == (ConstraintSet{}) {
		return len(cs) == 0
	}
	d := decoder{s: s.enc.Value()}
	if d.uint() != uint64(len(cs)) {
		return false
	}
	for i := range cs {
		if !d.matches(&cs[i]) {
			return false
		}
	}
	return true
}

// matches reads one constraint and reports whether it is c.
func (d *decoder) matches(c *v1.TopologySpreadConstraint) bool {
	if int32(uint32(d.uint())) != c.MaxSkew || d.str() != c.TopologyKey || d.str() != string(c.WhenUnsatisfiable) {
		return false
	}
	if d.flag() != (c.LabelSelector != nil) {
		return false
	}
	if sel := c.LabelSelector; sel != nil {
		if d.uint() != uint64(len(sel.MatchLabels)) {
			return false
		}
		for range len(sel.MatchLabels) {
			k, v := d.str(), d.str()
			if got, ok := sel.MatchLabels[k]; !ok || got != v {
				return false
			}
		}
		if d.uint() != uint64(len(sel.MatchExpressions)) {
			return false
		}
		for _, r := range sel.MatchExpressions {
			if d.str() != r.Key || d.str() != string(r.Operator) || d.uint() != uint64(len(r.Values)) {
				return false
			}
			for _, v := range r.Values {
				if d.str() != v {
					return false
				}
			}
		}
	}
	if d.flag() != (c.MinDomains != nil) || c.MinDomains != nil && int32(uint32(d.uint())) != *c.MinDomains {
		return false
	}
	if d.flag() != (c.NodeAffinityPolicy != nil) || c.NodeAffinityPolicy != nil && d.str() != string(*c.NodeAffinityPolicy) {
		return false
	}
	if d.flag() != (c.NodeTaintsPolicy != nil) || c.NodeTaintsPolicy != nil && d.str() != string(*c.NodeTaintsPolicy) {
		return false
	}
	if d.uint() != uint64(len(c.MatchLabelKeys)) {
		return false
	}
	for _, k := range c.MatchLabelKeys {
		if d.str() != k {
			return false
		}
	}
	return true
}
