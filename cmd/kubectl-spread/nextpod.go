package main

// The pods a workload's controller creates next, built as the controllers
// build them (pkg/forecast, which the forecasts of plan and the workload
// webhook use too): explain reviews one of them.

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// nextDeploymentPod is the pod the Deployment's newest ReplicaSet creates
// next: the deployment controller scales up the ReplicaSet with the highest
// revision, and the ReplicaSet controller stamps out its template.
func nextDeploymentPod(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet) (*v1.Pod, error) {
	newest := newestReplicaSet(d, replicaSets)
	if newest == nil {
		return nil, fmt.Errorf("deployment %s/%s has no ReplicaSet yet; once the deployment controller creates one, explain it again, or check a pod offline with `kubectl spread check`", d.Namespace, d.Name)
	}
	return forecast.ReplicaSetPod(newest), nil
}

// newestReplicaSet is the ReplicaSet d controls with the highest revision
// (the newest of equal ones), the one the deployment controller scales
// up, or nil.
func newestReplicaSet(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	var newest *appsv1.ReplicaSet
	newestRev := int64(-1)
	for _, rs := range replicaSets {
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		rev := workload.Revision(rs)
		if rev > newestRev || (rev == newestRev && rs.CreationTimestamp.After(newest.CreationTimestamp.Time)) {
			newest, newestRev = rs, rev
		}
	}
	return newest
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
