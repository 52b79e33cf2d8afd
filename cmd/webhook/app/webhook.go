package app

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/spreadguard/spreadguard/pkg/admission"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/config"
	"github.com/spreadguard/spreadguard/pkg/controller"
	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/server"
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
	// The controller of spread health's (controller.Config).
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

// Run is the composition root of spreadguard-webhook: it builds the manager,
// the cluster state and its controllers (controller.Add), the handlers and
// the servers from cfg, serves until ctx is done
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
	recorder := mgr.GetEventRecorder("spreadguard-webhook")
	ctrls, err := controller.Add(ctx, mgr, controller.Config{Webhook: &cfg.WebhookConfiguration, Mapper: mapper,
		Recorder: recorder, Registry: o.registry, Log: log, CacheSynced: func() { metrics.CacheSynced.Set(1) },
		HealthObserver: o.healthObserver, HealthFullPass: o.healthFullPass, HealthCoalesce: o.healthCoalesce})
	if err != nil {
		return err
	}
	engineCfg := cfg.Decisions.Config()
	endpoints := server.Endpoints(server.Deciders{Sources: o.sourcesFunc(ctrls.Sources), Engine: engineCfg, Cluster: ctrls.Cluster.Index(),
		Synced: ctrls.Synced, RefuseUntilSynced: cfg.RefuseUntilSynced, FailurePolicy: cfg.FailurePolicy,
		Recorder: recorder, Metrics: metrics, Workloads: mgr.GetCache(), Scheme: mgr.GetScheme()}, log)
	if err := srv.Register(mgr, endpoints, ctrls.Synced); err != nil {
		return err
	}
	log.Info("starting spreadguard-webhook", "port", cfg.Port, "certDir", cfg.CertDir,
		"defaultAction", cfg.DefaultAction, "excludedNamespaces", engineCfg.ExcludedNamespaces,
		"refuseUntilSynced", cfg.RefuseUntilSynced, "metricsSecure", cfg.MetricsSecure, "failurePolicy", cfg.FailurePolicy, "messageDetail", cfg.MessageDetail,
		"karpenterNodePools", ctrls.TemplateSources.Karpenter, "nodeGroupLabel", cfg.NodeGroupLabel,
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

// sourcesFunc binds sources to each request's context, through the test's
// wrapper when there is one.
func (o *options) sourcesFunc(sources *lookup.Sources) admission.SourcesFunc {
	if wrap := o.wrapSources; wrap != nil {
		return func(ctx context.Context) engine.Sources { return wrap(sources.WithContext(ctx)) }
	}
	return func(ctx context.Context) engine.Sources { return sources.WithContext(ctx) }
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
