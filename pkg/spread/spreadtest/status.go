package spreadtest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The options below set what the ReplicaSet controller ranks pods by when
// it deletes some: readiness, restarts and age.

// Created sets metadata.creationTimestamp.
func (p *PodWrapper) Created(t time.Time) *PodWrapper {
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

// Ready sets the Ready condition True since t, and the phase Running.
func (p *PodWrapper) Ready(since time.Time) *PodWrapper {
	return p.readiness(v1.ConditionTrue, since)
}

// NotReady sets the Ready condition False, and the phase Running.
func (p *PodWrapper) NotReady() *PodWrapper {
	return p.readiness(v1.ConditionFalse, time.Time{})
}

func (p *PodWrapper) readiness(status v1.ConditionStatus, since time.Time) *PodWrapper {
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{
		Type: v1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since),
	})
	return p
}

// Restarts gives the pod a container status named "app" that restarted n
// times.
func (p *PodWrapper) Restarts(n int32) *PodWrapper {
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: "app", RestartCount: n})
	return p
}
