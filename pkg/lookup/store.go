package lookup

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

var _ client.Reader = (*Store)(nil)

// Store is an in-memory client.Reader over a fixed set of objects of the
// kinds spreadguard reads (cache.InformedKinds): what `kubectl-spread check` decodes
// from a cluster file, what `explain` lists from a live cluster, a test's
// fixtures. Behind Sources it answers the engine's lookups with the same
// code that answers them from the webhook's informer cache.
//
// Reads copy, as a cached client's do; Snapshot hands out the stored nodes
// and pods themselves, which callers must not modify.
type Store struct {
	// byKind holds the objects of each kind in the order they were added.
	byKind map[schema.GroupVersionKind][]client.Object
	// objects holds everything, in the order added.
	objects []runtime.Object
	// seen holds "Kind namespace/name" (or "Kind name") of every object, to
	// refuse duplicates: two objects under one key cannot both exist in a
	// cluster, and silently keeping one would answer with the wrong one.
	seen map[string]bool
}

// NewStore returns a Store holding objects, which must each be a pointer
// to the Go type of one of cache.InformedKinds. Namespaced objects without a
// namespace are put in "default", as kubectl does.
func NewStore(objects ...runtime.Object) (*Store, error) {
	s := newStore()
	for i, obj := range objects {
		if err := s.add(obj); err != nil {
			return nil, fmt.Errorf("object %d: %w", i+1, err)
		}
	}
	return s, nil
}

func newStore() *Store {
	return &Store{byKind: map[schema.GroupVersionKind][]client.Object{}, seen: map[string]bool{}}
}

// add stores obj after checking its name and that no object of its kind
// and name is stored yet.
func (s *Store) add(obj runtime.Object) error {
	kind, ok := cache.KindOf(obj)
	if !ok {
		return fmt.Errorf("unsupported object type %T (want one of %s)", obj, wantKinds)
	}
	o := obj.(client.Object)
	name := kind.GVK.Kind
	if o.GetName() == "" {
		return fmt.Errorf("%s has no metadata.name", name)
	}
	key := name + " " + o.GetName()
	if kind.Namespaced {
		if o.GetNamespace() == "" {
			o.SetNamespace(metav1.NamespaceDefault)
		}
		key = name + " " + o.GetNamespace() + "/" + o.GetName()
	} else if o.GetNamespace() != "" {
		return fmt.Errorf("%s %s is cluster-scoped but sets metadata.namespace %q", name, o.GetName(), o.GetNamespace())
	}
	if s.seen[key] {
		return fmt.Errorf("duplicate %s", key)
	}
	s.seen[key] = true
	if ns, ok := o.(*v1.Namespace); ok {
		// The apiserver gives every namespace this label, and policies'
		// namespaceSelectors rely on it; a hand-written file rarely spells
		// it out.
		if ns.Labels[v1.LabelMetadataName] == "" {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[v1.LabelMetadataName] = ns.Name
		}
	}
	s.objects = append(s.objects, obj)
	s.byKind[kind.GVK] = append(s.byKind[kind.GVK], o)
	return nil
}

// Get copies the object of key into obj, or returns a NotFound error.
func (s *Store) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind, ok := cache.KindOf(obj)
	if !ok {
		return fmt.Errorf("reading %T: not a kind spreadguard reads", obj)
	}
	for _, o := range s.byKind[kind.GVK] {
		if o.GetName() == key.Name && o.GetNamespace() == key.Namespace {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(kind.GroupResource(), key.Name)
}

// List copies the objects of list's kind into list, in the order they were
// added, keeping those that pass the namespace and label selector options.
func (s *Store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	kind, ok := cache.KindOf(list)
	if !ok {
		return fmt.Errorf("listing %T: not a kind spreadguard reads", list)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		return fmt.Errorf("listing %T: field selectors are not supported", list)
	}
	var items []runtime.Object
	for _, obj := range s.byKind[kind.GVK] {
		if o.Namespace != "" && obj.GetNamespace() != o.Namespace {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		items = append(items, obj.DeepCopyObject())
	}
	return meta.SetList(list, items)
}

// Snapshot returns the nodes and pods, in the order they were added, for
// spread.IndexFromSnapshot or spread.Snapshot.Check.
func (s *Store) Snapshot() spread.Snapshot {
	var snap spread.Snapshot
	for _, k := range s.objects {
		switch o := k.(type) {
		case *v1.Node:
			snap.Nodes = append(snap.Nodes, o)
		case *v1.Pod:
			snap.Pods = append(snap.Pods, o)
		}
	}
	return snap
}

// Len is the number of objects in the Store.
func (s *Store) Len() int { return len(s.objects) }

// Objects returns every object in the order they were added, e.g. to seed
// a fake clientset with the same cluster a test checks offline.
func (s *Store) Objects() []runtime.Object { return slices.Clone(s.objects) }
