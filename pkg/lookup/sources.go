package lookup

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

var (
	_ engine.Sources  = (*Sources)(nil)
	_ policy.Verdicts = (*Sources)(nil)
)

// Sources is the one implementation of engine.Sources: it answers the
// engine's lookups (owners, Services, namespaces, policies) from a
// client.Reader. The webhook puts its informer cache behind it, with the
// API server as the fallback; kubectl-spread puts a Store behind it, filled
// from a file or from a live cluster's listing. So a decision made offline
// reads the cluster through the webhook's own code.
//
// With a fallback, a Get that misses is read again from the fallback (the
// object may be younger than the cache), and every read goes to the
// fallback until synced reports true. The webhook's fallback is the reader
// that bypasses every cache (manager.GetAPIReader()).
//
// What Sources returns is shared: the informer cache hands out its own
// objects (cache.Options turns its deep copies off, InformerStores reads
// its stores), so callers must not modify what they read.
type Sources struct {
	// ctx is the request's (WithContext); the readers and indexes, the
	// same for every request, are shared behind a pointer, so that binding
	// a request's context copies two words, not the whole set.
	ctx context.Context
	*readers
}

// readers is where Sources reads from; the With* methods other than
// WithContext return Sources over a changed copy.
type readers struct {
	reader   client.Reader
	live     client.Reader
	synced   func() bool
	services spread.ServiceCandidates
	stores   *InformerStores
	verdicts policy.Verdicts
}

// with returns Sources over a copy of s's readers changed by change.
func (s *Sources) with(change func(*readers)) *Sources {
	r := *s.readers
	change(&r)
	return &Sources{ctx: s.ctx, readers: &r}
}

// NewSources returns lookups over r.
func NewSources(r client.Reader) *Sources {
	return &Sources{ctx: context.Background(), readers: &readers{reader: r}}
}

// WithFallback returns a copy that reads from live what the reader does
// not have, and everything until synced reports true (nil: at once).
func (s *Sources) WithFallback(live client.Reader, synced func() bool) *Sources {
	return s.with(func(r *readers) { r.live, r.synced = live, synced })
}

// WithContext returns a copy whose reads are bound to ctx (the admission
// request's), so a live read stops when the request is abandoned.
func (s *Sources) WithContext(ctx context.Context) *Sources {
	return &Sources{ctx: ctx, readers: s.readers}
}

// WithServiceIndex returns a copy that answers ServicesSelecting from x
// once synced; x must be fed by the same informers as the reader.
func (s *Sources) WithServiceIndex(x spread.ServiceCandidates) *Sources {
	return s.with(func(r *readers) { r.services = x })
}

// WithInformerStores returns a copy that reads owners, namespaces and
// policies from st once synced, in place of the reader; st must be the
// stores of the informers behind the reader.
func (s *Sources) WithInformerStores(st *InformerStores) *Sources {
	return s.with(func(r *readers) { r.stores = st })
}

// WithPolicyVerdicts returns a copy whose policies policy.Resolve takes as
// v judged them (see policy.Verdicts), so that a request does not validate
// them again.
func (s *Sources) WithPolicyVerdicts(v policy.Verdicts) *Sources {
	return s.with(func(r *readers) { r.verdicts = v })
}

// PolicyVerdict is the verdict of the policy verdicts given to
// WithPolicyVerdicts; none is known without them.
func (s *Sources) PolicyVerdict(uid types.UID, generation int64) (valid, known bool) {
	if s.verdicts == nil {
		return false, false
	}
	return s.verdicts.PolicyVerdict(uid, generation)
}

func (s *Sources) isSynced() bool { return s.synced == nil || s.synced() }

// current is the reader to ask first.
func (s *Sources) current() client.Reader {
	if s.live != nil && !s.isSynced() {
		return s.live
	}
	return s.reader
}

