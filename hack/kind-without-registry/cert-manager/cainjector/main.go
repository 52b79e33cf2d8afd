// Command cainjector is cert-manager's cainjector (pkg/controller/cainjector)
// injecting into webhook configurations, CRDs and APIServices from
// Certificates and Secrets, as the stock one does by default. It replaces
// cert-manager's cmd/cainjector, a module of its own that the module proxy does
// not serve, and accepts the flags cert-manager's chart passes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

type options struct {
	namespace                                 string
	leaderElect                               bool
	leaderElectionNamespace                   string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	metricsAddress                            string
}

func main() {
	// The defaults are cert-manager's (internal/apis/config/cainjector/v1alpha1).
	o := options{leaderElect: true, leaderElectionNamespace: "kube-system",
		leaseDuration: 60 * time.Second, renewDeadline: 40 * time.Second, retryPeriod: 15 * time.Second,
		metricsAddress: "0.0.0.0:9402"}
	fs := pflag.NewFlagSet("cainjector", pflag.ExitOnError)
	fs.StringVar(&o.namespace, "namespace", o.namespace, "namespace to watch; all when empty")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "elect a leader before injecting")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", o.leaderElectionNamespace, "namespace of the leader election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", o.leaseDuration, "leader election lease duration")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", o.renewDeadline, "leader election renew deadline")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", o.retryPeriod, "leader election retry period")
	fs.StringVar(&o.metricsAddress, "metrics-listen-address", o.metricsAddress, "metrics address; 0 disables it")
	gofs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gofs)
	fs.AddGoFlag(gofs.Lookup("v"))
	_ = fs.Parse(os.Args[1:])
	ctrl.SetLogger(klog.Background())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(logf.NewContext(ctx, logf.Log, "cainjector"), o); err != nil {
		logf.Log.Error(err, "cainjector failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	var namespaces map[string]cache.Config
	if o.namespace != "" {
		namespaces = map[string]cache.Config{o.namespace: {}}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// The injectors' server-side apply takes its field manager from the
	// user agent.
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// Secrets are read directly, not cached, as the stock cainjector does.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                o.leaderElect,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddress},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    o.namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}
