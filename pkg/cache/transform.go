package cache

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/workload"
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
// (namespace, name, labels, node, phase, whether it is terminating) and
// the constraints it carries, interned. A Pod
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
// NodeClass) the distinct zones and zone IDs of its subnets, one subnet
// each: a NodePool's zones are all spreadguard reads of it.
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
	return nodeclassv1.NodeClassStatus{Subnets: s.Placements()}
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
// recorded on, what the leader's audit reads of a workload (pkg/health):
// the Deployment revision, and of the pod template what the webhook reads
// of a pod (template). One cache serves admission, the audit, and the
// forecast of a scale, which reads the workload scaled from here.

// ownerMeta is meta plus the controllerRef and the Deployment revision.
func ownerMeta(obj metav1.Object, m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := meta(m)
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if r, ok := m.Annotations[workload.RevisionAnnotation]; ok {
		out.Annotations = map[string]string{workload.RevisionAnnotation: r}
	}
	return out
}

// template keeps of a pod template what the pod webhook reads of a pod
// (engine.Mutate and engine.Validate: whether the pod is skipped, bound,
// gated or left to another scheduler, and what places it) and what the
// audit counts its pods by: labels, spreadguard's annotations,
// nodeName, schedulerName, schedulingGates, nodeSelector, affinity,
// tolerations and topology spread constraints. The forecast of a scale
// builds the pods the controller will create from it, so what it keeps is
// what makes them admitted or refused. The containers, volumes, other
// annotations and the rest, most of a template, go.
func template(t *v1.PodTemplateSpec) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: t.Labels, Annotations: podAnnotations(t.Annotations)},
		Spec: v1.PodSpec{
			NodeName:                  t.Spec.NodeName,
			SchedulerName:             t.Spec.SchedulerName,
			SchedulingGates:           t.Spec.SchedulingGates,
			NodeSelector:              t.Spec.NodeSelector,
			Affinity:                  t.Spec.Affinity,
			Tolerations:               t.Spec.Tolerations,
			TopologySpreadConstraints: t.Spec.TopologySpreadConstraints,
		},
	}
}

// podAnnotations keeps of a pod's annotations those the pod webhook reads:
// spreadguard.io's (spreadguard.io/skip, spreadguard.io/policy) and the
// mirror pod's. Templates carry others (checksums of their config,
// kubectl's restartedAt, scrape settings) that a cached template has no use
// for; most carry none of these, and keep no map.
func podAnnotations(annotations map[string]string) map[string]string {
	var out map[string]string
	for k, v := range annotations {
		if strings.HasPrefix(k, v1alpha1.GroupName+"/") || k == v1.MirrorPodAnnotationKey {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// StripReplicationController keeps the owner's fields and its template.
var StripReplicationController toolscache.TransformFunc = func(obj any) (any, error) {
	rc, ok := obj.(*v1.ReplicationController)
	if !ok {
		return obj, nil
	}
	out := &v1.ReplicationController{ObjectMeta: ownerMeta(rc, &rc.ObjectMeta), Spec: v1.ReplicationControllerSpec{Selector: rc.Spec.Selector}}
	if rc.Spec.Template != nil {
		t := template(rc.Spec.Template)
		out.Spec.Template = &t
	}
	return out, nil
}

// StripReplicaSet keeps the owner's fields and its template, except for a
// Deployment's ReplicaSet scaled to zero with no pod left: a Deployment's
// old revisions are most ReplicaSets of a cluster, none has pods, and none
// is scaled but by its Deployment. A ReplicaSet of its own keeps its
// template at zero, so that the forecast of a scale from zero has it.
var StripReplicaSet toolscache.TransformFunc = func(obj any) (any, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return obj, nil
	}
	out := &appsv1.ReplicaSet{ObjectMeta: ownerMeta(rs, &rs.ObjectMeta), Spec: appsv1.ReplicaSetSpec{Selector: rs.Spec.Selector}}
	idle := rs.Spec.Replicas != nil && *rs.Spec.Replicas == 0 && rs.Status.Replicas == 0
	if ref := metav1.GetControllerOfNoCopy(rs); !idle || ref == nil || ref.Kind != workload.Deployment.GVK.Kind {
		out.Spec.Template = template(&rs.Spec.Template)
	}
	return out, nil
}

// StripStatefulSet keeps the owner's fields, its template, and what names
// and labels the pod at its next ordinal (pkg/forecast.StatefulSetPod):
// the first ordinal and the update revision.
var StripStatefulSet toolscache.TransformFunc = func(obj any) (any, error) {
	ss, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	return &appsv1.StatefulSet{ObjectMeta: ownerMeta(ss, &ss.ObjectMeta),
		Spec:   appsv1.StatefulSetSpec{Selector: ss.Spec.Selector, Template: template(&ss.Spec.Template), Ordinals: ss.Spec.Ordinals},
		Status: appsv1.StatefulSetStatus{UpdateRevision: ss.Status.UpdateRevision}}, nil
}

// StripDeployment keeps what the forecast of a scale reads of a Deployment
// (pkg/forecast.OfRevision): its identity, selector, replicas and
// template. The pod-template-hash that names the ReplicaSet a scale grows
// is the hash of the whole template, which is not kept: the forecast reads
// it from that ReplicaSet's selector. Hashing the template here instead
// would cost 0.2 ms of CPU per Deployment event, status updates included,
// against 0.6 µs for the transform (BenchmarkDeploymentEvent); keeping the
// template whole, 21 KiB per Deployment against 2.7 KiB
// (BenchmarkDeploymentCache).
var StripDeployment toolscache.TransformFunc = func(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	return &appsv1.Deployment{ObjectMeta: meta(&d.ObjectMeta), Spec: appsv1.DeploymentSpec{
		Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: template(&d.Spec.Template),
	}}, nil
}

// StripNamespace keeps the labels, which namespaceSelectors match, and
// the deletion timestamp: the leader writes no Report into a namespace
// being deleted.
var StripNamespace toolscache.TransformFunc = func(obj any) (any, error) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return obj, nil
	}
	m := meta(&ns.ObjectMeta)
	m.Labels = ns.Labels
	m.DeletionTimestamp = ns.DeletionTimestamp
	return &v1.Namespace{ObjectMeta: m}, nil
}