// get reads namespace/name into obj: the cache first, then the API server
// on a miss. It reports false when neither has the object.
func (s *Sources) get(namespace, name string, obj client.Object) (bool, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	r := s.current()
	err := r.Get(s.ctx, key, obj)
	if apierrors.IsNotFound(err) && s.live != nil && r != s.live {
		err = s.live.Get(s.ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

func (s *Sources) list(list client.ObjectList, opts ...client.ListOption) error {
	if err := s.current().List(s.ctx, list, opts...); err != nil {
		return fmt.Errorf("listing %T: %w", list, err)
	}
	return nil
}

// getOrNil adapts get to the (nil, nil)-when-absent convention of
// spread.SelectorSources and policy.Lister.
func getOrNil[T any, PT interface {
	*T
	client.Object
}](s *Sources, namespace, name string) (PT, error) {
	obj := PT(new(T))
	found, err := s.get(namespace, name, obj)
	if err != nil || !found {
		return nil, err
	}
	return obj, nil
}

// one reads namespace/name as getOrNil does, from the informer store
// stores picks once synced, and then from the API server on a miss.
func one[T any, PT interface {
	*T
	client.Object
}](s *Sources, namespace, name string) (PT, error) {
	store := storeOf[PT](s.stores)
	if store == nil || !s.isSynced() {
		return getOrNil[T, PT](s, namespace, name)
	}
	obj, err := fromStore[T, PT](store, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("reading %T %s: %w", obj, storeKey(namespace, name), err)
	}
	if obj != nil || s.live == nil {
		return obj, nil
	}
	// The object may be younger than the cache.
	return getOrNil[T, PT](&Sources{ctx: s.ctx, readers: &readers{reader: s.live}}, namespace, name)
}

// all lists namespace (every namespace for "") as list does, from the
// informer store stores picks once synced.
func all[T any, PT interface {
	*T
	client.Object
}](s *Sources, namespace string, list func() ([]PT, error)) ([]PT, error) {
	store := storeOf[PT](s.stores)
	if store == nil || !s.isSynced() {
		return list()
	}
	objs, err := listStore[T, PT](store, namespace)
	if err != nil {
		return nil, fmt.Errorf("listing %T: %w", PT(nil), err)
	}
	return objs, nil
}

// Services returns the Services of namespace.
func (s *Sources) Services(namespace string) ([]*v1.Service, error) {
	var list v1.ServiceList
	if err := s.list(&list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	return workload.Pointers(list.Items), nil
}

// ServicesSelecting returns the Services of namespace that may select a pod
// labelled podLabels (spread.ServiceCandidates): from the Service index
// once the caches have synced, without copying a Service; all the
// namespace's Services before that.
func (s *Sources) ServicesSelecting(namespace string, podLabels map[string]string) ([]*v1.Service, error) {
	if s.services != nil && s.isSynced() {
		return s.services.ServicesSelecting(namespace, podLabels)
	}
	return s.Services(namespace)
}

// ReplicationController returns namespace/name, or nil if there is none.
func (s *Sources) ReplicationController(namespace, name string) (*v1.ReplicationController, error) {
	return one[v1.ReplicationController](s, namespace, name)
}

// ReplicaSet returns namespace/name, or nil if there is none.
func (s *Sources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return one[appsv1.ReplicaSet](s, namespace, name)
}

// StatefulSet returns namespace/name, or nil if there is none.
func (s *Sources) StatefulSet(namespace, name string) (*appsv1.StatefulSet, error) {
	return one[appsv1.StatefulSet](s, namespace, name)
}

// Namespace returns the namespace called name, or nil if there is none.
func (s *Sources) Namespace(name string) (*v1.Namespace, error) {
	return one[v1.Namespace](s, "", name)
}

// SpreadPolicies returns the SpreadPolicies of namespace.
func (s *Sources) SpreadPolicies(namespace string) ([]*v1alpha1.SpreadPolicy, error) {
	return all[v1alpha1.SpreadPolicy](s, namespace,
		func() ([]*v1alpha1.SpreadPolicy, error) {
			var list v1alpha1.SpreadPolicyList
			if err := s.list(&list, client.InNamespace(namespace)); err != nil {
				return nil, err
			}
			return workload.Pointers(list.Items), nil
		})
}

// ClusterSpreadPolicies returns every ClusterSpreadPolicy.
func (s *Sources) ClusterSpreadPolicies() ([]*v1alpha1.ClusterSpreadPolicy, error) {
	return all[v1alpha1.ClusterSpreadPolicy](s, "",
		func() ([]*v1alpha1.ClusterSpreadPolicy, error) {
			var list v1alpha1.ClusterSpreadPolicyList
			if err := s.list(&list); err != nil {
				return nil, err
			}
			return workload.Pointers(list.Items), nil
		})
}
