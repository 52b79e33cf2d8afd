package cache

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// TemplateWatcher keeps an index's templates of the nodes an autoscaler can
// add in step with what they are derived from: NodeTemplates, Karpenter's
// NodePools and node classes, the nodes' labels and taints (node groups,
// the zones a NodePool may use) and the policies' topology keys. Events only mark the
// templates stale; one goroutine derives them again, at most once per
// interval, so that a burst of node changes costs one derivation. It is a
// manager Runnable.
type TemplateWatcher struct {
	cache    crcache.Cache
	load     func(ctx context.Context) ([]spread.Template, error)
	set      func([]spread.Template)
	interval time.Duration
	stale    chan struct{}
	loaded   atomic.Bool
	onLoaded func()
}

// NewTemplateWatcher returns a watcher that, once c has synced and then
// whenever a watched object changes, calls load and hands the templates to
// set, at most once per interval. onLoaded, if not nil, runs once, after
// the first templates were set.
func NewTemplateWatcher(c crcache.Cache, load func(ctx context.Context) ([]spread.Template, error), set func([]spread.Template),
	interval time.Duration, onLoaded func()) *TemplateWatcher {
	return &TemplateWatcher{cache: c, load: load, set: set, interval: interval, stale: make(chan struct{}, 1), onLoaded: onLoaded}
}

// Handler marks the templates stale on any change of an object they are
// derived from. A node update counts only when its labels, taints or
// cordon change: status heartbeats do not; a node class update only when
// its zones change.
func (w *TemplateWatcher) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { w.markStale() },
		UpdateFunc: func(old, cur any) {
			if sameTemplates(old, cur) {
				return
			}
			w.markStale()
		},
		DeleteFunc: func(any) { w.markStale() },
	}
}

// sameTemplates reports whether two versions of an object give the same
// templates, for the kinds where most updates do.
func sameTemplates(old, cur any) bool {
	switch o := old.(type) {
	case *v1.Node:
		n, ok := cur.(*v1.Node)
		return ok && sameShape(o, n)
	case *nodeclassv1.EC2NodeClass:
		n, ok := cur.(*nodeclassv1.EC2NodeClass)
		return ok && slices.Equal(o.Status.Zones(), n.Status.Zones())
	case *nodeclassv1.NodeClass:
		n, ok := cur.(*nodeclassv1.NodeClass)
		return ok && slices.Equal(o.Status.Zones(), n.Status.Zones())
	}
	return false
}

// sameShape reports whether two versions of a node give the same
// templates.
func sameShape(a, b *v1.Node) bool {
	return a.Spec.Unschedulable == b.Spec.Unschedulable && maps.Equal(a.Labels, b.Labels) &&
		slices.EqualFunc(a.Spec.Taints, b.Spec.Taints, func(x, y v1.Taint) bool {
			return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
		})
}

func (w *TemplateWatcher) markStale() {
	select {
	case w.stale <- struct{}{}:
	default:
	}
}

// Start derives the templates once the caches have synced, then again after
// every change, until ctx is done. A failed derivation keeps the previous
// templates and is tried again after the interval.
func (w *TemplateWatcher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("templates")
	if !w.cache.WaitForCacheSync(ctx) {
		return nil
	}
	w.markStale()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.stale:
		}
		ts, err := w.load(ctx)
		if err != nil {
			log.Error(err, "deriving the templates of the nodes an autoscaler can add; keeping the previous ones")
			w.markStale()
		} else {
			w.set(ts)
			if !w.loaded.Swap(true) {
				log.Info("templates of the nodes an autoscaler can add derived", "count", len(ts))
				if w.onLoaded != nil {
					w.onLoaded()
				}
			}
			log.V(1).Info("templates derived", "count", len(ts))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.interval):
		}
	}
}

// Loaded reports whether the templates have been derived once.
func (w *TemplateWatcher) Loaded() bool { return w.loaded.Load() }

// NeedLeaderElection is false: every replica checks pods.
func (w *TemplateWatcher) NeedLeaderElection() bool { return false }
