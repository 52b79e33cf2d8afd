package cache

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// meta keeps the identity of an object; resourceVersion stays so that
// informer updates can still be told apart.
func meta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace:       m.Namespace,
		Name:            m.Name,
		UID:             m.UID,
		ResourceVersion: m.ResourceVersion,
	}
}

// StripPod turns a pod into the Pod the cache keeps: what counting reads
// (namespace, name, labels, node, phase, whether it is terminating). A Pod
// passes unchanged, as anything else does (a tombstone): client-go may
// transform an object twice.
var StripPod toolscache.TransformFunc = func(obj any) (any, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	return CompactPod(p), nil
}

// StripNode keeps the labels (topology domains, node affinity), the taints
// and whether the node is cordoned.
var StripNode toolscache.TransformFunc = func(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	m := meta(&n.ObjectMeta)
	m.Labels = n.Labels
	return &v1.Node{
		ObjectMeta: m,
		Spec:       v1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
	}, nil
}

// StripService keeps the selector.
var StripService toolscache.TransformFunc = func(obj any) (any, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return obj, nil
	}
	return &v1.Service{ObjectMeta: meta(&s.ObjectMeta), Spec: v1.ServiceSpec{Selector: s.Spec.Selector}}, nil
}

// StripReplicationController keeps the selector.
var StripReplicationController toolscache.TransformFunc = func(obj any) (any, error) {
	rc, ok := obj.(*v1.ReplicationController)
	if !ok {
		return obj, nil
	}
	return &v1.ReplicationController{
		ObjectMeta: meta(&rc.ObjectMeta),
		Spec:       v1.ReplicationControllerSpec{Selector: rc.Spec.Selector},
	}, nil
}

// StripReplicaSet keeps the selector, and the controllerRef that names
// the Deployment a refused pod's event is also recorded on.
var StripReplicaSet toolscache.TransformFunc = func(obj any) (any, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return obj, nil
	}
	m := meta(&rs.ObjectMeta)
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		m.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return &appsv1.ReplicaSet{
		ObjectMeta: m,
		Spec:       appsv1.ReplicaSetSpec{Selector: rs.Spec.Selector},
	}, nil
}

// StripStatefulSet keeps the selector.
var StripStatefulSet toolscache.TransformFunc = func(obj any) (any, error) {
	ss, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	return &appsv1.StatefulSet{
		ObjectMeta: meta(&ss.ObjectMeta),
		Spec:       appsv1.StatefulSetSpec{Selector: ss.Spec.Selector},
	}, nil
}

// StripNamespace keeps the labels, which namespaceSelectors match.
var StripNamespace toolscache.TransformFunc = func(obj any) (any, error) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return obj, nil
	}
	m := meta(&ns.ObjectMeta)
	m.Labels = ns.Labels
	return &v1.Namespace{ObjectMeta: m}, nil
}
