// Command webhook is cert-manager's webhook (internal/webhook) with the flags
// of its own options package. It replaces cert-manager's cmd/webhook, a module
// of its own that the module proxy does not serve. The --config file of the
// chart's webhook.config value is not read.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		logf.Log.Error(err, "webhook failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		return fmt.Errorf("webhook defaults: %w", err)
	}
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	options.AddConfigFlags(fs, cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	log := logf.FromContext(ctx, "webhook")
	srv, err := cmwebhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		return err
	}
	return srv.Run(logf.NewContext(ctx, log))
}
