package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/state"
)

type checkOptions struct {
	engineFlags
	kube    kubeFlags
	cluster string
	pod     string
	output  string
}

func newCheckCommand(code *int, connect connectFunc) *cobra.Command {
	o := &checkOptions{engineFlags: newEngineFlags()}
	cmd := &cobra.Command{
		Use:   "check --cluster CLUSTER.yaml --pod POD.yaml [-o json|yaml]",
		Short: "Review a pod against a cluster snapshot, offline",
		Long: `check runs the webhook's mutation and validation on the pod in POD.yaml,
against the cluster described by CLUSTER.yaml: a multi-document YAML (or a
v1 List) of ` + kindsText() + `.

It decides as the webhook configured by its flags would, or with
--from-release as the installed release's webhook does (flags given win).

Exit codes: 0 allowed, 1 denied, 2 bad input.`,
		Example: `  kubectl spread check --cluster examples/cluster.yaml --pod examples/pod-web.yaml
  kubectl spread check --cluster examples/cluster.yaml --pod examples/pod-pinned.yaml -o json
  kubectl spread check --cluster cluster.yaml --pod pod.yaml --from-release spreadguard --release-namespace spreadguard-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rev, cfg, err := o.run(cmd, connect)
			if err != nil {
				return err
			}
			*code = exitCode(rev)
			return writeReview(cmd.OutOrStdout(), o.output, rev, cfg.MessageDetail)
		},
	}
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "the cluster snapshot file (required)")
	cmd.Flags().StringVar(&o.pod, "pod", "", "the file holding the one Pod to review (required)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: empty for a readable report, json or yaml")
	o.register(cmd)
	o.kube.register(cmd)
	return cmd
}

// run reviews the pod, and returns the configuration it decided with,
// whose message detail the output follows.
func (o *checkOptions) run(cmd *cobra.Command, connect connectFunc) (*engine.Review, engine.Config, error) {
	if o.cluster == "" || o.pod == "" {
		return nil, engine.Config{}, errors.New("check needs --cluster CLUSTER.yaml and --pod POD.yaml")
	}
	cfg, templates, err := o.settings(cmd, o.kube, connect)
	if err != nil {
		return nil, cfg, err
	}
	if err := checkOutput(o.output); err != nil {
		return nil, cfg, err
	}
	cluster, err := lookup.Load(o.cluster)
	if err != nil {
		return nil, cfg, err
	}
	pod, err := lookup.LoadPod(o.pod)
	if err != nil {
		return nil, cfg, err
	}
	rev, err := review(pod, cluster, cfg, templates, cmd.ErrOrStderr())
	return rev, cfg, err
}

// review runs the engine as the webhook does: lookups through the
// webhook's Sources, counts from the cluster state the webhook's
// informers keep up to date, built here from the store in one go, with
// the templates derived into it. What the webhook would log of the
// templates goes to notes.
func review(pod *v1.Pod, store *lookup.Store, cfg engine.Config, topts lookup.TemplateOptions, notes io.Writer) (*engine.Review, error) {
	cluster := state.Load(store.Objects())
	derived, err := deriveTemplates(context.Background(), store, topts, notes)
	if err != nil {
		return nil, err
	}
	cluster.SetDerived(derived)
	rev, err := engine.ReviewPod(pod, lookup.NewSources(store), cluster.Index(), cfg)
	if err != nil {
		return nil, fmt.Errorf("reviewing pod %s/%s: %w", pod.Namespace, podName(pod), err)
	}
	return rev, nil
}

// deriveTemplates derives the nodes an autoscaler can add from store, as
// the webhook does, and tells notes why cluster-autoscaler's status, there,
// was not read (the webhook logs it, and judges the node groups as if it
// were not there), and what of the autoscalers leaves pods Pending or
// refused (autoscale.Derived.Findings), as the webhook logs it.
func deriveTemplates(ctx context.Context, store *lookup.Store, topts lookup.TemplateOptions, notes io.Writer) (autoscale.Derived, error) {
	d, err := lookup.Derive(ctx, store, topts)
	if err != nil {
		return autoscale.Derived{}, fmt.Errorf("deriving the nodes an autoscaler can add: %w", err)
	}
	if err := d.ClusterAutoscalerStatusErr; err != nil {
		fmt.Fprintf(notes, "%s: note: %v; every node group is taken to be able to grow\n", name, err)
	}
	for _, f := range d.Findings() {
		fmt.Fprintf(notes, "%s: note: %s\n", name, f)
	}
	return d.Derived, nil
}

// kindsText names the kinds a cluster file may hold, from the table of
// kinds.
func kindsText() string {
	names := make([]string, len(cache.InformedKinds))
	for i, k := range cache.InformedKinds {
		names[i] = strings.TrimSuffix(k.GVK.Kind, "y")
		if names[i] != k.GVK.Kind {
			names[i] += "ies"
		} else {
			names[i] += "s"
		}
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func exitCode(rev *engine.Review) int {
	if rev.Validation.Allowed {
		return exitAllowed
	}
	return exitDenied
}
