package cache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// IndexSink is what the informer event handlers feed: spread.Index in the
// server, a recorder in tests. Pods arrive as records, which the cache's
// Pods give without allocating.
type IndexSink interface {
	AddNode(n *v1.Node)
	UpdateNode(old, new *v1.Node)
	DeleteNode(n *v1.Node)
	AddPodRecord(p spread.PodRecord)
	UpdatePodRecord(old, new spread.PodRecord)
	DeletePodRecord(p spread.PodRecord)
}

var _ IndexSink = (*spread.Index)(nil)

// NodeHandler feeds node events to ix.
func NodeHandler(ix IndexSink) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				ix.AddNode(n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if ok1 && ok2 {
				ix.UpdateNode(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := untombstone(obj).(*v1.Node); ok {
				ix.DeleteNode(n)
			}
		},
	}
}

// PodHandler feeds pod events to ix. The informer holds Pods (StripPod),
// whose records reach the index without an allocation; a *v1.Pod is taken
// as well.
func PodHandler(ix IndexSink) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := recordOf(obj); ok {
				ix.AddPodRecord(p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := recordOf(oldObj)
			n, ok2 := recordOf(newObj)
			if ok1 && ok2 {
				ix.UpdatePodRecord(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := recordOf(untombstone(obj)); ok {
				ix.DeletePodRecord(p)
			}
		},
	}
}

func recordOf(obj any) (spread.PodRecord, bool) {
	switch p := obj.(type) {
	case *Pod:
		if p != nil {
			return p.Record(), true
		}
	case *v1.Pod:
		if p != nil {
			return spread.PodRecordOf(p), true
		}
	}
	return spread.PodRecord{}, false
}

// untombstone returns the last known state of an object whose deletion the
// watch missed (the informer relisted and found it gone).
func untombstone(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// Listener hears of the pod and node events the index has counted, in the
// order the index counted them, so that what it reads of the index then
// includes the event: a second handler on the same informer would run on
// its own goroutine, before or after the index's. Its methods run on the
// informers' goroutines and must return at once: a slow listener delays
// the index.
type Listener interface {
	// PodChanged follows a pod event: old is nil for an add, new nil for a
	// delete.
	PodChanged(old, new *Pod)
	// NodesChanged follows a node event; most (status heartbeats) change
	// nothing the index counts (spread.Index.NodeGeneration tells).
	NodesChanged()
}

// Tracker starts every informer of the webhook, feeds the pod and node
// events to an index and then to its listeners, and reports when all of
// it is complete. It is a manager Runnable.
type Tracker struct {
	cache     crcache.Cache
	synced    atomic.Bool
	handlers  []toolscache.ResourceEventHandlerRegistration
	onSynced  func()
	pods      interface{ GetStore() toolscache.Store }
	listeners atomic.Pointer[[]Listener]
}

// NewTracker gets (and so registers for starting) an informer for every
// type in watched (Watched's), adds the index's handlers to the pod and node informers
// and the Service index's (when there is one) to the Service informer.
// onSynced, if not nil, runs once when everything has synced.
func NewTracker(ctx context.Context, c crcache.Cache, watched []client.Object, ix IndexSink, services *ServiceIndex, onSynced func()) (*Tracker, error) {
	t := &Tracker{cache: c, onSynced: onSynced}
	for _, obj := range watched {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		var h toolscache.ResourceEventHandler
		switch obj.(type) {
		case *v1.Pod:
			h = t.podHandler(PodHandler(ix))
			t.pods, _ = inf.(interface{ GetStore() toolscache.Store })
		case *v1.Node:
			h = t.nodeHandler(NodeHandler(ix))
		case *v1.Service:
			if services == nil {
				continue
			}
			h = services.Handler()
		default:
			continue
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("adding the index handler to the %T informer: %w", obj, err)
		}
		t.handlers = append(t.handlers, reg)
	}
	return t, nil
}

// Start waits for the caches to sync and for the index to have received
// every object of the initial lists, then marks the tracker synced.
func (t *Tracker) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("cache")
	if !t.cache.WaitForCacheSync(ctx) {
		return nil // stopped before syncing; the manager reports why
	}
	syncedFuncs := make([]toolscache.InformerSynced, len(t.handlers))
	for i, h := range t.handlers {
		syncedFuncs[i] = h.HasSynced
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), syncedFuncs...) {
		return nil
	}
	t.synced.Store(true)
	if t.onSynced != nil {
		t.onSynced()
	}
	log.Info("caches synced; validating pods against the cluster's nodes and pods")
	return nil
}

// NeedLeaderElection is false: every replica serves admission requests.
func (t *Tracker) NeedLeaderElection() bool { return false }

// Listen adds l to the listeners of the events the index has counted.
func (t *Tracker) Listen(l Listener) {
	for {
		old := t.listeners.Load()
		var next []Listener
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, l)
		if t.listeners.CompareAndSwap(old, &next) {
			return
		}
	}
}

// EachPod calls f with every pod the pod informer holds, for a listener
// that starts after the informer: it hears of the later events, and of the
// earlier ones through EachPod. f must not modify the pod: cached Pods are
// shared.
func (t *Tracker) EachPod(f func(*Pod)) error {
	if t.pods == nil {
		return errors.New("no pod informer")
	}
	for _, obj := range t.pods.GetStore().List() {
		if p, ok := obj.(*Pod); ok {
			f(p)
		}
	}
	return nil
}

// Pod returns the pod namespace/name as the pod informer holds it, nil when
// it holds none.
func (t *Tracker) Pod(namespace, name string) *Pod {
	if t.pods == nil {
		return nil
	}
	obj, ok, err := t.pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*Pod)
	return p
}

// podHandler is h, then the listeners.
func (t *Tracker) podHandler(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			h.OnAdd(obj, false)
			if ls := t.listeners.Load(); ls != nil {
				if p := compactOf(obj); p != nil {
					for _, l := range *ls {
						l.PodChanged(nil, p)
					}
				}
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			h.OnUpdate(oldObj, newObj)
			if ls := t.listeners.Load(); ls != nil {
				if o, n := compactOf(oldObj), compactOf(newObj); o != nil && n != nil {
					for _, l := range *ls {
						l.PodChanged(o, n)
					}
				}
			}
		},
		DeleteFunc: func(obj any) {
			h.OnDelete(obj)
			if ls := t.listeners.Load(); ls != nil {
				if p := compactOf(untombstone(obj)); p != nil {
					for _, l := range *ls {
						l.PodChanged(p, nil)
					}
				}
			}
		},
	}
}

// nodeHandler is h, then the listeners.
func (t *Tracker) nodeHandler(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	notify := func() {
		if ls := t.listeners.Load(); ls != nil {
			for _, l := range *ls {
				l.NodesChanged()
			}
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.OnAdd(obj, false); notify() },
		UpdateFunc: func(oldObj, newObj any) { h.OnUpdate(oldObj, newObj); notify() },
		DeleteFunc: func(obj any) { h.OnDelete(obj); notify() },
	}
}

// compactOf returns the cached form of a pod event's object: the informer
// holds Pods (StripPod); a *v1.Pod is compacted.
func compactOf(obj any) *Pod {
	switch p := obj.(type) {
	case *Pod:
		return p
	case *v1.Pod:
		if p != nil {
			return CompactPod(p)
		}
	}
	return nil
}

// Synced reports whether the caches and the index are complete.
func (t *Tracker) Synced() bool { return t.synced.Load() }
