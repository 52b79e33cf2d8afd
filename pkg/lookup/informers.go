package lookup

import (
	"context"
	"fmt"
	"reflect"

	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/cache"
)

// InformerStores are the stores of the informers behind the webhook's
// cache, for the kinds a mutation reads on every request: the pod's
// controller, its namespace and the policies. Sources reads them in place of
// the cache's client.Reader once the caches have synced.
//
// The cache's reader, even with its deep copies turned off, copies each
// object it returns into the caller's by reflection, allocates a new one
// per Get and a list per List, and finds the informer by the object's type
// on every call. A store hands out the object the informer holds, so
// everything read through it is shared with the cache and with every other
// request: its readers must not modify it. Every engine.Sources caller
// only reads (policy resolution, DefaultSelector, the audit, the forecast,
// the pod handlers' event owners); what needs a changed object copies it
// first (policy.Applied's constraints, the audit's status patches, the
// forecast's ReplicaSet of a Deployment).
type InformerStores struct {
	byType map[reflect.Type]toolscache.Indexer
}

// inStores reports whether InformerStores holds kind k's store: every kind
// the webhook always watches. (Optional and Named kinds may have no
// informer, and asking for one would start it.)
func inStores(k cache.InformedKind) bool { return !k.Optional && !k.Named }

// indexed is what controller-runtime's informers are: client-go shared
// index informers, whose store (with its namespace index) they read.
type indexed interface {
	GetIndexer() toolscache.Indexer
}

// NewInformerStores returns the stores of c's informers, one per kind of
// cache.InformedKinds it always watches. The informers must be c's own (watched
// from the start, as cache.Options sets): asking for them never starts one.
func NewInformerStores(ctx context.Context, c crcache.Cache) (*InformerStores, error) {
	s := &InformerStores{byType: map[reflect.Type]toolscache.Indexer{}}
	for _, k := range cache.InformedKinds {
		if !inStores(k) {
			continue
		}
		obj := k.New()
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		ix, ok := inf.(indexed)
		if !ok {
			return nil, fmt.Errorf("the informer for %T is a %T, which has no store to read", obj, inf)
		}
		s.byType[reflect.TypeOf(obj)] = ix.GetIndexer()
	}
	return s, nil
}

// storeOf returns the store of the kind whose objects are PT, nil when
// there is none (no stores, or a kind they do not hold).
func storeOf[PT client.Object](s *InformerStores) toolscache.Indexer {
	if s == nil {
		return nil
	}
	return s.byType[reflect.TypeFor[PT]()]
}

// storeKey is the key client-go's stores file an object under.
func storeKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// fromStore returns the object store holds under namespace/name, nil
// when it holds none.
func fromStore[T any, PT interface {
	*T
	client.Object
}](store toolscache.Indexer, namespace, name string) (PT, error) {
	item, ok, err := store.GetByKey(storeKey(namespace, name))
	if err != nil || !ok {
		return nil, err
	}
	obj, isPT := item.(PT)
	if !isPT {
		return nil, fmt.Errorf("the cache holds a %T under %s, not a %T", item, storeKey(namespace, name), PT(nil))
	}
	return obj, nil
}

// listStore returns the objects store holds in namespace, or all of them
// for "".
func listStore[T any, PT interface {
	*T
	client.Object
}](store toolscache.Indexer, namespace string) ([]PT, error) {
	var items []any
	if namespace == "" {
		items = store.List()
	} else {
		var err error
		if items, err = store.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
			return nil, err
		}
	}
	out := make([]PT, 0, len(items))
	for _, item := range items {
		obj, ok := item.(PT)
		if !ok {
			return nil, fmt.Errorf("the cache holds a %T, not a %T", item, PT(nil))
		}
		out = append(out, obj)
	}
	return out, nil
}
