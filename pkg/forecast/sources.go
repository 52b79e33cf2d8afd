package forecast

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// ownerSources answers the lookup of the workload's pods' controller with
// the workload itself (or, for a Deployment, the ReplicaSet it would
// create), which the cache may not hold yet, or not at all: a forecast runs
// before the object is stored.
type ownerSources struct {
	engine.Sources
	owner any
}

func withOwner(src engine.Sources, owner any) engine.Sources {
	return ownerSources{Sources: src, owner: owner}
}

// The lookups of DefaultSelector's owners (spread.SelectorSources), one a
// kind, each answered by the workload when it is the one asked for.

func (s ownerSources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return ownerOr(s.owner, namespace, name, s.Sources.ReplicaSet)
}

func (s ownerSources) StatefulSet(namespace, name string) (*appsv1.StatefulSet, error) {
	return ownerOr(s.owner, namespace, name, s.Sources.StatefulSet)
}

func (s ownerSources) ReplicationController(namespace, name string) (*v1.ReplicationController, error) {
	return ownerOr(s.owner, namespace, name, s.Sources.ReplicationController)
}

// ownerOr is owner when it is the T called namespace/name, or what read
// finds.
func ownerOr[T metav1.Object](owner any, namespace, name string, read func(namespace, name string) (T, error)) (T, error) {
	if o, ok := owner.(T); ok && o.GetNamespace() == namespace && o.GetName() == name {
		return o, nil
	}
	return read(namespace, name)
}

// ServicesSelecting keeps the Service index of the wrapped sources in use.
func (s ownerSources) ServicesSelecting(namespace string, podLabels map[string]string) ([]*v1.Service, error) {
	if c, ok := s.Sources.(spread.ServiceCandidates); ok {
		return c.ServicesSelecting(namespace, podLabels)
	}
	return s.Sources.Services(namespace)
}
