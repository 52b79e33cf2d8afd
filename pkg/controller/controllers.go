// Package controller composes the cluster state and the controllers that
// subscribe to it: the informers that feed the state, the template
// watcher, the policy watcher, the controller of spread health and the
// keeper of deletion costs, each added to the webhook's manager by its own
// package's constructor. spreadguard-webhook's composition root
// (cmd/webhook/app) calls Add once.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/config"
	"github.com/spreadguard/spreadguard/pkg/controller/deletioncost"
	"github.com/spreadguard/spreadguard/pkg/controller/leader"
	"github.com/spreadguard/spreadguard/pkg/controller/policies"
	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
	"github.com/spreadguard/spreadguard/pkg/controller/templates"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// Config is what Add needs besides the manager.
type Config struct {
	// Webhook is the webhook's configuration, validated.
	Webhook *config.WebhookConfiguration
	// Mapper answers which optional kinds the API server serves.
	Mapper   meta.RESTMapper
	Recorder events.EventRecorder
	Registry prometheus.Registerer
	Log      logr.Logger
	// CacheSynced is called once, when both the informers and the
	// templates are complete.
	CacheSynced func()

	// The controller of spread health's: called after every pass on this
	// replica, and its periods (zero: its defaults and the configuration's
	// auditCoalesceDelay).
	HealthObserver                 func(spreadhealth.Pass)
	HealthFullPass, HealthCoalesce time.Duration
}

// Controllers is what the webhook keeps of the cluster, and the two halves
// of what a check reads: the informers, which feed the cluster state, and
// the templates of the nodes an autoscaler can add, derived into it.
type Controllers struct {
	Cluster   *state.Cluster
	Informers *state.Informers
	Templates *templates.Watcher
	// TemplateSources says where the templates come from.
	TemplateSources lookup.TemplateOptions
	// Sources are the lookups of every request (newSources).
	Sources *lookup.Sources
}

// Synced reports whether pods can be checked: once the caches and the
// templates are complete, since a check without the templates would refuse
// what a new node would take.
func (c *Controllers) Synced() bool { return c.Informers.Synced() && c.Templates.Loaded() }

