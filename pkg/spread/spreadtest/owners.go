package spreadtest

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The builders of the objects whose selectors DefaultSelector reads are two
// generic wrappers, one for a selector that is a plain map (Service,
// ReplicationController) and one for a metav1.LabelSelector (ReplicaSet,
// StatefulSet): the kinds of one family differ only in their type. The
// owners' Name also sets the UID "<kind>/<name>" that
// PodWrapper.ControlledBy puts in its owner reference.

// ServiceWrapper builds a *v1.Service. Start with MakeService.
type ServiceWrapper = MapSelectorWrapper[v1.Service]

// MakeService returns a builder for a Service in namespace "default" with
// no selector (a Service without a selector selects no pod).
func MakeService() *ServiceWrapper {
	s := &v1.Service{ObjectMeta: inDefault()}
	// A Service owns no pod: its Name sets no UID.
	return newMapSelector(s, "", &s.ObjectMeta, &s.Spec.Selector)
}

// ReplicationControllerWrapper builds a *v1.ReplicationController. Start
// with MakeReplicationController.
type ReplicationControllerWrapper = MapSelectorWrapper[v1.ReplicationController]

// MakeReplicationController returns a builder for a ReplicationController in
// namespace "default" with no selector.
func MakeReplicationController() *ReplicationControllerWrapper {
	rc := &v1.ReplicationController{ObjectMeta: inDefault()}
	return newMapSelector(rc, "ReplicationController", &rc.ObjectMeta, &rc.Spec.Selector)
}

// deepCopier is what every API object of type T has.
type deepCopier[T any] interface{ DeepCopy() *T }

// MapSelectorWrapper builds a T whose selector is a map of labels, every
// one of which a pod must carry.
type MapSelectorWrapper[T any] struct {
	ObjectMetaOptions[*MapSelectorWrapper[T]]
	obj deepCopier[T]
	sel *map[string]string
}

func newMapSelector[T any](obj deepCopier[T], kind string, meta *metav1.ObjectMeta, sel *map[string]string) *MapSelectorWrapper[T] {
	w := &MapSelectorWrapper[T]{obj: obj, sel: sel}
	w.ObjectMetaOptions = bindOwnerMeta(w, meta, kind)
	return w
}

// Obj returns a deep copy of the object built so far.
func (w *MapSelectorWrapper[T]) Obj() *T { return w.obj.DeepCopy() }

// Selector adds one entry to the selector.
func (w *MapSelectorWrapper[T]) Selector(k, v string) *MapSelectorWrapper[T] {
	setEntry(w.sel, k, v)
	return w
}

// ReplicaSetWrapper builds an *appsv1.ReplicaSet. Start with MakeReplicaSet.
type ReplicaSetWrapper = LabelSelectorWrapper[appsv1.ReplicaSet]

// MakeReplicaSet returns a builder for a ReplicaSet in namespace "default"
// with a nil selector.
func MakeReplicaSet() *ReplicaSetWrapper {
	rs := &appsv1.ReplicaSet{ObjectMeta: inDefault()}
	return newLabelSelector(rs, "ReplicaSet", &rs.ObjectMeta, &rs.Spec.Selector)
}

// StatefulSetWrapper builds an *appsv1.StatefulSet. Start with
// MakeStatefulSet.
type StatefulSetWrapper = LabelSelectorWrapper[appsv1.StatefulSet]

// MakeStatefulSet returns a builder for a StatefulSet in namespace "default"
// with a nil selector.
func MakeStatefulSet() *StatefulSetWrapper {
	ss := &appsv1.StatefulSet{ObjectMeta: inDefault()}
	return newLabelSelector(ss, "StatefulSet", &ss.ObjectMeta, &ss.Spec.Selector)
}

// LabelSelectorWrapper builds a controller owner of type T whose
// spec.selector is a metav1.LabelSelector, written by Selector, MatchLabel
// and MatchExpression.
type LabelSelectorWrapper[T any] struct {
	ObjectMetaOptions[*LabelSelectorWrapper[T]]
	LabelSelectorOptions[*LabelSelectorWrapper[T]]
	obj deepCopier[T]
}

func newLabelSelector[T any](obj deepCopier[T], kind string, meta *metav1.ObjectMeta, sel **metav1.LabelSelector) *LabelSelectorWrapper[T] {
	w := &LabelSelectorWrapper[T]{obj: obj}
	w.ObjectMetaOptions = bindOwnerMeta(w, meta, kind)
	w.LabelSelectorOptions = bindLabelSelector(w, sel)
	return w
}

// Obj returns a deep copy of the object built so far.
func (w *LabelSelectorWrapper[T]) Obj() *T { return w.obj.DeepCopy() }

// inDefault is the metadata every namespaced builder starts from.
func inDefault() metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: metav1.NamespaceDefault} }
