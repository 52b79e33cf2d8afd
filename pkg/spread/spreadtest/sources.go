package spreadtest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	objects []any
	errors  map[Lookup]error
	calls   map[Lookup]int
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
		switch o.(type) {
		case *v1.Service, *v1.ReplicationController, *appsv1.ReplicaSet, *appsv1.StatefulSet:
			f.objects = append(f.objects, o)
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
	for _, o := range f.objects {
		if s, ok := o.(*v1.Service); ok && s.Namespace == namespace {
			out = append(out, s)
		}
	}
	return out, nil
}

// ReplicationController returns namespace/name, or nil if there is none.
func (f *FakeSources) ReplicationController(namespace, name string) (*v1.ReplicationController, error) {
	return get[*v1.ReplicationController](f, LookupReplicationController, namespace, name)
}

// ReplicaSet returns namespace/name, or nil if there is none.
func (f *FakeSources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return get[*appsv1.ReplicaSet](f, LookupReplicaSet, namespace, name)
}

// StatefulSet returns namespace/name, or nil if there is none.
func (f *FakeSources) StatefulSet(namespace, name string) (*appsv1.StatefulSet, error) {
	return get[*appsv1.StatefulSet](f, LookupStatefulSet, namespace, name)
}

// get makes lookup and returns the T called namespace/name, or nil.
func get[T metav1.Object](f *FakeSources, lookup Lookup, namespace, name string) (T, error) {
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