// Add builds the cluster state and adds to mgr the informers that feed it,
// the template watcher, the policy watcher and, as cfg.Webhook asks, the
// controller of spread health and the keeper of deletion costs.
func Add(ctx context.Context, mgr manager.Manager, cfg Config) (*Controllers, error) {
	cluster := state.NewCluster(spread.NewIndex(), cache.NewServiceIndex())
	c, err := addCaches(ctx, cfg.Webhook, mgr, cfg.Mapper, cluster, cfg.CacheSynced, cfg.Log)
	if err != nil {
		return nil, err
	}
	policyWatcher, err := addPolicyWatcher(mgr, cluster, cfg.Log, cfg.Recorder, cfg.Registry)
	if err != nil {
		return nil, err
	}
	if c.Sources, err = newSources(ctx, mgr, c, policyWatcher); err != nil {
		return nil, err
	}
	engineCfg := cfg.Webhook.Decisions.Config()
	if err := addSpreadHealth(mgr, &cfg, cfg.Webhook, cluster, c.Sources, engineCfg, c.Informers.Synced, cfg.Log.WithName("spreadhealth")); err != nil {
		return nil, err
	}
	if cfg.Webhook.DeletionCost {
		if err := addKeeper(mgr, &cfg, cfg.Webhook, cluster, c.Informers.Synced, c.Sources, engineCfg, cfg.Log.WithName("deletion-cost")); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// addCaches adds the informers of every kind the webhook watches, which
// feed cluster, and the template watcher, which derives the templates into
// it. cacheSynced is called once both halves are complete.
func addCaches(ctx context.Context, cfg *config.WebhookConfiguration, mgr manager.Manager, mapper meta.RESTMapper, cluster *state.Cluster, cacheSynced func(), log logr.Logger) (*Controllers, error) {
	watched, templateSources, err := watchedKinds(cfg, mapper)
	if err != nil {
		return nil, err
	}
	var halves atomic.Int32
	halfSynced := func() {
		if halves.Add(1) == 2 && cacheSynced != nil {
			cacheSynced()
		}
	}
	if status, err := watchStatus(ctx, mgr.GetAPIReader(), templateSources.ClusterAutoscalerStatus, log); err != nil {
		return nil, err
	} else if status {
		watched = append(watched, &corev1.ConfigMap{})
	} else {
		templateSources.ClusterAutoscalerStatus = types.NamespacedName{}
	}
	informers, err := cluster.Inform(ctx, mgr.GetCache(), watched, halfSynced)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(informers); err != nil {
		return nil, fmt.Errorf("adding the cluster state's informers: %w", err)
	}
	tw := templates.New(mgr.GetCache(), cluster, templateSources, cluster.SetDerived, halfSynced)
	if err := mgr.Add(tw); err != nil {
		return nil, fmt.Errorf("adding the template watcher: %w", err)
	}
	return &Controllers{Cluster: cluster, Informers: informers, Templates: tw, TemplateSources: templateSources}, nil
}

// watchStatus reports whether the webhook may watch cluster-autoscaler's
// status ConfigMap key names, found or not: it lists it as its informer
// would, by a field selector on its name. Where that is forbidden (RBAC
// without the chart's Role), an informer would never sync and the webhook
// never be ready: the status is then not read, and that is logged.
func watchStatus(ctx context.Context, r client.Reader, key types.NamespacedName, log logr.Logger) (bool, error) {
	if key.Name == "" {
		return false, nil
	}
	err := r.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(key.Namespace),
		client.MatchingFieldsSelector{Selector: cache.NameSelector(key.Name)}, client.Limit(1))
	switch {
	case apierrors.IsForbidden(err):
		log.Error(err, "cluster-autoscaler's status is not read: grant get, list and watch on that ConfigMap "+
			"(the chart's Role does), or set --cluster-autoscaler-status to empty; every node group is taken to be able to grow", "configMap", key)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("listing cluster-autoscaler's status ConfigMap %s: %w", key, err)
	}
	return true, nil
}

// addPolicyWatcher adds the controller that judges every stored policy once
// per generation, as cluster tells of them; requests read its verdicts.
func addPolicyWatcher(mgr manager.Manager, cluster *state.Cluster, log logr.Logger, recorder events.EventRecorder, reg prometheus.Registerer) (*policies.Watcher, error) {
	w, err := policies.New(cluster, log.WithName("policies"), recorder, reg)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(w); err != nil {
		return nil, fmt.Errorf("adding the policy watcher: %w", err)
	}
	return w, nil
}

// newSources returns the lookups of every request. Owners, namespaces and
// policies are read from the informers' stores themselves, Services from
// the Service index: every mutation reads them. What the cache has not seen
// yet is read from the API server.
func newSources(ctx context.Context, mgr manager.Manager, c *Controllers, verdicts policy.Verdicts) (*lookup.Sources, error) {
	stores, err := lookup.NewInformerStores(ctx, mgr.GetCache())
	if err != nil {
		return nil, err
	}
	return lookup.NewSources(mgr.GetCache()).WithFallback(mgr.GetAPIReader(), c.Informers.Synced).WithServiceIndex(c.Cluster.Services()).
		WithInformerStores(stores).WithPolicyVerdicts(verdicts), nil
}

// watchedKinds returns the kinds to watch: every kind that is not optional,
// and each optional one that the API server serves, Karpenter's NodePools
// only when cfg asks for them (config.Decisions.Templates); and where the
// templates of the nodes an autoscaler can add come from.
func watchedKinds(cfg *config.WebhookConfiguration, mapper meta.RESTMapper) ([]client.Object, lookup.TemplateOptions, error) {
	served := map[schema.GroupVersionKind]bool{}
	for _, k := range cache.InformedKinds {
		if !k.Optional {
			continue
		}
		_, err := mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
		switch {
		case err == nil:
			served[k.GVK] = true
		case meta.IsNoMatchError(err):
		default:
			return nil, lookup.TemplateOptions{}, fmt.Errorf("asking the API server whether it serves %s: %w", k.GVK, err)
		}
	}
	nodePools := karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodePool)
	templateSources, err := cfg.Decisions.Templates(served[v1alpha1.GroupVersion.WithKind(v1alpha1.KindNodeTemplate)], served[nodePools])
	if err != nil {
		return nil, lookup.TemplateOptions{}, err
	}
	watched := cache.Watched(func(k cache.InformedKind) bool {
		return served[k.GVK] && (k.GVK != nodePools || templateSources.Karpenter)
	})
	return watched, templateSources, nil
}

// addSpreadHealth adds the controller of spread health to mgr when cfg
// asks for the audit: on every replica, each competing for the Lease in
// --leader-election-namespace or the pod's own namespace. A server run
// outside a cluster without --leader-election-namespace leaves the audit
// to the replicas in the cluster rather than compete for another Lease.
func addSpreadHealth(mgr manager.Manager, o *Config, cfg *config.WebhookConfiguration, cluster *state.Cluster, src engine.Sources, engineCfg engine.Config,
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
		Registry: o.Registry, Log: log,
		FullPass: o.HealthFullPass, Coalesce: cmp.Or(o.HealthCoalesce, cfg.HealthCoalesceDelay.Duration), Observe: o.HealthObserver,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("adding the controller of spread health: %w", err)
	}
	return nil
}

// addKeeper adds the keeper of deletion costs to mgr: on the replica that
// holds its Lease, it reads the cluster state and the caches the webhook
// keeps and writes the costs at cfg's rate cap. A server run outside a cluster
// without --leader-election-namespace leaves it to the replicas in the
// cluster, as it leaves the audit.
func addKeeper(mgr manager.Manager, o *Config, cfg *config.WebhookConfiguration, cluster *state.Cluster, synced func() bool,
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
		Synced: synced, Registry: o.Registry,
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

// leaseNamespace returns the namespace of the Lease of the leader-only
// controller what names ("spread health", "the deletion cost keeper"). ok is
// false, and logged, for a server run outside a cluster without
// --leader-election-namespace: it leaves that controller to the replicas
// in the cluster rather than compete for another Lease.
func leaseNamespace(cfg *config.WebhookConfiguration, what string, log logr.Logger) (ns string, ok bool, err error) {
	ns, err = leader.Namespace(cfg.LeaderElectionNamespace)
	if errors.Is(err, leader.ErrNoNamespace) {
		log.Info(what + " is off: outside a cluster, it needs --leader-election-namespace")
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("finding the namespace of %s's Lease: %w", what, err)
	}
	return ns, true, nil
}
