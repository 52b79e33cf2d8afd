package spreadtest

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServiceWrapper builds a *v1.Service. Start with MakeService.
type ServiceWrapper struct{ v1.Service }

// MakeService returns a builder for a Service in namespace "default" with
// no selector (a Service without a selector selects no pod).
func MakeService() *ServiceWrapper {
	return &ServiceWrapper{v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault}}}
}

// Obj returns a deep copy of the Service built so far.
func (s *ServiceWrapper) Obj() *v1.Service { return s.Service.DeepCopy() }

// Name sets metadata.name.
func (s *ServiceWrapper) Name(name string) *ServiceWrapper {
	s.Service.Name = name
	return s
}

// Namespace sets metadata.namespace.
func (s *ServiceWrapper) Namespace(ns string) *ServiceWrapper {
	s.Service.Namespace = ns
	return s
}

// Selector adds one spec.selector entry.
func (s *ServiceWrapper) Selector(k, v string) *ServiceWrapper {
	if s.Spec.Selector == nil {
		s.Spec.Selector = map[string]string{}
	}
	s.Spec.Selector[k] = v
	return s
}

// ReplicationControllerWrapper builds a *v1.ReplicationController. Start
// with MakeReplicationController.
type ReplicationControllerWrapper struct{ v1.ReplicationController }

// MakeReplicationController returns a builder for a ReplicationController in
// namespace "default" with no selector.
func MakeReplicationController() *ReplicationControllerWrapper {
	return &ReplicationControllerWrapper{v1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault}}}
}

// Obj returns a deep copy of the ReplicationController built so far.
func (r *ReplicationControllerWrapper) Obj() *v1.ReplicationController {
	return r.ReplicationController.DeepCopy()
}

// Name sets metadata.name and a UID derived from it.
func (r *ReplicationControllerWrapper) Name(name string) *ReplicationControllerWrapper {
	r.ReplicationController.Name = name
	r.UID = types.UID("ReplicationController/" + name)
	return r
}

// Namespace sets metadata.namespace.
func (r *ReplicationControllerWrapper) Namespace(ns string) *ReplicationControllerWrapper {
	r.ReplicationController.Namespace = ns
	return r
}

// Selector adds one spec.selector entry.
func (r *ReplicationControllerWrapper) Selector(k, v string) *ReplicationControllerWrapper {
	if r.Spec.Selector == nil {
		r.Spec.Selector = map[string]string{}
	}
	r.Spec.Selector[k] = v
	return r
}

// ReplicaSetWrapper builds an *appsv1.ReplicaSet. Start with MakeReplicaSet.
type ReplicaSetWrapper struct{ appsv1.ReplicaSet }

// MakeReplicaSet returns a builder for a ReplicaSet in namespace "default"
// with a nil selector.
func MakeReplicaSet() *ReplicaSetWrapper {
	return &ReplicaSetWrapper{appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault}}}
}

// Obj returns a deep copy of the ReplicaSet built so far.
func (r *ReplicaSetWrapper) Obj() *appsv1.ReplicaSet { return r.ReplicaSet.DeepCopy() }

// Name sets metadata.name and a UID derived from it.
func (r *ReplicaSetWrapper) Name(name string) *ReplicaSetWrapper {
	r.ReplicaSet.Name = name
	r.UID = types.UID("ReplicaSet/" + name)
	return r
}

// Namespace sets metadata.namespace.
func (r *ReplicaSetWrapper) Namespace(ns string) *ReplicaSetWrapper {
	r.ReplicaSet.Namespace = ns
	return r
}

// Selector replaces spec.selector (nil removes it).
func (r *ReplicaSetWrapper) Selector(sel *metav1.LabelSelector) *ReplicaSetWrapper {
	r.Spec.Selector = sel.DeepCopy()
	return r
}

// MatchLabel adds one matchLabels entry to spec.selector.
func (r *ReplicaSetWrapper) MatchLabel(k, v string) *ReplicaSetWrapper {
	r.Spec.Selector = addMatchLabel(r.Spec.Selector, k, v)
	return r
}

// MatchExpression adds one matchExpressions entry to spec.selector.
func (r *ReplicaSetWrapper) MatchExpression(key string, op metav1.LabelSelectorOperator, vals ...string) *ReplicaSetWrapper {
	r.Spec.Selector = addMatchExpression(r.Spec.Selector, key, op, vals)
	return r
}

// StatefulSetWrapper builds an *appsv1.StatefulSet. Start with
// MakeStatefulSet.
type StatefulSetWrapper struct{ appsv1.StatefulSet }

// MakeStatefulSet returns a builder for a StatefulSet in namespace "default"
// with a nil selector.
func MakeStatefulSet() *StatefulSetWrapper {
	return &StatefulSetWrapper{appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault}}}
}

// Obj returns a deep copy of the StatefulSet built so far.
func (s *StatefulSetWrapper) Obj() *appsv1.StatefulSet { return s.StatefulSet.DeepCopy() }

// Name sets metadata.name and a UID derived from it.
func (s *StatefulSetWrapper) Name(name string) *StatefulSetWrapper {
	s.StatefulSet.Name = name
	s.UID = types.UID("StatefulSet/" + name)
	return s
}

// Namespace sets metadata.namespace.
func (s *StatefulSetWrapper) Namespace(ns string) *StatefulSetWrapper {
	s.StatefulSet.Namespace = ns
	return s
}

// Selector replaces spec.selector (nil removes it).
func (s *StatefulSetWrapper) Selector(sel *metav1.LabelSelector) *StatefulSetWrapper {
	s.Spec.Selector = sel.DeepCopy()
	return s
}

// MatchLabel adds one matchLabels entry to spec.selector.
func (s *StatefulSetWrapper) MatchLabel(k, v string) *StatefulSetWrapper {
	s.Spec.Selector = addMatchLabel(s.Spec.Selector, k, v)
	return s
}

// MatchExpression adds one matchExpressions entry to spec.selector.
func (s *StatefulSetWrapper) MatchExpression(key string, op metav1.LabelSelectorOperator, vals ...string) *StatefulSetWrapper {
	s.Spec.Selector = addMatchExpression(s.Spec.Selector, key, op, vals)
	return s
}

func addMatchLabel(sel *metav1.LabelSelector, k, v string) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[k] = v
	return sel
}

func addMatchExpression(sel *metav1.LabelSelector, key string, op metav1.LabelSelectorOperator, vals []string) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: vals})
	return sel
}
