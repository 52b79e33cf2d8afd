// Package deletioncost is the keeper of deletion costs: on the replica
// that holds its Lease, it keeps controller.kubernetes.io/pod-deletion-cost
// on the pods of the ReplicaSets and ReplicationControllers whose pods
// carry topology spread constraints (their template's, or those the webhook
// injected), as spread.DeletionOrder computes them, so that a scale-down
// deletes the pods whose loss keeps the spread. See docs/deletion-cost.md.
//
// It reads the webhook's own caches: it subscribes to the cluster state's
// one stream of changes (pkg/state) for the pods, nodes, ReplicaSets,
// ReplicationControllers, policies and namespaces, each told after the
// state (the spread.Index it counts in) holds it, and reads those objects
// from the informer cache. It writes by server-side
// apply of the annotation alone, with its own field manager and no force,
// rate-capped cluster-wide, and leaves alone a pod whose cost another
// manager owns.
package deletioncost

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/controller/leader"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// FieldManager is the field manager of the keeper's applies: the manager
// that owns the costs it wrote, and only those.
const FieldManager = "spreadguard-deletion-cost"

// LeaseName names the Lease whose holder keeps the costs.
const LeaseName = "spreadguard-deletion-cost"

// The defaults of the cluster-wide cap on the keeper's patches.
const (
	DefaultQPS   = 20
	DefaultBurst = 40
)

// writers is how many patches may be in flight at once: enough that the
// API server's latency does not cap the rate below the limiter's.
const writers = 4

// Pods is the part of the cluster state the keeper reads of the pods:
// state.Cluster.
type Pods interface {
	EachPod(f func(*cache.Pod)) error
	Pod(namespace, name string) *cache.Pod
}

// Changes is the cluster state's stream of changes: state.Cluster.
type Changes interface {
	Subscribe(s state.Subscriber, kinds ...state.Kind) (unsubscribe func())
}

// kinds are the kinds of change the keeper subscribes to.
var kinds = []state.Kind{state.Pod, state.Node, state.ReplicaSet, state.ReplicationController,
	state.SpreadPolicy, state.ClusterSpreadPolicy, state.Namespace}

// Config is what a Keeper reads, writes through and is bounded by.
type Config struct {
	Log   logr.Logger
	Index *spread.Index
	Pods  Pods
	// Changes tells of the changes to the pods, nodes, ReplicaSets,
	// ReplicationControllers, policies and namespaces: state.Cluster.
	Changes Changes
	// Reader is the webhook's informer cache: the ReplicaSets,
	// ReplicationControllers, policies and namespaces.
	Reader client.Reader
	// Policies resolves the policy that governs a workload's pods, as
	// admission does (policy.Resolve).
	Policies policy.Lister
	// Namespaces are those the keeper serves, as admission serves them
	// (engine.Config.Scope): a workload in another is left alone.
	Namespaces policy.Scope
	Patcher    Patcher
	// QPS and Burst cap the patches of the whole cluster.
	QPS   float64
	Burst int
	// Synced reports whether the caches are complete.
	Synced   func() bool
	Registry prometheus.Registerer
	// RESTConfig and LeaseNamespace are the Lease's.
	RESTConfig     *rest.Config
	LeaseNamespace string
}

// Keeper is a manager.Runnable that keeps the deletion costs while its
// replica holds the Lease LeaseName.
type Keeper struct {
	cfg     Config
	log     logr.Logger
	metrics *metrics

	// leading is read by Changed on the informers' goroutines: the
	// changes told a replica that does not lead are dropped at once.
	leading atomic.Bool
	inbox   inbox
	wake    chan struct{}

	// The syncer's own: one goroutine reads and writes these.
	workloads  map[workloadKey]*workload
	namespaces map[string]*namespaceWorkloads
	nodeGen    uint64
	// dirty are the workloads whose order is to be updated; sampled the
	// waiting ones with a pod seen.
	dirty, sampled []*workload
	// counted is when the workloads were last counted for the metrics.
	counted time.Time
	// rescan asks for the names of every pod: at start, and after
	// workloads became kept whose pods are not known.
	rescan bool

	writes *writes

	// elect runs the elections of the Lease: client-go's on
	// cfg.RESTConfig when nil (tests set their own).
	elect leader.Elect
}

// inbox is what the informers' goroutines hand the syncer.
type inbox struct {
	mu              sync.Mutex
	pods            []podEvent
	nodes           bool
	workloads       map[workloadKey]struct{}
	policiesChanged bool
}

