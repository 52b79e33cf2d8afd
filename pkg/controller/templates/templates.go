// Package templates is the controller that keeps an index's templates of
// the nodes an autoscaler can add in step with what they are derived from:
// NodeTemplates, Karpenter's NodePools and node classes, the nodes' labels
// and taints (node groups, the zones a NodePool may use), the policies'
// topology keys and cluster-autoscaler's status ConfigMap.
// Events only mark the templates stale; one goroutine derives them again
// (lookup.Derive, over the informer cache), at most once per interval,
// so that a burst of node changes costs one derivation.
package templates

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/lookup"
)

// Interval is the shortest time between two derivations of the templates.
const Interval = time.Second

var (
	_ manager.Runnable               = (*Watcher)(nil)
	_ manager.LeaderElectionRunnable = (*Watcher)(nil)
)

// Watcher derives the templates once the cache has synced, and again after
// every change of what they are derived from. It is a manager.Runnable on
// every replica: each replica checks pods against its own index.
type Watcher struct {
	cache    crcache.Cache
	watched  []client.Object
	load     func(ctx context.Context) (lookup.Derived, error)
	set      func(autoscale.Derived)
	interval time.Duration
	stale    chan struct{}
	loaded   atomic.Bool
	onLoaded func()
	// statusErr is why cluster-autoscaler's status was last not read, as
	// logged: a status cluster-autoscaler rewrites every 10 seconds is
	// logged about once, not at every derivation.
	statusErr string
	// findings are what of the autoscalers the last derivation found
	// leaves pods Pending or refused, as logged: logged when they change.
	findings []string
}

// New returns a watcher that derives the templates from c as opts says
// and hands them to set (the index's SetTemplates and SetUnservedZones). watched are the kinds
// the cache watches: a change to any of them that templates are derived
// from marks the templates stale; a ConfigMap among them is
// cluster-autoscaler's status, which the cache watches alone
// (cache.WatchNamed). onLoaded, if not nil, runs once, after the first
// templates were set.
func New(c crcache.Cache, opts lookup.TemplateOptions, watched []client.Object, set func(autoscale.Derived), onLoaded func()) *Watcher {
	return &Watcher{
		cache: c, watched: watched,
		load:     func(ctx context.Context) (lookup.Derived, error) { return lookup.Derive(ctx, c, opts) },
		set:      set,
		interval: Interval,
		stale:    make(chan struct{}, 1),
		onLoaded: onLoaded,
	}
}

// Handler marks the templates stale on any change of an object they are
// derived from. A node update counts only when its labels, taints or
// cordon change: status heartbeats do not; a node class update only when
// its zones change; cluster-autoscaler's status, rewritten every loop
// with the time, only when the sizes, health or scale-up of its node
// groups change.
func (w *Watcher) Handler() toolscache.ResourceEventHandler {
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
		return ok && slices.Equal(o.Status.Placements(), n.Status.Placements())
	case *nodeclassv1.NodeClass:
		n, ok := cur.(*nodeclassv1.NodeClass)
		return ok && slices.Equal(o.Status.Placements(), n.Status.Placements())
	case *v1.ConfigMap:
		n, ok := cur.(*v1.ConfigMap)
		return ok && sameStatus(o, n)
	}
	return false
}

// sameStatus reports whether two versions of cluster-autoscaler's status
// ConfigMap say the same of its node groups, or fail to be read alike.
func sameStatus(a, b *v1.ConfigMap) bool {
	ta, oka := a.Data[autoscale.ClusterAutoscalerStatusKey]
	tb, okb := b.Data[autoscale.ClusterAutoscalerStatusKey]
	if oka != okb {
		return false
	}
	if ta == tb {
		return true
	}
	sa, erra := autoscale.ParseClusterAutoscalerStatus(ta)
	sb, errb := autoscale.ParseClusterAutoscalerStatus(tb)
	if erra != nil || errb != nil {
		return erra != nil && errb != nil && erra.Error() == errb.Error()
	}
	return slices.Equal(sa.NodeGroups, sb.NodeGroups)
}

// sameShape reports whether two versions of a node give the same
// templates.
func sameShape(a, b *v1.Node) bool {
	return a.Spec.Unschedulable == b.Spec.Unschedulable && maps.Equal(a.Labels, b.Labels) &&
		slices.EqualFunc(a.Spec.Taints, b.Spec.Taints, func(x, y v1.Taint) bool {
			return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
		})
}

func (w *Watcher) markStale() {
	select {
	case w.stale <- struct{}{}:
	default:
	}
}

// derivedFrom reports whether the templates are derived from objects of
// obj's kind.
func derivedFrom(obj client.Object) bool {
	switch obj.(type) {
	case *v1.Node, *v1alpha1.NodeTemplate, *karpenterv1.NodePool, *nodeclassv1.EC2NodeClass, *nodeclassv1.NodeClass,
		*v1alpha1.SpreadPolicy, *v1alpha1.ClusterSpreadPolicy, *v1.ConfigMap:
		return true
	}
	return false
}

// watch adds the watcher's handler to the informers of the watched kinds
// the templates are derived from; unwatch removes it.
func (w *Watcher) watch(ctx context.Context) (unwatch func() error, err error) {
	var sources []client.Object
	for _, obj := range w.watched {
		if derivedFrom(obj) {
			sources = append(sources, obj)
		}
	}
	return cache.AddHandler(ctx, w.cache, w.Handler(), sources...)
}

// Start derives the templates once the caches have synced, then again after
// every change, until ctx is done. A failed derivation keeps the previous
// templates and is tried again after the interval.
func (w *Watcher) Start(ctx context.Context) (err error) {
	log := logf.FromContext(ctx).WithName("templates")
	unwatch, err := w.watch(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, unwatch()) }()
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
		d, err := w.load(ctx)
		if err != nil {
			log.Error(err, "deriving the templates of the nodes an autoscaler can add; keeping the previous ones")
			w.markStale()
		} else {
			ts := d.Templates
			w.logStatus(log, d.ClusterAutoscalerStatusErr)
			w.logFindings(log, d.Findings())
			w.set(d.Derived)
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

// logStatus logs why cluster-autoscaler's status was not read when that
// changes: once for a status in the plain-text format of versions before
// 1.30, once again for each other reason, and once when it is read again.
func (w *Watcher) logStatus(log logr.Logger, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == w.statusErr {
		return
	}
	switch {
	case errors.Is(err, autoscale.ErrLegacyClusterAutoscalerStatus):
		log.Info("cluster-autoscaler's status is not read: every node group is taken to be able to grow; cluster-autoscaler 1.30 and later write the YAML status spreadguard reads", "reason", msg)
	case err != nil:
		log.Error(err, "cluster-autoscaler's status is not read: every node group is taken to be able to grow")
	default:
		log.Info("cluster-autoscaler's status is read again")
	}
	w.statusErr = msg
}

// logFindings logs each of findings (autoscale.Derived.Findings) when
// they differ from the last ones logged: a NodePool whose zone its node
// class does not serve, a node group at its maximum or scaled to zero
// stays so across many derivations.
func (w *Watcher) logFindings(log logr.Logger, findings []string) {
	if slices.Equal(findings, w.findings) {
		return
	}
	for _, f := range findings {
		log.Info("the nodes an autoscaler can add: " + f)
	}
	w.findings = findings
}

// Loaded reports whether the templates have been derived once.
func (w *Watcher) Loaded() bool { return w.loaded.Load() }

// NeedLeaderElection is false: every replica checks pods.
func (w *Watcher) NeedLeaderElection() bool { return false }
