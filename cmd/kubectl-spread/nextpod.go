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

// nextDeploymentPod is the pod the Deployment's current ReplicaSet
// (workload.CurrentReplicaSet) creates next: the deployment controller
// scales it up, and the ReplicaSet controller stamps out its template.
func nextDeploymentPod(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet) (*v1.Pod, error) {
	current := workload.CurrentReplicaSet(d, replicaSets)
	if current == nil {
		return nil, fmt.Errorf("deployment %s/%s has no ReplicaSet of its pod template yet; once the deployment controller creates one, explain it again, or check a pod offline with `kubectl spread check`", d.Namespace, d.Name)
	}
	return forecast.ReplicaSetPod(current), nil
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
