package app

import (
	"cmp"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// WithHealthObserver calls observe after every pass of the controller of
// spread health on this replica.
func WithHealthObserver(observe func(spreadhealth.Pass)) Option {
	return func(o *options) { o.healthObserver = observe }
}

// WithHealthPeriods sets how often the controller of spread health runs a
// full pass and how long it gathers changes before a pass (over the
// configuration's healthCoalesceDelay), so that a test need not wait
// minutes.
func WithHealthPeriods(fullPass, coalesce time.Duration) Option {
	return func(o *options) { o.healthFullPass, o.healthCoalesce = fullPass, coalesce }
}

// addSpreadHealth adds the controller of spread health to mgr when cfg
// asks for the audit: on every replica, each competing for the Lease in
// --leader-election-namespace or the pod's own namespace. A server run
// outside a cluster without --leader-election-namespace leaves the audit
// to the replicas in the cluster rather than compete for another Lease.
func addSpreadHealth(mgr manager.Manager, o *options, cfg *Config, cluster *state.Cluster, src engine.Sources, engineCfg engine.Config,
	synced func() bool, log logr.Logger) error {
	if !cfg.Health {
		return nil
	}
	leaseNS, ok, err := leaseNamespace(cfg, "spread health", log)
	if !ok {
		return err
	}
	c, err := spreadhealth.New(spreadhealth.Config{
		Cache: mgr.GetCache(), Client: mgr.GetClient(), Mapper: mgr.GetRESTMapper(), RESTConfig: mgr.GetConfig(),
		LeaseNamespace: leaseNS, Index: cluster.Index(), State: cluster, Sources: src, Engine: engineCfg, Synced: synced,
		Registry: o.registry, Log: log,
		FullPass: o.healthFullPass, Coalesce: cmp.Or(o.healthCoalesce, cfg.HealthCoalesceDelay.Duration), Observe: o.healthObserver,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("adding the controller of spread health: %w", err)
	}
	return nil
}
