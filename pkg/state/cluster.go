package state

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Subscriber hears of the Cluster's changes, one at a time, in the order
// the Cluster applied them, each after the Cluster holds it. Changed runs
// on the goroutine that applied the change (an informer's) while the
// next change waits: it must return at once (note the change, wake a
// goroutine of its own) and must not call the Cluster's writers.
type Subscriber interface {
	Changed(c Change)
}

// SubscriberFunc is a function that is a Subscriber.
type SubscriberFunc func(Change)

// Changed calls f.
func (f SubscriberFunc) Changed(c Change) { f(c) }

// Cluster is the webhook's view of the cluster and the one stream of its
// changes. Its writers (Add, Update, Delete, SetDerived) apply a change
// and then tell every subscriber of its kind; they are safe to call from
// several goroutines, and the changes are applied and told one at a time.
type Cluster struct {
	index    *spread.Index
	services *cache.ServiceIndex
	// mu orders the changes: held while one is applied and told.
	mu sync.Mutex
	// subscribers are those of each kind: a pod change, the most frequent,
	// reaches only the subscribers that read pods.
	subscribers [numKinds]atomic.Pointer[[]*subscription]
	// pods is the pod informer's store, once Inform has found it.
	pods atomic.Pointer[toolscache.Store]
}

type subscription struct{ s Subscriber }

// NewCluster returns a Cluster that counts pods and nodes in ix and, when
// services is not nil, files Services in it.
func NewCluster(ix *spread.Index, services *cache.ServiceIndex) *Cluster {
	return &Cluster{index: ix, services: services}
}

// Index returns the pod and node counts: the feasibility checks read
// them. Only the Cluster writes them.
func (c *Cluster) Index() *spread.Index { return c.index }

// Services returns the Services by the pods they may select, nil when the
// Cluster keeps none.
func (c *Cluster) Services() *cache.ServiceIndex { return c.services }

// Templates returns the templates of the nodes an autoscaler can add, as
// last derived (SetDerived), sorted by name; read them, never modify them.
func (c *Cluster) Templates() []spread.Template { return c.index.Templates() }

// UnservedZones returns the zones an autoscaler's node pool requires that
// its node class cannot serve, as last derived, sorted; read them, never
// modify them.
func (c *Cluster) UnservedZones() []spread.UnservedZone { return c.index.UnservedZones() }

// Subscribe adds s to the subscribers of the changes of kinds, of every
// kind when kinds is empty: it hears of every such change applied from
// then on. A subscriber added before the informers start hears of every
// object they list; one added later reads what it missed from the
// informer cache. unsubscribe removes it.
func (c *Cluster) Subscribe(s Subscriber, kinds ...Kind) (unsubscribe func()) {
	if len(kinds) == 0 {
		for k := Pod; k < numKinds; k++ {
			kinds = append(kinds, k)
		}
	}
	sub := &subscription{s: s}
	for _, k := range kinds {
		update(&c.subscribers[k], func(subs []*subscription) []*subscription { return append(subs, sub) })
	}
	return func() {
		for _, k := range kinds {
			update(&c.subscribers[k], func(subs []*subscription) []*subscription {
				return slices.DeleteFunc(subs, func(x *subscription) bool { return x == sub })
			})
		}
	}
}

// update replaces the subscribers in p with f of a copy of them.
func update(p *atomic.Pointer[[]*subscription], f func([]*subscription) []*subscription) {
	for {
		old := p.Load()
		var subs []*subscription
		if old != nil {
			subs = slices.Clone(*old)
		}
		next := f(subs)
		if p.CompareAndSwap(old, &next) {
			return
		}
	}
}

// publish tells every subscriber of ch's kind of ch. c.mu is held.
func (c *Cluster) publish(ch Change) {
	if subs := c.subscribers[ch.Kind].Load(); subs != nil {
		for _, s := range *subs {
			s.s.Changed(ch)
		}
	}
}

