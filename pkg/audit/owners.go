package audit

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// StripOwner is the transform of the audit's informers of ReplicaSets,
// StatefulSets and ReplicationControllers: it keeps what
// Workloads reads (identity, controller, revision, selector) and, of the
// pod template, what places pods and what Spreads reads (labels,
// nodeSelector, affinity, tolerations, topology spread
// constraints). A ReplicaSet scaled to zero with no pod left keeps no
// template: a Deployment's old revisions are most ReplicaSets of a cluster
// and none has pods to audit. Anything else passes unchanged.
var StripOwner toolscache.TransformFunc = func(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		out := &appsv1.ReplicaSet{ObjectMeta: ownerMeta(&o.ObjectMeta), Spec: appsv1.ReplicaSetSpec{Selector: o.Spec.Selector}}
		if o.Spec.Replicas == nil || *o.Spec.Replicas > 0 || o.Status.Replicas > 0 {
			out.Spec.Template = template(&o.Spec.Template)
		}
		return out, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: ownerMeta(&o.ObjectMeta),
			Spec: appsv1.StatefulSetSpec{Selector: o.Spec.Selector, Template: template(&o.Spec.Template)}}, nil
	case *v1.ReplicationController:
		out := &v1.ReplicationController{ObjectMeta: ownerMeta(&o.ObjectMeta), Spec: v1.ReplicationControllerSpec{Selector: o.Spec.Selector}}
		if o.Spec.Template != nil {
			t := template(o.Spec.Template)
			out.Spec.Template = &t
		}
		return out, nil
	}
	return obj, nil
}

func ownerMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, OwnerReferences: m.OwnerReferences,
	}
	if r, ok := m.Annotations[revisionAnnotation]; ok {
		out.Annotations = map[string]string{revisionAnnotation: r}
	}
	return out
}

func template(t *v1.PodTemplateSpec) v1.PodTemplateSpec {
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
