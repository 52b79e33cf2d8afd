package spreadtest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ObjectMetaOptions are the metadata options every builder shares, here and
// in policytest. A wrapper embeds them, bound by BindObjectMeta to its own
// object's metadata, so that each option returns the wrapper W and calls
// chain: MakePod().Name("p").Label("app", "a").Node("n1").
type ObjectMetaOptions[W any] struct {
	self W
	meta *metav1.ObjectMeta
	// uidKind, when set, makes Name also set the UID "<kind>/<name>", the
	// one PodWrapper.ControlledBy and OwnerRef point at.
	uidKind string
}

// BindObjectMeta returns the metadata options of wrapper self, which write
// into meta.
func BindObjectMeta[W any](self W, meta *metav1.ObjectMeta) ObjectMetaOptions[W] {
	return ObjectMetaOptions[W]{self: self, meta: meta}
}

// bindOwnerMeta is BindObjectMeta for an owner of kind: its Name also sets
// the UID an owner reference built by PodWrapper carries. An empty kind
// sets no UID.
func bindOwnerMeta[W any](self W, meta *metav1.ObjectMeta, kind string) ObjectMetaOptions[W] {
	return ObjectMetaOptions[W]{self: self, meta: meta, uidKind: kind}
}

// Name sets metadata.name (and, for a controller owner, its UID).
func (o ObjectMetaOptions[W]) Name(name string) W {
	o.meta.Name = name
	if o.uidKind != "" {
		o.meta.UID = types.UID(o.uidKind + "/" + name)
	}
	return o.self
}

// Namespace sets metadata.namespace.
func (o ObjectMetaOptions[W]) Namespace(ns string) W {
	o.meta.Namespace = ns
	return o.self
}

// UID sets metadata.uid.
func (o ObjectMetaOptions[W]) UID(uid string) W {
	o.meta.UID = types.UID(uid)
	return o.self
}

// Generation sets metadata.generation.
func (o ObjectMetaOptions[W]) Generation(g int64) W {
	o.meta.Generation = g
	return o.self
}

// Label adds one label.
func (o ObjectMetaOptions[W]) Label(k, v string) W {
	setEntry(&o.meta.Labels, k, v)
	return o.self
}

// RemoveLabel deletes a label, e.g. the hostname label a node's Name sets.
func (o ObjectMetaOptions[W]) RemoveLabel(k string) W {
	delete(o.meta.Labels, k)
	return o.self
}

// Annotation adds one annotation.
func (o ObjectMetaOptions[W]) Annotation(k, v string) W {
	setEntry(&o.meta.Annotations, k, v)
	return o.self
}

// LabelSelectorOptions are the options of a builder that holds one label
// selector (a ReplicaSet's or StatefulSet's spec.selector, a constraint's
// labelSelector), bound by bindLabelSelector to that field.
type LabelSelectorOptions[W any] struct {
	self W
	sel  **metav1.LabelSelector
}

// bindLabelSelector returns the selector options of wrapper self, which
// write into *sel.
func bindLabelSelector[W any](self W, sel **metav1.LabelSelector) LabelSelectorOptions[W] {
	return LabelSelectorOptions[W]{self: self, sel: sel}
}

// Selector replaces the selector with a copy of sel (nil removes it).
func (o LabelSelectorOptions[W]) Selector(sel *metav1.LabelSelector) W {
	*o.sel = sel.DeepCopy()
	return o.self
}

// MatchLabel adds one matchLabels entry to the selector.
func (o LabelSelectorOptions[W]) MatchLabel(k, v string) W {
	*o.sel = WithMatchLabel(*o.sel, k, v)
	return o.self
}

// MatchExpression adds one matchExpressions entry to the selector.
func (o LabelSelectorOptions[W]) MatchExpression(key string, op metav1.LabelSelectorOperator, vals ...string) W {
	*o.sel = WithMatchExpression(*o.sel, key, op, vals...)
	return o.self
}

// WithMatchLabel adds k=v to sel's matchLabels and returns sel, allocated
// when nil. Builders of other packages (policytest's pod and namespace
// selectors) use it for selectors whose options have other names.
func WithMatchLabel(sel *metav1.LabelSelector, k, v string) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	setEntry(&sel.MatchLabels, k, v)
	return sel
}

// WithMatchExpression adds one requirement to sel's matchExpressions and
// returns sel, allocated when nil.
func WithMatchExpression(sel *metav1.LabelSelector, key string, op metav1.LabelSelectorOperator, vals ...string) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: vals})
	return sel
}

// setEntry sets (*m)[k] = v, allocating the map the API leaves nil.
func setEntry(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}
