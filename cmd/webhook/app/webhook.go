package app

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/spreadguard/spreadguard/pkg/admission"
	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/config"
	"github.com/spreadguard/spreadguard/pkg/controller/policies"
	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
	"github.com/spreadguard/spreadguard/pkg/controller/templates"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// Option changes how Run builds the server. Production passes none; tests
// use them to run the server in-process against a test API server.
type Option func(*options)

type options struct {
	restConfig   *rest.Config
	host         string
	logger       *logr.Logger
	registry     prometheus.Registerer
	cacheOptions []func(*crcache.Options)
	wrapSources  func(engine.Sources) engine.Sources
	// The controller of spread health's (health.go).
	healthObserver                 func(spreadhealth.Pass)
	healthFullPass, healthCoalesce time.Duration
}

// WithRESTConfig makes the server talk to the API server of cfg instead of
// the one --kubeconfig names.
func WithRESTConfig(cfg *rest.Config) Option {
	return func(o *options) { o.restConfig = cfg }
}

// WithHost binds the webhook server to host, whatever the configuration says.
func WithHost(host string) Option {
	return func(o *options) { o.host = host }
}

// WithLogger uses log instead of a logger built from --log-level, and leaves
// the process-wide loggers alone.
func WithLogger(log logr.Logger) Option {
	return func(o *options) { o.logger = &log }
}

// WithMetricsRegistry registers spreadguard's metrics with reg instead of
// controller-runtime's registry (which /metrics serves).
func WithMetricsRegistry(reg prometheus.Registerer) Option {
	return func(o *options) { o.registry = reg }
}

// WithCacheOptions lets fn adjust the informer cache options after the
// webhook's own (for instance to hide objects from an informer in a test of
// the live-read fallback).
func WithCacheOptions(fn func(*crcache.Options)) Option {
	return func(o *options) { o.cacheOptions = append(o.cacheOptions, fn) }
}

// WithSourcesWrapper hands every request's lookups through wrap, so that a
// test can make them fail the way a live read can (a 403, an API server
// restarting) and see what the API server makes of the answer.
func WithSourcesWrapper(wrap func(engine.Sources) engine.Sources) Option {
	return func(o *options) { o.wrapSources = wrap }
}

// Run is the composition root of spreadguard-webhook: it builds the caches,
// the index, the handlers and the servers from cfg, serves until ctx is done
// (not ready from then on) and cfg.ShutdownDelay has passed, then drains
// in-flight requests and returns. Each step below is one function; the
// wiring between them is all Run does.
func Run(ctx context.Context, cfg *Config, opts ...Option) error {
	if errs := cfg.Validate(); len(errs) > 0 {
		return fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	o := options{registry: ctrlmetrics.Registry}
	for _, opt := range opts {
		opt(&o)
	}
	log, err := o.buildLogger(cfg)
	if err != nil {
		return err
	}
	cfg.WarnDeprecated(log)
	restConfig, err := o.restConfigFor(cfg)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Host: cmp.Or(o.host, cfg.Host), Port: cfg.Port, CertDir: cfg.CertDir,
		ClientCAFile: cfg.ClientCAFile, MetricsBindAddress: cfg.MetricsBindAddress, MetricsSecure: cfg.MetricsSecure,
		HealthProbeBindAddress: cfg.HealthProbeBindAddress, ShutdownDelay: cfg.ShutdownDelay.Duration}, log, o.registry)
	if err != nil {
		return err
	}
	// Everything below runs until the end of the shutdown delay, not until
	// the signal.
	ctx, cancel := srv.Serving(ctx)
	defer cancel()
	mgr, mapper, err := newManager(cfg, &o, log, restConfig, srv)
	if err != nil {
		return err
	}
	metrics, err := admission.NewMetrics(o.registry)
	if err != nil {
		return err
	}
	cluster := state.NewCluster(spread.NewIndex(), cache.NewServiceIndex())
	caches, err := addCaches(ctx, cfg, mgr, mapper, cluster, metrics, log)
	if err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("spreadguard-webhook")
	policyWatcher, err := addPolicyWatcher(mgr, cluster, log, recorder, o.registry)
	if err != nil {
		return err
	}
	sources, err := newSources(ctx, mgr, caches, policyWatcher)
	if err != nil {
		return err
	}
	engineCfg := cfg.Decisions.Config()
	if err := addSpreadHealth(mgr, &o, cfg, cluster, sources, engineCfg, caches.informers.Synced, log.WithName("spreadhealth")); err != nil {
		return err
	}
	if cfg.DeletionCost {
		if err := addKeeper(mgr, &o, cfg, cluster, caches.informers.Synced, sources, engineCfg, log.WithName("deletion-cost")); err != nil {
			return err
		}
	}
	endpoints := server.Endpoints(server.Deciders{Sources: o.sourcesFunc(sources), Engine: engineCfg, Cluster: cluster.Index(),
		Synced: caches.synced, RefuseUntilSynced: cfg.RefuseUntilSynced, FailurePolicy: cfg.FailurePolicy,
		Recorder: recorder, Metrics: metrics, Workloads: mgr.GetCache(), Scheme: mgr.GetScheme()}, log)
	if err := srv.Register(mgr, endpoints, caches.synced); err != nil {
		return err
	}
	log.Info("starting spreadguard-webhook", "port", cfg.Port, "certDir", cfg.CertDir,
		"defaultAction", cfg.DefaultAction, "excludedNamespaces", engineCfg.ExcludedNamespaces,
		"refuseUntilSynced", cfg.RefuseUntilSynced, "metricsSecure", cfg.MetricsSecure, "failurePolicy", cfg.FailurePolicy, "messageDetail", cfg.MessageDetail,
		"karpenterNodePools", caches.templateSources.Karpenter, "nodeGroupLabel", cfg.NodeGroupLabel,
		"deletionCost", cfg.DeletionCost, "deletionCostQPS", cfg.DeletionCostQPS, "deletionCostBurst", cfg.DeletionCostBurst)
	// Serve until ctx is done, then drain in-flight requests.
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// newManager builds the manager: its scheme, its cache with only what
// spreadguard reads, and srv's servers. mapper answers which optional kinds
// the API server serves: the cache's own, where its options bring one (a
// test's cluster without an API server).
func newManager(cfg *Config, o *options, log logr.Logger, restConfig *rest.Config, srv *server.Server) (_ manager.Manager, mapper meta.RESTMapper, _ error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("building the scheme: %w", err)
	}
	// Every kind spreadguard reads, its own API's and the other projects'
	// it mirrors (Karpenter's NodePool, the node classes).
	if err := cache.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	cacheOpts := cache.Options()
	// Validate has refused a key that does not parse.
	if status, _ := cfg.ClusterAutoscalerStatusKey(); status.Name != "" {
		// Registered only: the informer starts if the template watcher
		// watches the ConfigMap (watchStatus).
		cache.WatchNamed(&cacheOpts, &corev1.ConfigMap{}, status)
	}
	for _, fn := range o.cacheOptions {
		fn(&cacheOpts)
	}
	opts := ctrl.Options{Scheme: scheme, Logger: log, Cache: cacheOpts}
	srv.ManagerOptions(&opts)
	mgr, err := ctrl.NewManager(restConfig, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the manager: %w", err)
	}
	mapper = cacheOpts.Mapper
	if mapper == nil {
		mapper = mgr.GetRESTMapper()
	}
	return mgr, mapper, nil
}

