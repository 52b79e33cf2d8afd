package state

import (
	"context"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Informers feeds a Cluster from the informer cache and reports when the
// Cluster holds everything the informers first listed. It is a manager
// Runnable on every replica.
type Informers struct {
	cache    crcache.Informers
	synced   atomic.Bool
	handlers []toolscache.ResourceEventHandlerRegistration
	onSynced func()
}

// Inform gets (and so registers for starting) the informer of every kind
// in watched (cache.Watched's, and cluster-autoscaler's status ConfigMap
// when it is watched) and hands its events to c. It is the one place that
// adds a handler to an informer. onSynced, if not nil, runs once when
// everything has synced.
func (c *Cluster) Inform(ctx context.Context, informers crcache.Informers, watched []client.Object, onSynced func()) (*Informers, error) {
	in := &Informers{cache: informers, onSynced: onSynced}
	h := toolscache.ResourceEventHandlerFuncs{AddFunc: c.Add, UpdateFunc: c.Update, DeleteFunc: c.Delete}
	for _, obj := range watched {
		if _, ok := KindOf(obj); !ok {
			return nil, fmt.Errorf("the cluster state follows no %T", obj)
		}
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		if _, ok := obj.(*v1.Pod); ok {
			if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
				store := s.GetStore()
				c.pods.Store(&store)
			}
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("adding the cluster state's handler to the %T informer: %w", obj, err)
		}
		in.handlers = append(in.handlers, reg)
	}
	return in, nil
}

// Start waits for the caches to sync and for the Cluster to have received
// every object of the initial lists, then marks the Cluster synced.
func (in *Informers) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("state")
	if !in.cache.WaitForCacheSync(ctx) {
		return nil // stopped before syncing; the manager reports why
	}
	synced := make([]toolscache.InformerSynced, len(in.handlers))
	for i, h := range in.handlers {
		synced[i] = h.HasSynced
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	in.synced.Store(true)
	if in.onSynced != nil {
		in.onSynced()
	}
	log.Info("caches synced; validating pods against the cluster's nodes and pods")
	return nil
}

// NeedLeaderElection is false: every replica serves admission requests.
func (in *Informers) NeedLeaderElection() bool { return false }

// Synced reports whether the caches and the Cluster are complete.
func (in *Informers) Synced() bool { return in.synced.Load() }
