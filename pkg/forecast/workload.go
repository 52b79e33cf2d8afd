package forecast

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"

	"github.com/spreadguard/spreadguard/pkg/workload"
)

// Workload is a controller of pods as the forecast reads it: the pod its
// controller creates next, how many of its pods exist, how many it wants.
type Workload struct {
	// Ref names the workload; its Kind is one of workload.Kinds.
	workload.Ref
	// Replicas is spec.replicas: the forecast places replicas
	// Existing+1 to Replicas, or, below Existing, forecasts the
	// scale-down.
	Replicas int32
	// Existing is how many of the pods the forecast places exist already
	// (they are counted by the index): 0 for a new workload, and for a
	// Deployment whose pod template changed, since its new ReplicaSet
	// starts with no pods.
	Existing int32
	// Pod is the pod the controller creates: the template's labels,
	// annotations and spec, the namespace, and the controllerRef.
	Pod *v1.Pod
	// Pods are the workload's active pods (neither terminating nor
	// finished), scheduled or not, and Related those its controller counts
	// per node when it ranks them (a Deployment's, of every revision; nil:
	// Pods): which pods the scale-down of a ReplicaSet, ReplicationController
	// or Deployment deletes depends on their state. Without them only a
	// StatefulSet's scale-down is forecast, its pods going by ordinal.
	Pods, Related []*v1.Pod
	// Order ranks Pods for deletion: nil is the ReplicaSet controller's own
	// ranking (ControllerRanking) at the time of Run.
	Order Order
	// owner is what the pod's controllerRef names, for DefaultSelector:
	// for a Deployment, the ReplicaSet the deployment controller creates.
	owner any
	// ordinalStart is a StatefulSet's first ordinal.
	ordinalStart int32
}

// Of returns the workload of obj, an object of one of workload.Kinds as
// stored (defaults applied), whose pods that exist already number existing.
// A Deployment's pods are its new ReplicaSet's and a StatefulSet's are
// named by ordinal, as their controllers create them; any other kind's
// controller stamps its pods out of its template (workload.Kind.Pod), as
// the ReplicaSet controller does.
func Of(obj any, existing int32) (*Workload, error) {
	var w *Workload
	switch o := obj.(type) {
	case *appsv1.Deployment:
		w = deploymentWorkload(o, PodTemplateHash(&o.Spec.Template, o.Status.CollisionCount))
	case *appsv1.StatefulSet:
		w = statefulSetWorkload(o)
	case workload.Object:
		k, ok := workload.For(o)
		if !ok {
			return nil, fmt.Errorf("a %T is not a workload the forecast reads", obj)
		}
		pod := k.Pod(o)
		if pod == nil {
			return nil, fmt.Errorf("%s %s/%s has no pod template", k.GVK.Kind, o.GetNamespace(), o.GetName())
		}
		w = newWorkload(k, o, pod, o)
	default:
		return nil, fmt.Errorf("a %T is not a workload the forecast reads", obj)
	}
	// Existing may exceed Replicas (a scale down): nothing is placed.
	w.Existing = max(existing, 0)
	return w, nil
}

// newWorkload is the workload of obj, of kind k, whose controller creates
// pod; owner is what pod's controllerRef names.
func newWorkload(k workload.Kind, obj workload.Object, pod *v1.Pod, owner any) *Workload {
	return &Workload{Ref: workload.RefTo(k, obj), Replicas: k.Replicas(obj), Pod: pod, owner: owner}
}

// OfRevision is Of for Deployment d whose new ReplicaSet, the one its
// replicas are added to, has the pod-template-hash hash. A Deployment read
// from the webhook's cache keeps only the part of its pod template that a
// forecast reads (cache.StripDeployment), from which the hash of the whole
// template cannot be computed; the ReplicaSet, which carries it in its
// selector, says it.
func OfRevision(d *appsv1.Deployment, hash string, existing int32) *Workload {
	w := deploymentWorkload(d, hash)
	w.Existing = max(existing, 0)
	return w
}

// deploymentWorkload is the Deployment's new ReplicaSet, whose template
// hashes to hash, as the deployment controller builds it (getNewReplicaSet in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/deployment/sync.go):
// named <deployment>-<hash>, its template and selector labelled
// pod-template-hash.
func deploymentWorkload(d *appsv1.Deployment, hash string) *Workload {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: d.Namespace, Name: d.Name + "-" + hash,
			// A stand-in: the ReplicaSet has no uid before it exists.
			UID:             types.UID("forecast/" + string(d.UID) + "/" + hash),
			OwnerReferences: []metav1.OwnerReference{workload.Deployment.ControllerRef(d)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Template: *d.Spec.Template.DeepCopy()},
	}
	rs.Spec.Selector = d.Spec.Selector.DeepCopy()
	if rs.Spec.Selector == nil {
		rs.Spec.Selector = &metav1.LabelSelector{}
	}
	rs.Spec.Selector.MatchLabels = withLabel(rs.Spec.Selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	rs.Spec.Template.Labels = withLabel(rs.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	return newWorkload(workload.Deployment, d, ReplicaSetPod(rs), rs)
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

// PodTemplateHash is the pod-template-hash label the deployment controller
// gives the ReplicaSet of template, mirroring ComputeHash of
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go
// (with DeepHashObject of pkg/util/hash/hash.go): FNV-32a over the
// template printed by k8s.io/utils/dump.ForHash, then the collision
// count, then SafeEncodeString of the decimal sum.
func PodTemplateHash(template *v1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// statefulSetWorkload is the StatefulSet's pod at its next ordinal, with
// the labels the StatefulSet controller adds. The ordinal labels differ
// from pod to pod; a selector does not read them (DefaultSelector takes
// the StatefulSet's own), so one pod stands for all.
func statefulSetWorkload(s *appsv1.StatefulSet) *Workload {
	w := newWorkload(workload.StatefulSet, s, StatefulSetPod(s, nil), s)
	if s.Spec.Ordinals != nil {
		w.ordinalStart = s.Spec.Ordinals.Start
	}
	return w
}

// StatefulSetPod is the StatefulSet's pod at its lowest ordinal missing
// from pods, or at the next ordinal when all exist (a scale-up by one),
// with the labels the StatefulSet controller adds.
func StatefulSetPod(s *appsv1.StatefulSet, pods []*v1.Pod) *v1.Pod {
	start := int32(0)
	if s.Spec.Ordinals != nil {
		start = s.Spec.Ordinals.Start
	}
	existing := map[string]bool{}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == s.UID {
			existing[p.Name] = true
		}
	}
	ordinal := start
	for existing[fmt.Sprintf("%s-%d", s.Name, ordinal)] {
		ordinal++
	}
	pod := workload.StatefulSet.Pod(s)
	pod.Name = fmt.Sprintf("%s-%d", s.Name, ordinal)
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(int(ordinal))
	if s.Status.UpdateRevision != "" {
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] = s.Status.UpdateRevision
	}
	return pod
}

// ReplicaSetPod is the pod the ReplicaSet controller stamps out of rs.
func ReplicaSetPod(rs *appsv1.ReplicaSet) *v1.Pod { return workload.ReplicaSet.Pod(rs) }
