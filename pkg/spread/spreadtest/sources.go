package spreadtest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// Lookup names one method of spread.SelectorSources, for FakeSources.Fail.
type Lookup string

// The lookups of spread.SelectorSources.
const (
	LookupServices              Lookup = "Services"
	LookupReplicationController Lookup = "ReplicationController"
	LookupReplicaSet            Lookup = "ReplicaSet"
	LookupStatefulSet           Lookup = "StatefulSet"
)

// FakeSources implements spread.SelectorSources over plain slices. A Get of
// an object that is not there returns (nil, nil), as the interface asks.
// The zero value holds nothing and never fails.
type FakeSources struct {
	services               []*v1.Service
	replicationControllers []*v1.ReplicationController
	replicaSets            []*appsv1.ReplicaSet
	statefulSets           []*appsv1.StatefulSet
	errors                 map[Lookup]error
	calls                  map[Lookup]int
}

// Sources returns a FakeSources holding objs, which must be *v1.Service,
// *v1.ReplicationController, *appsv1.ReplicaSet or *appsv1.StatefulSet.
// It panics on any other type, which is a mistake in the test itself.
func Sources(objs ...any) *FakeSources {
	return (&FakeSources{}).Add(objs...)
}

// Add adds objs, with the same rules as Sources.
func (f *FakeSources) Add(objs ...any) *FakeSources {
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			f.services = append(f.services, o)
		case *v1.ReplicationController:
			f.replicationControllers = append(f.replicationControllers, o)
		case *appsv1.ReplicaSet:
			f.replicaSets = append(f.replicaSets, o)
		case *appsv1.StatefulSet:
			f.statefulSets = append(f.statefulSets, o)
		default:
			panic(fmt.Sprintf("spreadtest.Sources: unsupported object %T", o))
		}
	}
	return f
}

// CallCount is the number of times lookup was made.
func (f *FakeSources) CallCount(lookup Lookup) int { return f.calls[lookup] }

// Fail makes lookup return err from now on.
func (f *FakeSources) Fail(lookup Lookup, err error) *FakeSources {
	if f.errors == nil {
		f.errors = map[Lookup]error{}
	}
	f.errors[lookup] = err
	return f
}

func (f *FakeSources) call(l Lookup) error {
	if f.calls == nil {
		f.calls = map[Lookup]int{}
	}
	f.calls[l]++
	return f.errors[l]
}

// Services returns the Services of namespace.
func (f *FakeSources) Services(namespace string) ([]*v1.Service, error) {
	if err := f.call(LookupServices); err != nil {
		return nil, err
	}
	var out []*v1.Service
	for _, s := range f.services {
		if s.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out, nil
}

// ReplicationController returns namespace/name, or nil if there is none.
func (f *FakeSources) ReplicationController(namespace, name string) (*v1.ReplicationController, error) {
	if err := f.call(LookupReplicationController); err != nil {
		return nil, err
	}
	for _, o := range f.replicationControllers {
		if o.Namespace == namespace && o.Name == name {
			return o, nil
		}
	}
	return nil, nil
}

// ReplicaSet returns namespace/name, or nil if there is none.
func (f *FakeSources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	if err := f.call(LookupReplicaSet); err != nil {
		return nil, err
	}
	for _, o := range f.replicaSets {
		if o.Namespace == namespace && o.Name == name {
			return o, nil
		}
	}
	return nil, nil
}

// StatefulSet returns namespace/name, or nil if there is none.
func (f *FakeSources) StatefulSet(namespace, name string) (*appsv1.StatefulSet, error) {
	if err := f.call(LookupStatefulSet); err != nil {
		return nil, err
	}
	for _, o := range f.statefulSets {
		if o.Namespace == namespace && o.Name == name {
			return o, nil
		}
	}
	return nil, nil
}
