package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

type statusOptions struct {
	engineFlags
	kube      kubeFlags
	cluster   string
	namespace string
	all       bool
	output    string
}

func newStatusCommand(connect connectFunc) *cobra.Command {
	o := &statusOptions{engineFlags: newEngineFlags()}
	cmd := &cobra.Command{
		Use:   "status [-n NAMESPACE | -A] [--cluster CLUSTER.yaml] [-o json|yaml]",
		Short: "Show how the pods of the workloads policies select are spread now",
		Long: `status runs the audit the webhook's leader runs: for each workload a policy
selects (a Deployment through its newest ReplicaSet, a StatefulSet, a ReplicaSet
or ReplicationController of its own, the pods of a Service no controller owns),
and each topology spread constraint its pods carry (or, when they carry none, the
policy's), the running and pending pods per domain, the skew against maxSkew, and
the workload's state: spread, skewed or uncovered.

It reads the cluster the kubeconfig points at, or with --cluster the same file
check reads.`,
		Example: `  kubectl spread status -n shop
  kubectl spread status -A -o json
  kubectl spread status --cluster examples/cluster.yaml -n shop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, cfg, err := o.run(cmd, connect)
			if err != nil {
				return err
			}
			if o.output != "" {
				return encode(cmd.OutOrStdout(), o.output, statusDocument(st.results, cfg.MessageDetail))
			}
			return writeStatus(cmd.OutOrStdout(), st, cfg.MessageDetail)
		},
	}
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "a cluster snapshot file, as check reads, instead of the live cluster")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the namespace (default: the kubeconfig context's, or default)")
	cmd.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "every namespace")
	o.kube.register(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: empty for a table, json or yaml")
	o.register(cmd)
	return cmd
}

// status is what status prints: the audit's results, and the policies
// the audit finds not Ready because no node can reach their minDomains or
// they spread over a zone no node comes up in.
type status struct {
	results     []health.Result
	unreachable []unreachable
}

// unreachable is a policy whose hard constraints ask for a minDomains the
// nodes and every node an autoscaler can add cannot reach (health.Reach),
// or spread over zones an autoscaler's node pool requires but cannot serve
// (health.Unserved), with the reason and message of its Ready condition.
// A policy with both has one of each.
type unreachable struct{ policy, reason, message string }

// run audits the workloads, and returns the configuration it audited
// with, whose message detail the table follows.
func (o *statusOptions) run(cmd *cobra.Command, connect connectFunc) (status, engine.Config, error) {
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		return status{}, engine.Config{}, fmt.Errorf("invalid --output %q (want json, yaml, or nothing for a table)", o.output)
	}
	if o.all && o.namespace != "" {
		return status{}, engine.Config{}, errors.New("--namespace and --all-namespaces exclude each other")
	}
	cfg, topts, err := o.settings(cmd, o.kube, connect)
	if err != nil {
		return status{}, cfg, err
	}
	var objs []runtime.Object
	namespace := o.namespace
	if o.cluster != "" {
		store, err := lookup.Load(o.cluster)
		if err != nil {
			return status{}, cfg, err
		}
		objs = store.Objects()
	} else {
		c, err := connect(o.kube.kubeconfig, o.kube.context)
		if err != nil {
			return status{}, cfg, err
		}
		namespace = cmp.Or(namespace, c.namespace)
		read := cmp.Or(namespace, metav1.NamespaceDefault)
		if o.all {
			read = metav1.NamespaceAll
		}
		if objs, err = lookup.Read(cmd.Context(), c.reader, read); err != nil {
			return status{}, cfg, err
		}
		if objs, err = withStatusConfigMap(cmd.Context(), c.reader, objs, topts, cmd.ErrOrStderr()); err != nil {
			return status{}, cfg, err
		}
	}
	if !o.all {
		namespace = cmp.Or(namespace, metav1.NamespaceDefault)
	}
	st, err := healthOfObjects(cmd.Context(), objs, namespace, cfg, topts, cmd.ErrOrStderr())
	return st, cfg, err
}

// healthOfObjects runs the audit on a cluster's objects, for namespace, or
// every namespace when it is empty: the leader's audit, which reads the
// constraints the pods carry from the index, as the leader does, and the
// reach of each policy's constraints with the templates derived as topts
// says.
func healthOfObjects(ctx context.Context, objs []runtime.Object, namespace string, cfg engine.Config, topts lookup.TemplateOptions, notes io.Writer) (status, error) {
	store, err := lookup.NewStore(objs...)
	if err != nil {
		return status{}, fmt.Errorf("building the store of the cluster: %w", err)
	}
	cluster := state.Load(store.Objects())
	derived, err := deriveTemplates(ctx, store, topts, notes)
	if err != nil {
		return status{}, err
	}
	cluster.SetDerived(derived)
	index := cluster.Index()
	var ws []health.Workload
	for _, w := range health.Workloads(health.Owners{
		Workloads: workloadsOf(objs),
		Services:  ofType[*v1.Service](objs),
	}, index) {
		if namespace != "" && w.Namespace != namespace {
			continue
		}
		ws = append(ws, w)
	}
	results := health.Run(index, lookup.NewSources(store), cfg, ws)
	return status{results: results, unreachable: policiesOutOfReach(objs, namespace, derived, cfg.MessageDetail)}, nil
}

// workloadsOf returns the objects of objs of any of workload.Kinds.
func workloadsOf(objs []runtime.Object) []workload.Object {
	var out []workload.Object
	for _, o := range objs {
		if _, ok := workload.For(o); ok {
			out = append(out, o.(workload.Object))
		}
	}
	return out
}

// policiesOutOfReach returns the policies of namespace (every one when it
// is empty; ClusterSpreadPolicies always) whose constraints the nodes of
// objs and the templates of d cannot reach, and those that spread over the
// zones d finds unserved, worded as the audit's Ready condition.
func policiesOutOfReach(objs []runtime.Object, namespace string, d autoscale.Derived, detail spread.MessageDetail) []unreachable {
	nodes := ofType[*v1.Node](objs)
	unserved := d.Unserved()
	var out []unreachable
	judge := func(name string, ref v1.ObjectReference, spec *v1alpha1.PolicySpec) {
		ready := metav1.Condition{Status: metav1.ConditionTrue}
		found := autoscale.ConstraintsOutOfReach(spec.Constraints, nodes, d.Templates)
		if c, _ := health.Reach(ready, name, ref, found, detail); c.Status != ready.Status {
			out = append(out, unreachable{policy: name, reason: c.Reason, message: c.Message})
		}
		if c, _ := health.Unserved(ready, name, ref, spec.Constraints, unserved, detail); c.Status != ready.Status {
			out = append(out, unreachable{policy: name, reason: c.Reason, message: c.Message})
		}
	}
	for _, p := range ofType[*v1alpha1.SpreadPolicy](objs) {
		if namespace == "" || p.Namespace == namespace {
			judge(p.Namespace+"/"+p.Name, v1.ObjectReference{Kind: v1alpha1.KindSpreadPolicy, Namespace: p.Namespace, Name: p.Name}, &p.Spec)
		}
	}
	for _, p := range ofType[*v1alpha1.ClusterSpreadPolicy](objs) {
		judge(p.Name, v1.ObjectReference{Kind: v1alpha1.KindClusterSpreadPolicy, Name: p.Name}, &p.Spec.PolicySpec)
	}
	return out
}

// writeStatus prints one row per workload and constraint, and one with
// the error for a workload that could not be audited; the domains of a
// constraint that detail does not name (hostnames) as how many nodes hold
// each count, as the Reports do.
// The policies no node can reach the minDomains of, and those spread over
// a zone no node comes up in, follow, one line each.
func writeStatus(out io.Writer, st status, detail spread.MessageDetail) error {
	if err := writeResults(out, st.results, detail); err != nil {
		return err
	}
	for _, u := range st.unreachable {
		if _, err := fmt.Fprintf(out, "\nPolicy %s is not Ready (%s): %s\n", u.policy, u.reason, u.message); err != nil {
			return err
		}
	}
	return nil
}

func writeResults(out io.Writer, results []health.Result, detail spread.MessageDetail) error {
	if len(results) == 0 {
		_, err := fmt.Fprintln(out, "No workload with pods is selected by a policy.")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tWORKLOAD\tPOLICY\tPODS\tTOPOLOGY KEY\tDOMAINS\tSKEW/MAX\tSTATE")
	for _, r := range results {
		if r.State == health.StateError {
			fmt.Fprintf(w, "%s\t%s/%s\t%s\t\t\t%s\t\t%s\n", r.Namespace, r.Kind, r.Name, r.Policy, r.Error, r.State)
		}
		for _, s := range r.Constraints {
			key := s.TopologyKey
			if s.WhenUnsatisfiable != v1.DoNotSchedule {
				key += " (soft)"
			}
			domains := health.DomainsText(s.Domains)
			if !detail.NamesDomainsOf(s.TopologyKey) {
				domains = spread.NodesPerCount(s.Domains, s.DomainCount)
			}
			fmt.Fprintf(w, "%s\t%s/%s\t%s\t%d\t%s\t%s\t%d/%d\t%s\n", r.Namespace, r.Kind, r.Name, r.Policy, r.Pods,
				key, domains, s.Skew, s.MaxSkew, r.State)
		}
	}
	return w.Flush()
}

// statusDocument is what status -o json (or yaml) prints: the audit's
// results. Under messageDetail domains a constraint over
// kubernetes.io/hostname says how many nodes hold each count
// (nodesPerCount, as its Report does) instead of its domains, which are
// node names.
func statusDocument(results []health.Result, detail spread.MessageDetail) any {
	if detail.NamesNodes() {
		return results
	}
	out := make([]domainsResult, 0, len(results))
	for _, r := range results {
		d := domainsResult{Result: r, Constraints: []domainsSpread{}}
		for _, s := range r.Constraints {
			c := domainsSpread{Spread: s, Domains: s.Domains}
			if !detail.NamesDomainsOf(s.TopologyKey) {
				c.Domains, c.NodesPerCount = nil, spread.NodesPerCount(s.Domains, s.DomainCount)
			}
			d.Constraints = append(d.Constraints, c)
		}
		out = append(out, d)
	}
	return out
}

// domainsResult is a health.Result under messageDetail domains.
type domainsResult struct {
	health.Result
	Constraints []domainsSpread `json:"constraints"`
}

// domainsSpread is a spread.Spread under messageDetail domains: its
// domains but for kubernetes.io/hostname, whose counts nodesPerCount words.
type domainsSpread struct {
	spread.Spread
	Domains       any    `json:"domains,omitempty"`
	NodesPerCount string `json:"nodesPerCount,omitempty"`
}