// podEvent is a pod event as the syncer needs it.
type podEvent struct {
	namespace, name string
	labels          spread.LabelSet
	// moved: the index records the pod differently (added, deleted, bound,
	// relabelled, terminating, Ready or not: state.Placement); otherwise
	// only its cost changed.
	moved bool
	gone  bool
	cost  int32
	has   bool
}

var (
	_ manager.LeaderElectionRunnable = (*Keeper)(nil)
	_ state.Subscriber               = (*Keeper)(nil)
)

// New returns a Keeper, its metrics registered with cfg.Registry, and
// subscribed to cfg.Changes.
func New(cfg Config) (*Keeper, error) {
	if cfg.QPS <= 0 || cfg.Burst < 1 {
		return nil, fmt.Errorf("deletion cost rate cap: qps %v and burst %d must be above 0", cfg.QPS, cfg.Burst)
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	k := &Keeper{cfg: cfg, log: cfg.Log, metrics: m, wake: make(chan struct{}, 1)}
	k.reset()
	cfg.Changes.Subscribe(k, kinds...)
	return k, nil
}

// reset forgets everything a leadership learnt.
func (k *Keeper) reset() {
	k.inbox.mu.Lock()
	k.inbox.pods, k.inbox.nodes, k.inbox.policiesChanged = nil, false, false
	k.inbox.workloads = map[workloadKey]struct{}{}
	k.inbox.mu.Unlock()
	k.workloads = map[workloadKey]*workload{}
	k.namespaces = map[string]*namespaceWorkloads{}
	k.nodeGen = 0
	k.dirty, k.sampled = nil, nil
	k.counted = time.Time{}
	k.rescan = true
	k.writes = newWrites(k.cfg.QPS, k.cfg.Burst)
	k.metrics.reset()
}

// NeedLeaderElection is false: the manager starts the keeper on every
// replica, and the keeper elects its leader itself on its own Lease
// (pkg/controller/leader). The manager's election would stop the whole
// process, admission included, when the Lease cannot be renewed; losing
// the Lease must stop the writes, never admission.
func (k *Keeper) NeedLeaderElection() bool { return false }

// Start competes for the Lease until ctx is done, and keeps the costs
// while it holds it.
func (k *Keeper) Start(ctx context.Context) error {
	if k.elect != nil {
		return leader.RunElections(ctx, k.elect, LeaseName, k.log, k.lead)
	}
	return leader.Run(ctx, k.cfg.RESTConfig, leader.Lease{Namespace: k.cfg.LeaseNamespace, Name: LeaseName}, k.log, k.lead)
}

// lead keeps the costs until ctx is done.
func (k *Keeper) lead(ctx context.Context) error {
	k.log.Info("leading: keeping the deletion costs of the pods of constrained workloads", "qps", k.cfg.QPS, "burst", k.cfg.Burst)
	if !cache.WaitSynced(ctx, k.cfg.Synced) {
		return nil
	}
	k.reset()
	k.leading.Store(true)
	defer func() {
		k.leading.Store(false)
		k.metrics.reset()
	}()
	if err := k.loadWorkloads(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() { k.writes.run(ctx, k.cfg.Pods, k.cfg.Patcher, k.metrics, k.log) })
	}
	defer func() {
		k.writes.queue.ShutDown()
		wg.Wait()
	}()
	k.poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.wake:
			if err := k.sync(ctx); err != nil {
				return err
			}
		}
	}
}

// Changed hands a change to the syncer when this replica leads and the
// change touches what the keeper reads (state.Change.What):
//   - a pod's placement, which includes whether it is Ready (the
//     ReplicaSet controller deletes a pod that is not Ready before it
//     compares any cost), or its cost;
//   - a node: the syncer compares the index's node generation;
//   - a ReplicaSet's or ReplicationController's selection (its selector
//     or template): the syncer looks at the workload again;
//   - a policy's spec or a namespace's labels: the syncer resolves every
//     workload's policy again.
func (k *Keeper) Changed(c state.Change) {
	if !k.leading.Load() {
		return
	}
	switch c.Kind {
	case state.Pod:
		k.podChanged(c)
	case state.Node:
		if c.What == 0 {
			return // a heartbeat: nothing the index counts
		}
		k.inbox.mu.Lock()
		k.inbox.nodes = true
		k.inbox.mu.Unlock()
		k.poke()
	case state.ReplicaSet, state.ReplicationController:
		if !c.Changed(state.Selection) {
			return
		}
		if key, ok := keyOf(c.Object()); ok {
			k.inbox.mu.Lock()
			k.inbox.workloads[key] = struct{}{}
			k.inbox.mu.Unlock()
			k.poke()
		}
	case state.SpreadPolicy, state.ClusterSpreadPolicy:
		if c.Changed(state.Spec) {
			k.policiesChanged()
		}
	case state.Namespace:
		if c.Changed(state.Labels) {
			k.policiesChanged()
		}
	}
}