// caches is what the webhook keeps of the cluster, and the two halves of
// what a check reads: the informers, which feed the cluster state, and the
// templates of the nodes an autoscaler can add, derived into it.
type caches struct {
	informers       *state.Informers
	services        *cache.ServiceIndex
	templates       *templates.Watcher
	templateSources lookup.TemplateOptions
}

// synced reports whether pods can be checked: once the caches and the
// templates are complete, since a check without the templates would refuse
// what a new node would take.
func (c *caches) synced() bool { return c.informers.Synced() && c.templates.Loaded() }

// addCaches adds the informers of every kind the webhook watches, which
// feed cluster, and the template watcher, which derives the templates into
// it. spreadguard_cache_synced is 1 once both halves are complete.
func addCaches(ctx context.Context, cfg *Config, mgr manager.Manager, mapper meta.RESTMapper, cluster *state.Cluster, metrics *admission.Metrics, log logr.Logger) (*caches, error) {
	watched, templateSources, err := watchedKinds(cfg, mapper)
	if err != nil {
		return nil, err
	}
	var halves atomic.Int32
	halfSynced := func() {
		if halves.Add(1) == 2 {
			metrics.CacheSynced.Set(1)
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
	return &caches{informers: informers, services: cluster.Services(), templates: tw, templateSources: templateSources}, nil
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
func newSources(ctx context.Context, mgr manager.Manager, c *caches, verdicts policy.Verdicts) (*lookup.Sources, error) {
	stores, err := lookup.NewInformerStores(ctx, mgr.GetCache())
	if err != nil {
		return nil, err
	}
	return lookup.NewSources(mgr.GetCache()).WithFallback(mgr.GetAPIReader(), c.informers.Synced).WithServiceIndex(c.services).
		WithInformerStores(stores).WithPolicyVerdicts(verdicts), nil
}

// sourcesFunc binds sources to each request's context, through the test's
// wrapper when there is one.
func (o *options) sourcesFunc(sources *lookup.Sources) admission.SourcesFunc {
	if wrap := o.wrapSources; wrap != nil {
		return func(ctx context.Context) engine.Sources { return wrap(sources.WithContext(ctx)) }
	}
	return func(ctx context.Context) engine.Sources { return sources.WithContext(ctx) }
}

// watchedKinds returns the kinds to watch: every kind that is not optional,
// and each optional one that the API server serves, Karpenter's NodePools
// only when cfg asks for them (config.Decisions.Templates); and where the
// templates of the nodes an autoscaler can add come from.
func watchedKinds(cfg *Config, mapper meta.RESTMapper) ([]client.Object, lookup.TemplateOptions, error) {
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

func (o *options) buildLogger(cfg *Config) (logr.Logger, error) {
	if o.logger != nil {
		return *o.logger, nil
	}
	v, err := config.ParseLogLevel(cfg.LogLevel)
	if err != nil {
		return logr.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	// zap's levels are logr verbosities negated; "error" is zap's error level.
	log := zap.New(zap.Level(zapcore.Level(-v)), zap.UseDevMode(false))
	if v < 0 {
		log = zap.New(zap.Level(zapcore.ErrorLevel), zap.UseDevMode(false))
	}
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log, nil
}

// restConfigFor is the API server of WithRESTConfig, or else the one
// --kubeconfig names, or else the one a process finds by itself
// (in-cluster, $KUBECONFIG, ~/.kube/config).
func (o *options) restConfigFor(cfg *Config) (*rest.Config, error) {
	if o.restConfig != nil {
		return o.restConfig, nil
	}
	kubeconfig := cfg.Kubeconfig
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
		}
		return c, nil
	}
	c, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("finding the API server (in-cluster, $KUBECONFIG or ~/.kube/config): %w", err)
	}
	return c, nil
}
