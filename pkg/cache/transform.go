package cache

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
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

// StripNodeClass keeps of a node class (EC2NodeClass, EKS Auto Mode's
// NodeClass) the distinct zones of its subnets, one subnet each: a
// NodePool's zones are all spreadguard reads of it.
var StripNodeClass toolscache.TransformFunc = func(obj any) (any, error) {
	switch c := obj.(type) {
	case *nodeclassv1.EC2NodeClass:
		return &nodeclassv1.EC2NodeClass{ObjectMeta: meta(&c.ObjectMeta), Status: zonesOnly(&c.Status)}, nil
	case *nodeclassv1.NodeClass:
		return &nodeclassv1.NodeClass{ObjectMeta: meta(&c.ObjectMeta), Status: zonesOnly(&c.Status)}, nil
	}
	return obj, nil
}

func zonesOnly(s *nodeclassv1.NodeClassStatus) nodeclassv1.NodeClassStatus {
	zones := s.Zones()
	if zones == nil {
		return nodeclassv1.NodeClassStatus{}
	}
	out := nodeclassv1.NodeClassStatus{Subnets: make([]nodeclassv1.Subnet, len(zones))}
	for i, z := range zones {
		out.Subnets[i].Zone = z
	}
	return out
}

// StripService keeps the selector.
var StripService toolscache.TransformFunc = func(obj any) (any, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return obj, nil
	}
	return &v1.Service{ObjectMeta: meta(&s.ObjectMeta), Spec: v1.ServiceSpec{Selector: s.Spec.Selector}}, nil
}

// The owners' transforms keep what DefaultSelector reads (the selector),
// the controllerRef that names the Deployment a refused pod's event is also
// recorded on, and what the leader's audit reads of a workload (pkg/health):
// the Deployment revision, and of the pod template what places its pods
// (placement). One cache serves admission and the audit.

// RevisionAnnotation is the revision the Deployment controller writes on
// each of a Deployment's ReplicaSets; the highest is the one it scales up.
const RevisionAnnotation = "deployment.kubernetes.io/revision"

// ownerMeta is meta plus the controllerRef and the Deployment revision.
func ownerMeta(obj metav1.Object, m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := meta(m)
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if r, ok := m.Annotations[RevisionAnnotation]; ok {
		out.Annotations = map[string]string{RevisionAnnotation: r}
	}
	return out
}

// placement keeps of a pod template what places its pods and what the
// audit counts them by: labels, nodeSelector, affinity, tolerations and
// topology spread constraints.
func placement(t *v1.PodTemplateSpec) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: t.Labels},
		Spec: v1.PodSpec{
			NodeSelector:              t.Spec.NodeSelector,
			Affinity:                  t.Spec.Affinity,
			Tolerations:               t.Spec.Tolerations,
			TopologySpreadConstraints: t.Spec.TopologySpreadConstraints,
		},
	}
}

// StripReplicationController keeps the owner's fields and its template's
// placement.
var StripReplicationController toolscache.TransformFunc = func(obj any) (any, error) {
	rc, ok := obj.(*v1.ReplicationController)
	if !ok {
		return obj, nil
	}
	out := &v1.ReplicationController{ObjectMeta: ownerMeta(rc, &rc.ObjectMeta), Spec: v1.ReplicationControllerSpec{Selector: rc.Spec.Selector}}
	if rc.Spec.Template != nil {
		t := placement(rc.Spec.Template)
		out.Spec.Template = &t
	}
	return out, nil
}

// StripReplicaSet keeps the owner's fields and its template's placement,
// except for a ReplicaSet scaled to zero with no pod left: a Deployment's
// old revisions are most ReplicaSets of a cluster, and none has pods.
var StripReplicaSet toolscache.TransformFunc = func(obj any) (any, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return obj, nil
	}
	out := &appsv1.ReplicaSet{ObjectMeta: ownerMeta(rs, &rs.ObjectMeta), Spec: appsv1.ReplicaSetSpec{Selector: rs.Spec.Selector}}
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas > 0 || rs.Status.Replicas > 0 {
		out.Spec.Template = placement(&rs.Spec.Template)
	}
	return out, nil
}

// StripStatefulSet keeps the owner's fields and its template's placement.
var StripStatefulSet toolscache.TransformFunc = func(obj any) (any, error) {
	ss, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	return &appsv1.StatefulSet{ObjectMeta: ownerMeta(ss, &ss.ObjectMeta),
		Spec: appsv1.StatefulSetSpec{Selector: ss.Spec.Selector, Template: placement(&ss.Spec.Template)}}, nil
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
