// Package spreadhealth is the controller of spread health: on the replica
// that holds its Lease it runs the audit of pkg/health over the webhook's
// own cache and index, and writes what it finds into the status of the
// policies and into openreports Reports, and exports it as gauges.
//
// It reads no pod from the API server: the counts come from the index the
// webhook keeps for validation, the constraints the pods carry from the
// same index (spread.Index.Carried), the owners, Services, namespaces
// and policies from the webhook's informers, and the templates of the
// nodes an autoscaler can add from the cluster state (pkg/state), whose
// stream of changes starts its passes. A pass that finds what the
// last one found sends no request at all; one that finds a change writes
// the statuses and Reports it changes.
package spreadhealth

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/controller/leader"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// LeaseName names the Lease the replicas compete for: every replica serves
// admission requests, the holder alone audits and writes. It keeps the
// name it had when the audit lived in the server's command, so that during
// a rolling upgrade the old replicas and the new compete for one Lease,
// and never two of them write at once.
const LeaseName = "spreadguard-audit"

// The controller's timing. A change starts a pass after the coalesce
// delay, so that a rollout of a hundred pods costs one pass, not a
// hundred; a full pass runs every full pass period whatever happens.
const (
	DefaultFullPassPeriod = 5 * time.Minute
	DefaultCoalesceDelay  = 10 * time.Second
	// writesPerSecond bounds the leader's writes (status patches and
	// Reports), so that a pass over thousands of policies and namespaces
	// does not crowd the API server.
	writesPerSecond = 10
)

// Pass is what one pass did.
type Pass struct {
	// Workloads is the number of workloads audited, those that failed
	// included.
	Workloads int
	// Writes names the policies whose status the pass patched.
	Writes []string
	// Reports names the Reports (namespace/name) the pass wrote or
	// deleted.
	Reports []string
}

// Config is what the controller reads, writes and how often.
type Config struct {
	// Cache is the webhook's informer cache: the owners, Services and
	// policies are listed from it.
	Cache crcache.Cache
	// State is the cluster state: its changes start passes, and the
	// passes read the templates of the nodes an autoscaler can add from it.
	State State
	// Client writes policy status and Reports (unstructured objects).
	Client client.Client
	// Watcher lists the Reports' metadata once per leadership, and
	// watches it: a client of RESTConfig when nil, or Client when it
	// watches too.
	Watcher client.WithWatch
	// Mapper answers whether the API server serves the Report kind.
	Mapper meta.RESTMapper
	// RESTConfig reaches the API server for the Lease.
	RESTConfig *rest.Config
	// LeaseNamespace holds the Lease.
	LeaseNamespace string
	Index          *spread.Index
	Sources        engine.Sources
	Engine         engine.Config
	// Synced reports whether the cache and the index are complete: the
	// leader waits for it before its first pass.
	Synced func() bool
	// Registry registers the controller's metrics.
	Registry prometheus.Registerer
	Log      logr.Logger
	// FullPass and Coalesce default to DefaultFullPassPeriod and
	// DefaultCoalesceDelay; tests shorten them.
	FullPass, Coalesce time.Duration
	// Observe, when set, is called after every pass.
	Observe func(Pass)
}

// State is what the controller reads of the cluster state (state.Cluster)
// besides the index.
type State interface {
	Subscribe(s state.Subscriber, kinds ...state.Kind) (unsubscribe func())
	Templates() []spread.Template
	UnservedZones() []spread.UnservedZone
}

// Controller is the controller of spread health, a manager.Runnable.
type Controller struct {
	cfg Config
	// leading is read on the goroutine that tells the changes: a replica
	// that does not lead drops them at once.
	leading atomic.Bool
	// reader lists owners and policies: the cache, or a store in tests.
	reader  client.Reader
	writes  *rate.Limiter
	trigger chan struct{}
	reports *reportWriter
	metrics *Metrics
	// failing holds the error last logged per failed workload, so that a
	// workload failing pass after pass is logged once per error.
	failing map[string]string
}

var (
	_ manager.LeaderElectionRunnable = (*Controller)(nil)
	_ state.Subscriber               = (*Controller)(nil)
)

// New returns the controller of cfg, subscribed to cfg.State, and
// registers its metrics.
func New(cfg Config) (*Controller, error) {
	if cfg.State == nil {
		return nil, errors.New("the controller of spread health needs the cluster state")
	}
	if cfg.FullPass <= 0 {
		cfg.FullPass = DefaultFullPassPeriod
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = DefaultCoalesceDelay
	}
	if cfg.Watcher == nil {
		if w, ok := cfg.Client.(client.WithWatch); ok {
			cfg.Watcher = w
		} else if cfg.RESTConfig != nil {
			w, err := client.NewWithWatch(cfg.RESTConfig, client.Options{Mapper: cfg.Mapper})
			if err != nil {
				return nil, fmt.Errorf("a client to watch the Reports: %w", err)
			}
			cfg.Watcher = w
		} else {
			return nil, errors.New("a client to watch the Reports: neither a Watcher nor a RESTConfig")
		}
	}
	metrics, err := NewMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:     cfg,
		reader:  cfg.Cache,
		writes:  rate.NewLimiter(writesPerSecond, writesPerSecond),
		trigger: make(chan struct{}, 1),
		reports: &reportWriter{client: cfg.Client, watcher: cfg.Watcher, mapper: cfg.Mapper},
		metrics: metrics,
		failing: map[string]string{},
	}
	c.reports.changed = c.poke
	cfg.State.Subscribe(c, passKinds...)
	return c, nil
}

// NeedLeaderElection is false: the manager starts the controller on every
// replica, and the controller elects its leader itself on its own Lease
// (pkg/controller/leader). The manager's election would stop the whole
// process, admission included, when the Lease cannot be renewed (an API
// server restarting): losing the Lease must stop the audit, never
// admission.
func (c *Controller) NeedLeaderElection() bool { return false }

