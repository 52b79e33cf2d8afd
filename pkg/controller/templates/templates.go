// Package templates is the controller that keeps an index's templates of
// the nodes an autoscaler can add in step with what they are derived from:
// NodeTemplates, Karpenter's NodePools and node classes, the nodes' labels
// and taints (node groups, the zones a NodePool may use), the policies'
// topology keys and cluster-autoscaler's status ConfigMap, as the cluster
// state's stream of changes tells of them (pkg/state), which also holds
// the result. Changes only mark the templates stale; one goroutine derives them again
// (lookup.Derive, over the informer cache), at most once per interval,
// so that a burst of node changes costs one derivation.
package templates

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// Interval is the shortest time between two derivations of the templates.
const Interval = time.Second

var (
	_ manager.Runnable               = (*Watcher)(nil)
	_ manager.LeaderElectionRunnable = (*Watcher)(nil)
	_ state.Subscriber               = (*Watcher)(nil)
)

// Changes is the stream the watcher subscribes to: state.Cluster.
type Changes interface {
	Subscribe(s state.Subscriber, kinds ...state.Kind) (unsubscribe func())
}

// Watcher derives the templates once the cache has synced, and again after
// every change of what they are derived from. It is a manager.Runnable on
// every replica: each replica checks pods against its own index.
type Watcher struct {
	cache    crcache.Cache
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
// and hands them to set (state.Cluster.SetDerived), subscribed to changes:
// a change of an object the templates are derived from marks them stale.
// onLoaded, if not nil, runs once, after the first templates were set.
func New(c crcache.Cache, changes Changes, opts lookup.TemplateOptions, set func(autoscale.Derived), onLoaded func()) *Watcher {
	w := &Watcher{
		cache:    c,
		load:     func(ctx context.Context) (lookup.Derived, error) { return lookup.Derive(ctx, c, opts) },
		set:      set,
		interval: Interval,
		stale:    make(chan struct{}, 1),
		onLoaded: onLoaded,
	}
	changes.Subscribe(w, derivedKinds...)
	return w
}

// Changed marks the templates stale after a change of what they are
// derived from that touches what they read of it (state.Change.What): a
// node's labels, taints or cordon, not its heartbeats; a node class's
// zones and zone IDs; the sizes, health and scale-up of cluster-autoscaler's
// node groups, not the time it rewrites its status with; a policy's spec.
func (w *Watcher) Changed(c state.Change) {
	if derivedFrom(c.Kind) && c.What != 0 {
		w.markStale()
	}
}

func (w *Watcher) markStale() {
	select {
	case w.stale <- struct{}{}:
	default:
	}
}

// derivedKinds are the kinds the templates are derived from.
var derivedKinds = []state.Kind{state.Node, state.NodeTemplate, state.NodePool, state.NodeClass,
	state.SpreadPolicy, state.ClusterSpreadPolicy, state.AutoscalerStatus}

// derivedFrom reports whether the templates are derived from objects of
// kind k.
func derivedFrom(k state.Kind) bool { return slices.Contains(derivedKinds, k) }

// Start derives the templates once the caches have synced, then again after
// every change, until ctx is done. A failed derivation keeps the previous
// templates and is tried again after the interval.
func (w *Watcher) Start(ctx context.Context) error {
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
