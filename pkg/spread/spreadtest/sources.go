package spreadtest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lookup names one method of spread.SelectorSources, for FakeSelectorSources.Fail.
type Lookup string

// The lookups of spread.SelectorSources.
const (
	LookupServices              Lookup = "Services"
	LookupReplicationController Lookup = "ReplicationController"
	LookupReplicaSet            Lookup = "ReplicaSet"
	LookupStatefulSet           Lookup = "StatefulSet"
)

// FakeSelectorSources implements spread.SelectorSources over plain slices. A Get of
// an object that is not there returns (nil, nil), as the interface asks.
// The zero value holds nothing and never fails.
type FakeSelectorSources struct {
	objects []any
	errors  map[Lookup]error
	calls   map[Lookup]int
}

// SelectorSources returns a FakeSelectorSources holding objs, which must be *v1.Service,
// *v1.ReplicationController, *appsv1.ReplicaSet or *appsv1.StatefulSet.
// It panics on any other type, which is a mistake in the test itself.
func SelectorSources(objs ...any) *FakeSelectorSources {
	return (&FakeSelectorSources{}).Add(objs...)
}

// Add adds objs, with the same rules as SelectorSources.
func (f *FakeSelectorSources) Add(objs ...any) *FakeSelectorSources {
	for _, o := range objs {
		switch o.(type) {
		case *v1.Service, *v1.ReplicationController, *appsv1.ReplicaSet, *appsv1.StatefulSet:
			f.objects = append(f.objects, o)
		default:
			panic(fmt.Sprintf("spreadtest.SelectorSources: unsupported object %T", o))
		}
	}
	return f
}

// CallCount is the number of times lookup was made.
func (f *FakeSelectorSources) CallCount(lookup Lookup) int { return f.calls[lookup] }

// Fail makes lookup return err from now on.
func (f *FakeSelectorSources) Fail(lookup Lookup, err error) *FakeSelectorSources {
	if f.errors == nil {
		f.errors = map[Lookup]error{}
	}
	f.errors[lookup] = err
	return f
}

func (f *FakeSelectorSources) call(l Lookup) error {
	if f.calls == nil {
		f.calls = map[Lookup]int{}
	}
	f.calls[l]++
	return f.errors[l]
}

// Services returns the Services of namespace.
func (f *FakeSelectorSources) Services(namespace string) ([]*v1.Service, error) {
	if err := f.call(LookupServices); err != nil {
		return nil, err
	}
	var out []*v1.Service
	for _, o := range f.objects {
		if s, ok := o.(*v1.Service); ok && s.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out, nil
}

// ReplicationController returns namespace/name, or nil if there is none.
func (f *FakeSelectorSources) ReplicationController(namespace, name string) (*v1.ReplicationController, error) {
	return get[*v1.ReplicationController](f, LookupReplicationController, namespace, name)
}

// ReplicaSet returns namespace/name, or nil if there is none.
func (f *FakeSelectorSources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return get[*appsv1.ReplicaSet](f, LookupReplicaSet, namespace, name)
}

// StatefulSet returns namespace/name, or nil if there is none.
func (f *FakeSelectorSources) StatefulSet(namespace, name string) (*appsv1.StatefulSet, error) {
	return get[*appsv1.StatefulSet](f, LookupStatefulSet, namespace, name)
}

// get makes lookup and returns the T called namespace/name, or nil.
func get[T metav1.Object](f *FakeSelectorSources, lookup Lookup, namespace, name string) (T, error) {
	var none T
	if err := f.call(lookup); err != nil {
		return none, err
	}
	for _, o := range f.objects {
		if t, ok := o.(T); ok && t.GetNamespace() == namespace && t.GetName() == name {
			return t, nil
		}
	}
	return none, nil
}
