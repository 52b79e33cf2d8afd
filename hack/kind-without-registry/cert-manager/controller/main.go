// Command controller is cert-manager's controller with only what self-signed
// and CA issuance need: the Certificate controllers, the CertificateRequest
// controllers of the SelfSigned and CA issuers, the approver, and the Issuer
// and ClusterIssuer controllers. ACME, Vault, Venafi, the ingress and Gateway
// shims are not linked in (Venafi's client is not served by the module proxy).
//
// It replaces cert-manager's cmd/controller, a module of its own that the proxy
// does not serve, and accepts the flags cert-manager's chart passes.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

type options struct {
	kubeconfig, namespace, clusterResourceNamespace string
	leaderElect                                     bool
	leaderElectionNamespace                         string
	leaseDuration, renewDeadline, retryPeriod       time.Duration
	healthzAddress                                  string
	workers                                         int
}

func main() {
	// The defaults are cert-manager's (internal/apis/config/controller/v1alpha1).
	o := options{clusterResourceNamespace: "kube-system", leaderElect: true, leaderElectionNamespace: "kube-system",
		leaseDuration: 60 * time.Second, renewDeadline: 40 * time.Second, retryPeriod: 15 * time.Second,
		healthzAddress: "0.0.0.0:9403", workers: 5}
	fs := pflag.NewFlagSet("controller", pflag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig file; in-cluster config when empty")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "namespace to watch; all when empty")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", o.clusterResourceNamespace, "namespace of the Secrets that ClusterIssuers refer to")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "elect a leader before running the controllers")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", o.leaderElectionNamespace, "namespace of the leader election Lease")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", o.leaseDuration, "leader election lease duration")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", o.renewDeadline, "leader election renew deadline")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", o.retryPeriod, "leader election retry period")
	fs.StringVar(&o.healthzAddress, "healthz-listen-address", o.healthzAddress, "address of the /livez endpoint")
	fs.IntVar(&o.workers, "concurrent-workers", o.workers, "workers per controller")
	// The chart always passes these; ACME is not built in, so they have no effect.
	fs.String("acme-http01-solver-image", "", "ignored: ACME is not built in")
	fs.Int("max-concurrent-challenges", 0, "ignored: ACME is not built in")
	addKlogFlags(fs)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, o); err != nil {
		logf.Log.Error(err, "controller failed")
		os.Exit(1)
	}
}

func addKlogFlags(fs *pflag.FlagSet) {
	gofs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gofs)
	fs.AddGoFlag(gofs.Lookup("v"))
}

func run(ctx context.Context, o options) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: o.kubeconfig, Namespace: o.namespace, KubernetesAPIQPS: 20, KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{ClusterResourceNamespace: o.clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}
	cctx, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)
	healthzServer := healthz.NewServer(20 * time.Second)
	ln, err := net.Listen("tcp", o.healthzAddress)
	if err != nil {
		return fmt.Errorf("listening for /livez: %w", err)
	}
	g.Go(func() error { return healthzServer.Start(ctx, ln) })

	start := func(ctx context.Context) {
		for name, newController := range controller.Known() {
			c, err := newController(factory)
			if err != nil {
				logf.Log.Error(err, "starting controller", "controller", name)
				os.Exit(1)
			}
			g.Go(func() error { return c.Run(o.workers, ctx) })
		}
		cctx.SharedInformerFactory.Start(ctx.Done())
		cctx.KubeSharedInformerFactory.Start(ctx.Done())
		cctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	}
	if !o.leaderElect {
		start(ctx)
		return g.Wait()
	}
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaderElectionNamespace, "cert-manager-controller",
		cctx.Client.CoreV1(), cctx.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id, EventRecorder: cctx.Recorder})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	g.Go(func() error {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
			ReleaseOnCancel: true, WatchDog: healthzServer.LeaderHealthzAdaptor,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: start,
				// Losing the lease while others may lead: stop at once, as cert-manager does.
				OnStoppedLeading: func() {
					if ctx.Err() == nil {
						logf.Log.Info("leader election lost")
						os.Exit(1)
					}
				},
			},
		})
		return nil
	})
	return g.Wait()
}
