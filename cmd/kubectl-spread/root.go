package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/config"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Exit codes: the contract scripts and CI rely on.
const (
	exitAllowed  = 0
	exitDenied   = 1
	exitBadInput = 2
)

const name = "kubectl-spread"

// run is the whole command: it parses args, does the work and returns the
// exit code, writing only to stdout and stderr, so tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, stdout, stderr, connect)
}

// runWith is run with the way explain reaches a cluster given, so that
// tests can hand it fake clients.
func runWith(args []string, stdout, stderr io.Writer, connect connectFunc) int {
	code := exitAllowed
	root := newRootCommand(&code, connect)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		// One line, so that a script can show it as is.
		fmt.Fprintf(stderr, "%s: %s\n", name, strings.Join(strings.Fields(err.Error()), " "))
		return exitBadInput
	}
	return code
}

func newRootCommand(code *int, connect connectFunc) *cobra.Command {
	root := &cobra.Command{
		Use:   name,
		Short: "Would spreadguard admit this pod, and why not?",
		Long: `kubectl-spread runs spreadguard's admission engine, the one the webhook runs,
on a pod: which SpreadPolicy applies, which topology spread constraints it
injects, how many matching pods each topology domain holds, and whether any
node can take the pod without exceeding maxSkew.

Exit codes: 0 allowed, 1 denied, 2 bad input.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// A bare `kubectl spread` is a usage error, not a success.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("a command is required: check, explain or plan (see --help)")
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.AddCommand(newCheckCommand(code, connect), newExplainCommand(code, connect), newStatusCommand(connect), newPlanCommand(code, connect))
	return root
}

// engineFlags are the settings that change a decision: the webhook's own
// flags (config.Decisions), or with --from-release the configuration of an
// installed release, read from the ConfigMap its webhook reads, with the
// flags given on the command line winning over it. So a check decides as
// the installed webhook does.
type engineFlags struct {
	// flagged is what the flags are bound to; its value is their default.
	flagged          config.Decisions
	release          string
	releaseNamespace string
}

// newEngineFlags returns the webhook's defaults but for the message
// detail: kubectl-spread is run by whoever operates the cluster, so its
// messages name nodes unless told, or a release says, otherwise.
func newEngineFlags() engineFlags {
	e := config.NewDecisions()
	e.MessageDetail = spread.DetailNodes
	return engineFlags{flagged: e}
}

func (f *engineFlags) register(cmd *cobra.Command) {
	f.flagged.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&f.release, "from-release", "",
		"read the webhook's settings ("+strings.Join(engineFlagList(), ", ")+
			") from the installed Helm release of this name, from the ConfigMap its webhook reads; those flags, when given, win")
	cmd.Flags().StringVar(&f.releaseNamespace, "release-namespace", "",
		"the namespace of --from-release's release (default: the kubeconfig context's)")
}

// engineFlagList is the flags of config.Decisions, sorted as --help sorts
// them: every setting --from-release reads.
func engineFlagList() []string {
	return slices.Sorted(maps.Values(config.DecisionFlagNames()))
}

// kubeFlags say which cluster the kubeconfig points at.
type kubeFlags struct {
	kubeconfig string
	context    string
}

func (k *kubeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	cmd.Flags().StringVar(&k.context, "context", "", "the kubeconfig context (default: the current one)")
}

// settings returns the engine's configuration and where the templates of
// the nodes an autoscaler can add come from: the flags', or the release's
// with the flags given winning. Every setting is validated, and each error
// names the flag, or the release's ConfigMap, it came from.
func (f *engineFlags) settings(cmd *cobra.Command, kube kubeFlags, connect connectFunc) (engine.Config, lookup.TemplateOptions, error) {
	e, source := f.flagged, ""
	if f.release != "" {
		c, err := connect(kube.kubeconfig, kube.context)
		if err != nil {
			return engine.Config{}, lookup.TemplateOptions{}, err
		}
		ns := cmp.Or(f.releaseNamespace, c.namespace, metav1.NamespaceDefault)
		cfg, src, err := config.FromRelease(cmd.Context(), c.reader, ns, f.release)
		if err != nil {
			return engine.Config{}, lookup.TemplateOptions{}, err
		}
		e, source = cfg.Decisions, src
		e.Override(&f.flagged, cmd.Flags())
	}
	if errs := e.Validate(); len(errs) > 0 {
		names := config.DecisionFlagNames()
		msgs := make([]string, len(errs))
		for i, err := range errs {
			if flag := config.FlagOf(err, names); source != "" && !cmd.Flags().Changed(strings.TrimPrefix(flag, "--")) {
				msgs[i] = fmt.Sprintf("invalid %s in %s: %s", err.Field, source, err.ErrorBody())
			} else {
				msgs[i] = "invalid " + config.FormatError(err, names)
			}
		}
		return engine.Config{}, lookup.TemplateOptions{}, errors.New(strings.Join(msgs, "; "))
	}
	// A file, or a cluster's listing, holds the NodeTemplates and NodePools
	// there are: reading them is what the webhook does where they are served.
	templates, err := e.Templates(true, true)
	if err != nil {
		return engine.Config{}, lookup.TemplateOptions{}, err
	}
	return e.Config(), templates, nil
}

// checkOutput refuses an -o other than the readable report, json and
// yaml.
func checkOutput(output string) error {
	switch output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("invalid --output %q (want json, yaml, or nothing for a readable report)", output)
}

// encode prints v as format says: indented JSON, or the same document in
// YAML.
func encode(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
