package app

import (
	"fmt"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/spreadguard/spreadguard/pkg/controller/deletioncost"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// addKeeper adds the keeper of deletion costs to mgr: on the replica that
// holds its Lease, it reads the cluster state and the caches the webhook
// keeps and writes the costs at cfg's rate cap. A server run outside a cluster
// without --leader-election-namespace leaves it to the replicas in the
// cluster, as it leaves the audit.
func addKeeper(mgr manager.Manager, o *options, cfg *Config, cluster *state.Cluster, synced func() bool,
	policies policy.Lister, engineCfg engine.Config, log logr.Logger) error {
	ns, ok, err := leaseNamespace(cfg, "the deletion cost keeper", log)
	if !ok {
		return err
	}
	k, err := deletioncost.New(deletioncost.Config{
		Log: log, Index: cluster.Index(), Pods: cluster,
		Changes: cluster, Reader: mgr.GetCache(),
		Policies: policies, Namespaces: engineCfg.Scope(),
		Patcher: deletioncost.SSAPatcher{Client: mgr.GetClient()},
		QPS:     cfg.DeletionCostQPS, Burst: cfg.DeletionCostBurst,
		Synced: synced, Registry: o.registry,
		RESTConfig: mgr.GetConfig(), LeaseNamespace: ns,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(k); err != nil {
		return fmt.Errorf("adding the deletion cost keeper: %w", err)
	}
	return nil
}
