package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/admission"
	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// The HTTP paths of the admission endpoints, as the chart's webhook
// configurations name them.
const (
	PathMutatePod                   = "/mutate-v1-pod"
	PathValidatePod                 = "/validate-v1-pod"
	PathValidateSpreadPolicy        = "/validate-spreadguard-io-v1alpha1-spreadpolicy"
	PathValidateClusterSpreadPolicy = "/validate-spreadguard-io-v1alpha1-clusterspreadpolicy"
	// PathForecastWorkload answers Deployments, StatefulSets, ReplicaSets
	// and ReplicationControllers (and their scale) with forecast warnings.
	PathForecastWorkload = "/forecast-workload"
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
	// The audit's (audit.go).
	auditObserver                func(AuditPass)
	auditFullPass, auditCoalesce time.Duration
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
// in-flight requests and returns.
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
	// Everything below runs until the end of the shutdown delay, not until
	// the signal (shutdown.go).
	stop := newShutdown(cfg.ShutdownDelay.Duration)
	ctx, cancel := stop.serving(ctx, log)
	defer cancel()
	restConfig := o.restConfig
	if restConfig == nil {
		if restConfig, err = loadRESTConfig(cfg.Kubeconfig); err != nil {
			return err
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	if err := karpenterv1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}

	// Read the certificate now, so that a missing or broken one is a clear
	// error at start rather than a failed TLS handshake later.
	certs, err := certwatcher.New(filepath.Join(cfg.CertDir, "tls.crt"), filepath.Join(cfg.CertDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("loading the serving certificate from --cert-dir %s: %w", cfg.CertDir, err)
	}

	// The admission endpoints and the secure metrics present the same
	// certificate, reloaded from disk.
	servingTLS := []func(*tls.Config){secureTLS, func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}
	handshakes, err := countHandshakes(o.registry)
	if err != nil {
		return err
	}
	webhookTLS := append(slices.Clone(servingTLS), handshakes)
	if cfg.ClientCAFile != "" {
		pool, err := loadClientCAs(cfg.ClientCAFile)
		if err != nil {
			return err
		}
		webhookTLS = append(webhookTLS, func(c *tls.Config) {
			c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
		})
	}

	cacheOpts := cache.Options()
	for _, fn := range o.cacheOptions {
		fn(&cacheOpts)
	}
	audit := auditOn(cfg, log)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Cache:                  cacheOpts,
		Metrics:                metricsOptions(cfg, servingTLS),
		HealthProbeBindAddress: cfg.HealthProbeBindAddress,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    cmp.Or(o.host, cfg.Host),
			Port:    cfg.Port,
			CertDir: cfg.CertDir,
			TLSOpts: webhookTLS,
		}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.Add(certs); err != nil {
		return fmt.Errorf("adding the certificate watcher: %w", err)
	}

	metrics, err := admission.NewMetrics(o.registry)
	if err != nil {
		return err
	}
	ix := spread.NewIndex()
	services := cache.NewServiceIndex()
	// The cache's mapper, where its options bring one (a test's cluster
	// without an API server), answers which optional kinds are served.
	mapper := cacheOpts.Mapper
	if mapper == nil {
		mapper = mgr.GetRESTMapper()
	}
	watched, served, karpenter, err := watchedKinds(cfg, mapper)
	if err != nil {
		return err
	}
	// spreadguard_cache_synced is 1 once the caches have synced and the
	// templates have been derived: the two halves of what a check reads.
	var halves atomic.Int32
	halfSynced := func() {
		if halves.Add(1) == 2 {
			metrics.CacheSynced.Set(1)
		}
	}
	tracker, err := cache.NewTracker(ctx, mgr.GetCache(), watched, ix, services, halfSynced)
	if err != nil {
		return err
	}
	if err := mgr.Add(tracker); err != nil {
		return fmt.Errorf("adding the cache tracker: %w", err)
	}
	templateOpts := lookup.TemplateOptions{NodeTemplates: served[v1alpha1.GroupVersion.WithKind(v1alpha1.KindNodeTemplate)],
		Karpenter: karpenter, NodeGroupLabel: cfg.NodeGroupLabel}
	templates := cache.NewTemplateWatcher(mgr.GetCache(), func(ctx context.Context) ([]spread.Template, error) {
		return lookup.Templates(ctx, mgr.GetCache(), templateOpts)
	}, ix.SetTemplates, templateInterval, halfSynced)
	if err := watchTemplateSources(ctx, mgr.GetCache(), watched, templates); err != nil {
		return err
	}
	if err := mgr.Add(templates); err != nil {
		return fmt.Errorf("adding the template watcher: %w", err)
	}
	// Pods are checked once the caches and the templates are complete: a
	// check without the templates would refuse what a new node would take.
	synced := func() bool { return tracker.Synced() && templates.Loaded() }
	recorder := mgr.GetEventRecorder("spreadguard-webhook")
	policyWatcher := cache.NewPolicyWatcher(log.WithName("policies"), recorder, func(kind string, n int) {
		metrics.InvalidPolicies.WithLabelValues(kind).Set(float64(n))
	})
	for _, obj := range []client.Object{&v1alpha1.SpreadPolicy{}, &v1alpha1.ClusterSpreadPolicy{}} {
		inf, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(policyWatcher.Handler()); err != nil {
			return fmt.Errorf("watching %T for rejected policies: %w", obj, err)
		}
	}

	// Owners, namespaces and policies are read from the informers' stores
	// themselves: every mutation reads them.
	stores, err := lookup.NewInformerStores(ctx, mgr.GetCache())
	if err != nil {
		return err
	}
	sources := lookup.NewSources(mgr.GetCache()).WithFallback(mgr.GetAPIReader(), tracker.Synced).WithServiceIndex(services).
		WithInformerStores(stores).WithPolicyVerdicts(policyWatcher)
	sourcesFor := func(ctx context.Context) engine.Sources { return sources.WithContext(ctx) }
	if wrap := o.wrapSources; wrap != nil {
		sourcesFor = func(ctx context.Context) engine.Sources { return wrap(sources.WithContext(ctx)) }
	}
	engineCfg := engine.Config{DefaultAction: cfg.DefaultAction, ExcludedNamespaces: cfg.ExcludedNamespaceSet(),
		MessageDetail: cfg.MessageDetail}
	if audit {
		if err := addAudit(mgr, &o, cfg.LeaderElectionNamespace, ix, sources, engineCfg, tracker.Synced, log.WithName("audit")); err != nil {
			return err
		}
	}
	decoder := ctrladmission.NewDecoder(scheme)
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	policies := v1alpha1.GroupVersion.WithResource("spreadpolicies")
	clusterPolicies := v1alpha1.GroupVersion.WithResource("clusterspreadpolicies")
	// The mutating endpoint reviews CREATEs only, whose reviews carry one
	// object; the others also review UPDATEs, which carry two.
	endpointOptions := map[string][]admission.EndpointOption{
		PathMutatePod: {admission.ForResource(pods, true), admission.WithMaxBodyBytes(admission.MaxCreateReviewBytes)},
		// Also the UPDATE that removes a gated pod's last scheduling gate.
		PathValidatePod:                 {admission.ForResource(pods, true)},
		PathValidateSpreadPolicy:        {admission.ForResource(metav1.GroupVersionResource(policies), true)},
		PathValidateClusterSpreadPolicy: {admission.ForResource(metav1.GroupVersionResource(clusterPolicies), false)},
	}
	handlers := map[string]ctrladmission.Handler{
		PathMutatePod: &admission.PodMutator{
			PodWebhook: admission.PodWebhook{Sources: sourcesFor, Config: engineCfg, FailurePolicy: cfg.FailurePolicy, Metrics: metrics},
		},
		PathValidatePod: &admission.PodValidator{
			PodWebhook:        admission.PodWebhook{Sources: sourcesFor, Config: engineCfg, FailurePolicy: cfg.FailurePolicy, Metrics: metrics},
			Checker:           ix,
			Synced:            synced,
			RefuseUntilSynced: cfg.RefuseUntilSynced,
			Recorder:          recorder,
		},
		PathValidateSpreadPolicy:        admission.NewSpreadPolicyValidator(decoder, metrics),
		PathValidateClusterSpreadPolicy: admission.NewClusterSpreadPolicyValidator(decoder, metrics),
		// A scale carries no template: the workload is read from the API
		// server, so no Deployment is cached.
		PathForecastWorkload: &admission.WorkloadForecaster{Sources: sourcesFor, Config: engineCfg, Cluster: ix,
			Synced: synced, Workloads: mgr.GetAPIReader(), Metrics: metrics},
	}
	server := mgr.GetWebhookServer()
	for path, h := range handlers {
		server.Register(path, stop.closeWhenStopping(
			admission.NewEndpoint(h, log.WithName("admission").WithValues("webhook", path), endpointOptions[path]...)))
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", func(*http.Request) error {
		if !synced() {
			return errors.New("the informer caches have not synced yet")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", server.StartedChecker()); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("shutdown", stop.readyz); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}

	log.Info("starting spreadguard-webhook", "port", cfg.Port, "certDir", cfg.CertDir,
		"defaultAction", cfg.DefaultAction, "excludedNamespaces", engineCfg.ExcludedNamespaces,
		"refuseUntilSynced", cfg.RefuseUntilSynced, "metricsSecure", cfg.MetricsSecure, "failurePolicy", cfg.FailurePolicy, "messageDetail", cfg.MessageDetail,
		"karpenterNodePools", karpenter, "nodeGroupLabel", cfg.NodeGroupLabel, "shutdownDelay", cfg.ShutdownDelay.Duration)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// templateInterval is the shortest time between two derivations of the
// templates of the nodes an autoscaler can add.
const templateInterval = time.Second

// watchedKinds returns the kinds to watch: every kind that is not optional,
// and each optional one that the API server serves (served), Karpenter's
// NodePools only when cfg asks for them. karpenter says whether NodePools
// are read.
// --autoscaler-karpenter=true without the NodePool API is an error: the
// setting says Karpenter runs, and it cannot be read.
func watchedKinds(cfg *Config, mapper meta.RESTMapper) (_ []client.Object, served map[schema.GroupVersionKind]bool, karpenter bool, _ error) {
	served = map[schema.GroupVersionKind]bool{}
	for _, k := range cache.Kinds {
		if !k.Optional {
			continue
		}
		_, err := mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
		switch {
		case err == nil:
			served[k.GVK] = true
		case meta.IsNoMatchError(err):
		default:
			return nil, nil, false, fmt.Errorf("asking the API server whether it serves %s: %w", k.GVK, err)
		}
	}
	nodePools := karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodePool)
	switch cfg.AutoscalerKarpenter {
	case ToggleTrue:
		if !served[nodePools] {
			return nil, nil, false, fmt.Errorf("--autoscaler-karpenter is true, but the API server does not serve %s: install Karpenter's CRDs or set it to auto", nodePools)
		}
		karpenter = true
	case ToggleAuto:
		karpenter = served[nodePools]
	}
	watched := cache.Watched(func(k cache.Kind) bool {
		return served[k.GVK] && (k.GVK != nodePools || karpenter)
	})
	return watched, served, karpenter, nil
}

// watchTemplateSources has the template watcher hear of every change to
// what the templates are derived from.
func watchTemplateSources(ctx context.Context, c crcache.Cache, watched []client.Object, w *cache.TemplateWatcher) error {
	for _, obj := range watched {
		switch obj.(type) {
		case *v1.Node, *v1alpha1.NodeTemplate, *karpenterv1.NodePool, *v1alpha1.SpreadPolicy, *v1alpha1.ClusterSpreadPolicy:
		default:
			continue
		}
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("getting the informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(w.Handler()); err != nil {
			return fmt.Errorf("watching %T for the templates of new nodes: %w", obj, err)
		}
	}
	return nil
}

// loadClientCAs reads the CAs of --client-ca-file.
func loadClientCAs(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading --client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--client-ca-file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// metricsOptions serves /metrics as cfg says: with MetricsSecure over HTTPS
// with the serving certificate, reloaded as the webhook's is, behind
// controller-runtime's authentication and authorization filter (as
// kubebuilder's scaffold does), so that the counts of denials per namespace
// are not for anyone who can reach the pod.
func metricsOptions(cfg *Config, servingTLS []func(*tls.Config)) metricsserver.Options {
	o := metricsserver.Options{BindAddress: cfg.MetricsBindAddress}
	if cfg.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.TLSOpts = servingTLS
	}
	return o
}

// secureTLS sets TLS 1.2 as the minimum and turns HTTP/2 off: HTTP/2's
// stream handling has been the subject of denial-of-service advisories
// (CVE-2023-44487, CVE-2023-39325), and the apiserver speaks HTTP/1.1 to
// webhooks just as well.
func secureTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}

func (o *options) buildLogger(cfg *Config) (logr.Logger, error) {
	if o.logger != nil {
		return *o.logger, nil
	}
	v, err := ParseLogLevel(cfg.LogLevel)
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

func loadRESTConfig(kubeconfig string) (*rest.Config, error) {
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