// Start competes for the Lease until ctx is done, and audits while it
// holds it.
func (c *Controller) Start(ctx context.Context) error {
	return leader.Run(ctx, c.cfg.RESTConfig, leader.Lease{Namespace: c.cfg.LeaseNamespace, Name: LeaseName}, c.cfg.Log, c.lead)
}

// lead runs passes until ctx is done (the Lease is lost, or the server
// stops): one at once, one after each burst of changes, one every full
// pass period.
func (c *Controller) lead(ctx context.Context) error {
	log := c.cfg.Log
	log.Info("leading: auditing the workloads the policies select")
	// Another replica may have led in between: nothing known is kept, and
	// a replica that no longer leads exports no gauges nor watches the
	// Reports.
	c.reports.reset()
	clear(c.failing)
	defer c.metrics.publish(nil, nil)
	defer c.reports.reset()
	if !cache.WaitSynced(ctx, c.cfg.Synced) {
		return nil
	}
	c.leading.Store(true)
	defer c.leading.Store(false)
	full := time.NewTicker(c.cfg.FullPass)
	defer full.Stop()
	c.pass(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-full.C:
			c.pass(ctx)
		case <-c.trigger:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(c.cfg.Coalesce):
			}
			// The events of the delay are in this pass.
			select {
			case <-c.trigger:
			default:
			}
			c.pass(ctx)
		}
	}
}

// Changed asks for a pass after a change that may change what a pass
// finds, while this replica leads.
func (c *Controller) Changed(ch state.Change) {
	if c.leading.Load() && mayChangeThePass(ch) {
		c.poke()
	}
}

// mayChangeThePass reports whether a change may change what a pass finds:
// pods, nodes, owners, Services, namespaces and policies changing can all
// change a count or a condition. Most updates cannot (state.Change.What
// is then empty of what a pass reads): a pod's status conditions, a
// node's heartbeat, a policy's status (the controller's own write), a
// ReplicaSet's status (each pod turning Ready writes one); passing over
// them keeps a quiet cluster from being audited every few seconds. A
// pod's deletion cost is the keeper's, not the audit's.
func mayChangeThePass(ch state.Change) bool {
	return slices.Contains(passKinds, ch.Kind) && ch.Changed(state.All&^state.Cost)
}

// passKinds are the kinds a pass reads.
var passKinds = []state.Kind{state.Pod, state.Node, state.SpreadPolicy, state.ClusterSpreadPolicy, state.Deployment, state.ReplicaSet,
	state.StatefulSet, state.ReplicationController, state.Service, state.Namespace}

// poke asks for a pass; requests made while one is pending are one.
func (c *Controller) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

func (c *Controller) pass(ctx context.Context) {
	p := Pass{}
	if err := c.run(ctx, &p); err != nil && ctx.Err() == nil {
		c.cfg.Log.Error(err, "the pass did not write everything; the next one tries again")
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(p)
	}
}

// run audits every workload and writes what changed. A workload that
// cannot be audited, a status or a Report that cannot be written is
// counted and logged, and the pass goes on: the errors are returned
// together.
func (c *Controller) run(ctx context.Context, p *Pass) error {
	owners, err := c.owners(ctx)
	if err != nil {
		return err
	}
	results := health.Run(c.cfg.Index, c.cfg.Sources, c.cfg.Engine, health.Workloads(owners, c.cfg.Index))
	p.Workloads = len(results)
	c.noteFailures(results)
	reports := health.Reports(results, c.cfg.Engine.MessageDetail)
	conds, statusErr := c.writeStatus(ctx, health.Tally(results), reports, p)
	c.metrics.publish(results, conds)
	reportErr := c.reports.write(ctx, reports, c.terminating, c.writes.Wait, p, c.metrics)
	return errors.Join(statusErr, reportErr)
}

// owners lists the objects that own pods from the cache: the objects of
// every workload kind, and the Services.
func (c *Controller) owners(ctx context.Context) (health.Owners, error) {
	var o health.Owners
	for _, k := range workload.Kinds {
		list := k.NewList()
		if err := c.reader.List(ctx, list); err != nil {
			return health.Owners{}, fmt.Errorf("listing the %s: %w", k.Resource, err)
		}
		items, err := k.Items(list)
		if err != nil {
			return health.Owners{}, err
		}
		o.Workloads = append(o.Workloads, items...)
	}
	var services v1.ServiceList
	if err := c.reader.List(ctx, &services); err != nil {
		return health.Owners{}, fmt.Errorf("listing the services: %w", err)
	}
	o.Services = workload.Pointers(services.Items)
	return o, nil
}

// noteFailures counts the workloads that could not be audited, and logs
// each once per error it fails with.
func (c *Controller) noteFailures(results []health.Result) {
	seen := map[string]bool{}
	for _, r := range results {
		if r.State != health.StateError {
			continue
		}
		c.metrics.failed(objectWorkload)
		key := r.Kind + " " + r.Namespace + "/" + r.Name
		seen[key] = true
		if c.failing[key] != r.Error {
			c.failing[key] = r.Error
			c.cfg.Log.Error(errors.New(r.Error), "cannot audit a workload; its Report says so, and the others are audited",
				"kind", r.Kind, "namespace", r.Namespace, "name", r.Name)
		}
	}
	maps.DeleteFunc(c.failing, func(key, _ string) bool { return !seen[key] })
}

// terminating reports whether namespace is being deleted: nothing can be
// created in it.
func (c *Controller) terminating(namespace string) bool {
	ns, err := c.cfg.Sources.Namespace(namespace)
	return err == nil && ns != nil && ns.DeletionTimestamp != nil
}
