package main

// The pods a workload's controller creates next, built as the controllers
// build them: explain reviews one of them.

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// revisionAnnotation is the deployment controller's revision number on
// each ReplicaSet; the highest is the one it creates new pods from.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// nextDeploymentPod is the pod the Deployment's newest ReplicaSet creates
// next: the deployment controller scales up the ReplicaSet with the highest
// revision, and the ReplicaSet controller stamps out its template.
func nextDeploymentPod(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet) (*v1.Pod, error) {
	var newest *appsv1.ReplicaSet
	newestRev := int64(-1)
	for _, rs := range replicaSets {
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		rev, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
		if rev > newestRev || (rev == newestRev && rs.CreationTimestamp.After(newest.CreationTimestamp.Time)) {
			newest, newestRev = rs, rev
		}
	}
	if newest == nil {
		return nil, fmt.Errorf("deployment %s/%s has no ReplicaSet yet; once the deployment controller creates one, explain it again, or check a pod offline with `kubectl spread check`", d.Namespace, d.Name)
	}
	pod := podFromTemplate(&newest.Spec.Template, newest.Namespace,
		*metav1.NewControllerRef(newest, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")))
	// As the ReplicaSet controller names its pods.
	pod.GenerateName = newest.Name + "-"
	return pod, nil
}

// nextStatefulSetPod is the StatefulSet's pod at its lowest missing
// ordinal, or at the next ordinal when all exist (a scale-up by one), with
// the labels the StatefulSet controller adds.
func nextStatefulSetPod(s *appsv1.StatefulSet, pods []*v1.Pod) *v1.Pod {
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
	pod := podFromTemplate(&s.Spec.Template, s.Namespace,
		*metav1.NewControllerRef(s, appsv1.SchemeGroupVersion.WithKind("StatefulSet")))
	pod.Name = fmt.Sprintf("%s-%d", s.Name, ordinal)
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(int(ordinal))
	if s.Status.UpdateRevision != "" {
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] = s.Status.UpdateRevision
	}
	return pod
}

func podFromTemplate(t *v1.PodTemplateSpec, namespace string, owner metav1.OwnerReference) *v1.Pod {
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       namespace,
			Labels:          map[string]string{},
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		pod.Labels[k] = v
	}
	return pod
}

// unbound is p as it was when created: not yet on a node, no status.
func unbound(p *v1.Pod) *v1.Pod {
	pod := p.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Spec.NodeName = ""
	pod.Status = v1.PodStatus{}
	pod.ResourceVersion, pod.UID, pod.ManagedFields = "", "", nil
	pod.CreationTimestamp = metav1.Time{}
	return pod
}
