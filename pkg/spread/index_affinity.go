package spread

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// The nodes a pod's nodeSelector and required node affinity admit, as set
// operations on the index's per-label node sets rather than a match per
// node.

// affinityNodes is the set of live nodes matching the pod's nodeSelector
// and required node affinity, as nodeaffinity.GetRequiredNodeAffinity(pod)
// .Match decides node by node:
// https://github.com/kubernetes/component-helpers/blob/v0.37.1/scheduling/corev1/nodeaffinity/nodeaffinity.go
func (q *query) affinityNodes() bitset {
	ix := q.ix
	b := q.arena.get()
	b.copyFrom(ix.live)
	for k, v := range q.pod.Spec.NodeSelector {
		if vi := ix.value(k, v); vi != nil {
			b.and(vi.nodes)
		} else {
			clear(b)
		}
	}
	a := q.pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return b
	}
	// The terms are ORed; an empty term, or one that does not parse,
	// matches nothing. No term at all matches nothing either.
	terms := q.arena.get()
	term := q.arena.get()
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		if q.termNodes(&t, term) {
			terms.or(term)
		}
	}
	b.and(terms)
	return b
}

// termNodes sets out to the nodes matching one node selector term, and
// reports false when the term does not parse.
func (q *query) termNodes(t *v1.NodeSelectorTerm, out bitset) bool {
	ix := q.ix
	out.copyFrom(ix.live)
	for _, expr := range t.MatchExpressions {
		op, ok := nodeSelectorOps[expr.Operator]
		if !ok {
			return false
		}
		// The same validation the nodeaffinity helper applies.
		r, err := labels.NewRequirement(expr.Key, op, expr.Values)
		if err != nil {
			return false
		}
		ki := ix.keys[expr.Key]
		switch op {
		case selection.In:
			out.and(ix.union(ki, expr.Values, &q.arena))
		case selection.NotIn:
			out.andNot(ix.union(ki, expr.Values, &q.arena))
		case selection.Exists:
			if ki == nil {
				clear(out)
			} else {
				out.and(ki.nodes)
			}
		case selection.DoesNotExist:
			if ki != nil {
				out.andNot(ki.nodes)
			}
		case selection.GreaterThan, selection.LessThan:
			out.and(ix.compared(ki, r, &q.arena))
		}
	}
	for _, f := range t.MatchFields {
		if (f.Operator != v1.NodeSelectorOpIn && f.Operator != v1.NodeSelectorOpNotIn) || len(f.Values) != 1 {
			return false
		}
		match := q.arena.get()
		if f.Key == metav1.ObjectNameField {
			if e := ix.nodes[f.Values[0]]; e != nil && e.id >= 0 {
				match.set(e.id)
			}
		} else if f.Values[0] == "" {
			// A node has no other field: its value reads as "".
			match.copyFrom(ix.live)
		}
		if f.Operator == v1.NodeSelectorOpIn {
			out.and(match)
		} else {
			out.andNot(match)
		}
	}
	return true
}

var nodeSelectorOps = map[v1.NodeSelectorOperator]selection.Operator{
	v1.NodeSelectorOpIn:           selection.In,
	v1.NodeSelectorOpNotIn:        selection.NotIn,
	v1.NodeSelectorOpExists:       selection.Exists,
	v1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	v1.NodeSelectorOpGt:           selection.GreaterThan,
	v1.NodeSelectorOpLt:           selection.LessThan,
}

func (ix *Index) value(k, v string) *valueIndex {
	if ki := ix.keys[k]; ki != nil {
		return ki.values[v]
	}
	return nil
}

// union is the set of nodes whose value of ki is one of values.
func (ix *Index) union(ki *keyIndex, values []string, a *arena) bitset {
	u := a.get()
	if ki == nil {
		return u
	}
	for _, v := range values {
		if vi := ki.values[v]; vi != nil {
			u.or(vi.nodes)
		}
	}
	return u
}

// compared is the set of nodes whose value of ki satisfies a Gt or Lt
// requirement; the key's distinct values are few compared to its nodes.
func (ix *Index) compared(ki *keyIndex, r *labels.Requirement, a *arena) bitset {
	u := a.get()
	if ki == nil {
		return u
	}
	bound, err := strconv.ParseInt(r.ValuesUnsorted()[0], 10, 64)
	if err != nil {
		return u
	}
	for v, vi := range ki.values {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		if (r.Operator() == selection.GreaterThan && n > bound) || (r.Operator() == selection.LessThan && n < bound) {
			u.or(vi.nodes)
		}
	}
	return u
}