// Add applies an object's addition, as an informer tells it. An object
// of a kind the Cluster does not follow is ignored.
func (c *Cluster) Add(obj any) {
	if p := compactOf(obj); p != nil {
		c.mu.Lock()
		c.index.AddPodRecord(p.Record())
		c.publish(Change{Kind: Pod, Op: Added, What: All, new: p})
		c.mu.Unlock()
		return
	}
	k, ok := KindOf(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o := obj.(type) {
	case *v1.Node:
		c.index.AddNode(o)
	case *v1.Service:
		if c.services != nil {
			c.services.Set(o)
		}
	}
	c.publish(Change{Kind: k, Op: Added, What: All, new: obj})
}

// Update applies an object's update, as an informer tells it. Two objects
// of different kinds are ignored.
func (c *Cluster) Update(old, cur any) {
	if o := compactOf(old); o != nil {
		n := compactOf(cur)
		if n == nil {
			return
		}
		ro, rn := o.Record(), n.Record()
		what := podChanged(o, n, ro, rn)
		c.mu.Lock()
		c.index.UpdatePodRecord(ro, rn)
		c.publish(Change{Kind: Pod, Op: Updated, What: what, old: o, new: n})
		c.mu.Unlock()
		return
	}
	k, ok := KindOf(old)
	if !ok {
		return
	}
	if kn, ok := KindOf(cur); !ok || kn != k {
		return
	}
	what := changed(k, old, cur)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o := old.(type) {
	case *v1.Node:
		c.index.UpdateNode(o, cur.(*v1.Node))
	case *v1.Service:
		if c.services != nil {
			c.services.Set(cur.(*v1.Service))
		}
	}
	c.publish(Change{Kind: k, Op: Updated, What: what, old: old, new: cur})
}

// Delete applies an object's deletion, as an informer tells it: obj may
// be the tombstone of a deletion the watch missed.
func (c *Cluster) Delete(obj any) {
	obj = untombstone(obj)
	if p := compactOf(obj); p != nil {
		c.mu.Lock()
		c.index.DeletePodRecord(p.Record())
		c.publish(Change{Kind: Pod, Op: Deleted, What: All, old: p})
		c.mu.Unlock()
		return
	}
	k, ok := KindOf(obj)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o := obj.(type) {
	case *v1.Node:
		c.index.DeleteNode(o)
	case *v1.Service:
		if c.services != nil {
			c.services.Delete(o)
		}
	}
	c.publish(Change{Kind: k, Op: Deleted, What: All, old: obj})
}

// SetDerived replaces the facts derived from the autoscalers: the
// templates of the nodes an autoscaler can add, which the feasibility
// checks read, and the zones a node pool requires that its node class
// cannot serve, which their denials name.
func (c *Cluster) SetDerived(d autoscale.Derived) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index.SetTemplates(d.Templates)
	c.index.SetUnservedZones(d.Unserved())
	c.publish(Change{Kind: Derived, Op: Updated, What: Spec})
}

// EachPod calls f with every pod the pod informer holds, for a reader
// that starts after the informer: it hears of the later changes, and of
// the earlier ones through EachPod. f must not modify the pod: cached Pods
// are shared.
func (c *Cluster) EachPod(f func(*cache.Pod)) error {
	store := c.pods.Load()
	if store == nil {
		return errors.New("no pod informer")
	}
	for _, obj := range (*store).List() {
		if p, ok := obj.(*cache.Pod); ok {
			f(p)
		}
	}
	return nil
}

// Pod returns the pod namespace/name as the pod informer holds it, nil when
// it holds none.
func (c *Cluster) Pod(namespace, name string) *cache.Pod {
	store := c.pods.Load()
	if store == nil {
		return nil
	}
	obj, ok, err := (*store).GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*cache.Pod)
	return p
}

// compactOf returns the cached form of a pod event's object, nil for an
// object that is no pod: the informer holds Pods (cache.StripPod); a
// *v1.Pod is compacted.
func compactOf(obj any) *cache.Pod {
	switch p := obj.(type) {
	case *cache.Pod:
		return p
	case *v1.Pod:
		if p != nil {
			return cache.CompactPod(p)
		}
	}
	return nil
}

// untombstone returns the last known state of an object whose deletion the
// watch missed (the informer relisted and found it gone).
func untombstone(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// Load returns a Cluster holding objs as if the informers had listed
// them: the state kubectl-spread builds from a cluster file or a live
// cluster's objects (lookup.Store.Objects), counted and filed as the
// webhook's is.
func Load(objs []runtime.Object) *Cluster {
	c := NewCluster(spread.NewIndex(), cache.NewServiceIndex())
	for _, obj := range objs {
		c.Add(obj)
	}
	return c
}
