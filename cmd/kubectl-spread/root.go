package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
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
	root.AddCommand(newCheckCommand(code), newExplainCommand(code, connect), newStatusCommand(connect), newPlanCommand(code, connect))
	return root
}

// engineFlags are the flags that mirror the webhook's configuration, so
// that a check decides as the installed webhook does.
type engineFlags struct {
	defaultAction      string
	excludedNamespaces []string
	nodeGroupLabel     string
	output             string
}

func (f *engineFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.defaultAction, "default-action", string(v1alpha1.ActionDeny),
		"what to do with an unsatisfiable pod whose policy sets no action, as the webhook's --default-action: Deny, Warn or Audit")
	cmd.Flags().StringSliceVar(&f.excludedNamespaces, "excluded-namespaces", []string{metav1.NamespaceSystem},
		"namespaces never mutated nor validated, as the webhook's --excluded-namespaces (kube-system is always included)")
	cmd.Flags().StringVar(&f.nodeGroupLabel, "node-group-label", "",
		"node label naming a node's group, as the webhook's --node-group-label: each group and zone seen on a node is a node an autoscaler can add")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: empty for a readable report, or json")
}

// templates says where the nodes an autoscaler can add come from: the
// NodeTemplates and Karpenter NodePools among the objects read, and the
// node groups of --node-group-label.
func (f *engineFlags) templates() lookup.TemplateOptions {
	return lookup.TemplateOptions{NodeTemplates: true, Karpenter: true, NodeGroupLabel: f.nodeGroupLabel}
}

// config validates the flags into the engine's configuration.
func (f *engineFlags) config() (engine.Config, error) {
	action := v1alpha1.ValidationAction(f.defaultAction)
	switch action {
	case v1alpha1.ActionDeny, v1alpha1.ActionWarn, v1alpha1.ActionAudit:
	default:
		return engine.Config{}, fmt.Errorf("invalid --default-action %q (want Deny, Warn or Audit)", f.defaultAction)
	}
	switch f.output {
	case "", "json":
	default:
		return engine.Config{}, fmt.Errorf("invalid --output %q (want json, or nothing for a readable report)", f.output)
	}
	if f.nodeGroupLabel != "" {
		if errs := validation.IsQualifiedName(f.nodeGroupLabel); len(errs) > 0 {
			return engine.Config{}, fmt.Errorf("invalid --node-group-label %q: %s", f.nodeGroupLabel, strings.Join(errs, "; "))
		}
	}
	excluded := []string{metav1.NamespaceSystem}
	for _, ns := range f.excludedNamespaces {
		if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(excluded, ns) {
			excluded = append(excluded, ns)
		}
	}
	return engine.Config{DefaultAction: action, ExcludedNamespaces: excluded}, nil
}
