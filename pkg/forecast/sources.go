package forecast

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

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

func (s ownerSources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	if o, ok := s.owner.(*appsv1.ReplicaSet); ok && o.Namespace == namespace && o.Name == name {
		return o, nil
	}
	return s.Sources.ReplicaSet(namespace, name)
}

func (s ownerSources) StatefulSet(namespace, name string) (*appsv1.StatefulSet, error) {
	if o, ok := s.owner.(*appsv1.StatefulSet); ok && o.Namespace == namespace && o.Name == name {
		return o, nil
	}
	return s.Sources.StatefulSet(namespace, name)
}

func (s ownerSources) ReplicationController(namespace, name string) (*v1.ReplicationController, error) {
	if o, ok := s.owner.(*v1.ReplicationController); ok && o.Namespace == namespace && o.Name == name {
		return o, nil
	}
	return s.Sources.ReplicationController(namespace, name)
}

// ServicesSelecting keeps the Service index of the wrapped sources in use.
func (s ownerSources) ServicesSelecting(namespace string, podLabels map[string]string) ([]*v1.Service, error) {
	if c, ok := s.Sources.(spread.ServiceCandidates); ok {
		return c.ServicesSelecting(namespace, podLabels)
	}
	return s.Sources.Services(namespace)
}