// policiesChanged asks the syncer to resolve every workload's policy
// again.
func (k *Keeper) policiesChanged() {
	k.inbox.mu.Lock()
	k.inbox.policiesChanged = true
	k.inbox.mu.Unlock()
	k.poke()
}

// podChanged files a pod change that moved the pod in the index or
// changed its cost.
func (k *Keeper) podChanged(c state.Change) {
	if !c.Changed(state.Placement | state.Cost) {
		return
	}
	old, p := c.Pods()
	e := podEvent{moved: c.Changed(state.Placement)}
	if p == nil {
		p, e.gone = old, true
	}
	r := p.Record()
	e.namespace, e.name, e.labels = r.Namespace, r.Name, r.Labels
	e.cost, e.has = p.DeletionCost()
	k.inbox.mu.Lock()
	k.inbox.pods = append(k.inbox.pods, e)
	k.inbox.mu.Unlock()
	k.poke()
}

func (k *Keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// sync takes what the inbox holds and brings the orders and the writes up
// to date with it.
func (k *Keeper) sync(ctx context.Context) error {
	k.inbox.mu.Lock()
	events := k.inbox.pods
	k.inbox.pods = nil
	nodes := k.inbox.nodes
	owners := k.inbox.workloads
	k.inbox.workloads = map[workloadKey]struct{}{}
	policiesChanged := k.inbox.policiesChanged
	k.inbox.nodes, k.inbox.policiesChanged = false, false
	k.inbox.mu.Unlock()

	for key := range owners {
		if err := k.refresh(ctx, key); err != nil {
			return err
		}
	}
	if policiesChanged {
		k.applyPolicies()
	}
	if k.rescan {
		k.rescan = false
		if err := k.cfg.Pods.EachPod(func(p *cache.Pod) {
			r := p.Record()
			k.podEvent(podEvent{namespace: r.Namespace, name: r.Name, labels: r.Labels, moved: true})
		}); err != nil {
			return fmt.Errorf("listing the cached pods: %w", err)
		}
	}
	for _, e := range events {
		k.podEvent(e)
	}
	k.resolveWaiting()
	if nodes {
		if g := k.cfg.Index.NodeGeneration(); g != k.nodeGen {
			k.nodeGen = g
			for _, w := range k.workloads {
				if w.order != nil {
					k.markDirty(w)
				}
			}
		}
	}
	k.update()
	if now := time.Now(); now.Sub(k.counted) >= time.Second {
		k.counted = now
		k.metrics.setWorkloads(k.workloads)
	}
	k.metrics.pending.Set(float64(k.writes.pending()))
	return nil
}

// podEvent files one event: the pod's name with its owner, for the owner's
// next update; its other orders (those whose constraints count it) to
// update; a cost another hand changed, to be checked.
func (k *Keeper) podEvent(e podEvent) {
	key := podKey{e.namespace, e.name}
	if e.gone {
		k.writes.forget(key)
	}
	r := k.route(e.namespace, e.labels)
	if r == nil {
		return
	}
	if w := r.owner; w != nil {
		switch {
		case e.moved:
			w.names = append(w.names, e.name)
			k.markDirty(w)
			if w.state == stateWaiting && !w.seen {
				w.seen = true
				k.sampled = append(k.sampled, w)
			}
		case w.order != nil:
			// Only its cost changed: written by the keeper (the same as
			// the order's: nothing to do) or by another hand.
			if c, ok := w.order.Cost(e.name); ok && (!e.has || c != e.cost) {
				k.writes.want(key, c)
			}
		}
	}
	if e.moved {
		for _, w := range r.counting {
			k.markDirty(w)
		}
	}
}

func (k *Keeper) markDirty(w *workload) {
	if !w.dirty {
		w.dirty = true
		k.dirty = append(k.dirty, w)
	}
}

// update brings every dirty order up to date and queues the costs that
// changed.
func (k *Keeper) update() {
	dirty := k.dirty
	k.dirty = nil
	for _, w := range dirty {
		w.dirty = false
		if k.workloads[w.key] != w {
			continue // removed or replaced since
		}
		names := w.names
		w.names = nil
		if w.order == nil {
			if w.state == stateWaiting {
				// Kept until the workload is resolved.
				w.names = names
			}
			continue
		}
		slices.Sort(names)
		names = slices.Compact(names)
		for _, c := range w.order.Update(k.cfg.Index, names...) {
			k.writes.want(podKey{w.key.namespace, c.Name}, c.Cost)
		}
	}
}
