package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spreadguard/spreadguard/pkg/config"
)

// RunFunc starts the server described by a valid configuration and returns
// when ctx is done or the server fails. Run is the production one; tests
// pass their own to check the parsing alone.
type RunFunc func(ctx context.Context, cfg *Config) error

// NewCommand returns the spreadguard-webhook command. It parses the flags
// and the --config file itself, so that flags given on the command line can
// win over the file, validates the result and hands it to run.
func NewCommand(ctx context.Context, run RunFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spreadguard-webhook",
		Short: "Admission webhook that enforces pod topology spread at pod creation",
		Long: `spreadguard-webhook injects the default topology spread constraints of a pod's
namespace into pods created by a Service, ReplicationController, ReplicaSet or
StatefulSet, and refuses (or warns about) pods whose hard spread constraints
cannot be met on any node.`,
		// Flags are parsed twice (around the --config file), so cobra must
		// hand over the raw arguments.
		DisableFlagParsing: true,
		SilenceUsage:       true,
		SilenceErrors:      true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := ParseConfig(args)
			if errors.Is(err, pflag.ErrHelp) {
				return cmd.Help()
			}
			if err != nil {
				return fmt.Errorf("%w\nRun '%s --help' for the flags", err, cmd.Name())
			}
			if errs := cfg.Validate(); len(errs) > 0 {
				return errors.New(FormatErrors(errs))
			}
			return run(ctx, cfg)
		},
	}
	// Registered for --help only; ParseConfig binds its own flag sets.
	NewConfig().AddFlags(cmd.Flags())
	return cmd
}

// NewServerCommand is the command of the spreadguard-webhook binary: it
// runs the server.
func NewServerCommand(ctx context.Context) *cobra.Command {
	return NewCommand(ctx, func(ctx context.Context, cfg *Config) error { return Run(ctx, cfg) })
}

// FormatErrors renders validation errors one per line, each naming the flag
// and the config file field.
func FormatErrors(errs field.ErrorList) string {
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, e := range errs {
		b.WriteString("\n  " + config.FormatError(e, flagOfField))
	}
	return b.String()
}
