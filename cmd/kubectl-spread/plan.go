package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

type planOptions struct {
	engineFlags
	kube      kubeFlags
	file      string
	cluster   string
	replicas  int32
	namespace string
	output    string
	keeper    bool
}

func newPlanCommand(code *int, connect connectFunc) *cobra.Command {
	o := &planOptions{engineFlags: newEngineFlags(), replicas: -1}
	cmd := &cobra.Command{
		Use:   "plan (-f WORKLOAD.yaml | TYPE/NAME) [--replicas N] [--cluster CLUSTER.yaml] [-o json|yaml]",
		Short: "Forecast where a workload's replicas go, and the first one refused",
		Long: `plan runs the forecast of the webhook's workload warnings: it builds the pod the
workload's controller creates (a Deployment's new ReplicaSet's, with its
pod-template-hash), runs the webhook's mutation and check on it, then places
the replicas one at a time on a feasible node of the least-loaded domains,
the counts updated after each, from the replicas that exist to spec.replicas
(or --replicas). It prints the counts per domain after each replica that
raises a constraint's global minimum or adds a node, and the first replica
no node nor node template can take, and why.

Below the replicas that exist (TYPE/NAME --replicas N), it forecasts the
scale-down: the pods the controller deletes, in the order it deletes them
(a StatefulSet's highest ordinals first; a ReplicaSet's, a Deployment's or
a ReplicationController's in the ReplicaSet controller's own ranking, which
reads each pod's controller.kubernetes.io/pod-deletion-cost), the counts
they leave, and whether they leave a hard constraint skewed beyond its
maxSkew. It says which order it assumed. With --keeper, a ReplicaSet's
pods are ranked with the deletion costs spreadguard's keeper keeps, as
they are once it has written them; their pods must carry their topology
spread constraints, as the keeper reads them there.

The workload is the Deployment, StatefulSet, ReplicaSet or
ReplicationController in WORKLOAD.yaml, forecast as a new revision (its
pods start at 0), or TYPE/NAME, one that exists: its current revision's
bound pods are the replicas that exist. The cluster is CLUSTER.yaml (as
check reads it) or, without --cluster, the one the kubeconfig points at.

Exit codes: 0 all replicas placed (or nothing to forecast, or a scale-down
that keeps the spread), 1 a replica refused or left Pending, or a
scale-down that leaves a constraint skewed, 2 bad input or an unreachable
cluster.`,
		Example: `  kubectl spread plan -f examples/deployment-api.yaml --cluster examples/cluster.yaml
  kubectl spread plan replicaset/web-abc -n shop --replicas 8 --cluster examples/cluster.yaml
  kubectl spread plan deployment/web -n shop --replicas 12 -o json
  kubectl spread plan statefulset/db -n shop --replicas 3`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (o.file == "") == (len(args) == 0) {
				return errors.New("plan needs -f WORKLOAD.yaml or TYPE/NAME, one of them")
			}
			cfg, templates, err := o.settings(cmd, o.kube, connect)
			if err != nil {
				return err
			}
			if err := checkOutput(o.output); err != nil {
				return err
			}
			if o.output != "" && !cfg.MessageDetail.NamesNodes() {
				return fmt.Errorf("plan -o %s names the node or template each replica goes to and the nodes a scale-down empties, "+
					"which --message-detail %s hides: use --message-detail %s, or the readable report", o.output, spread.DetailDomains, spread.DetailNodes)
			}
			f, err := o.run(cmd.Context(), args, cfg, templates, connect, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if f.Refused != nil || f.Skewed != nil {
				*code = exitDenied
			}
			if o.output != "" {
				return writePlanDocument(cmd.OutOrStdout(), o.output, f)
			}
			return writePlan(cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", "the file holding the one workload to forecast")
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "the cluster snapshot file (default: the live cluster of the kubeconfig)")
	cmd.Flags().Int32Var(&o.replicas, "replicas", -1, "the replicas to forecast up to (default: the workload's spec.replicas)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the workload's namespace (default: the file's, then the kubeconfig context's)")
	o.kube.register(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: empty for a readable report, json or yaml (under --message-detail nodes)")
	cmd.Flags().BoolVar(&o.keeper, "keeper", false, "rank a scale-down's pods with the deletion costs the keeper keeps, not the ones they carry")
	o.register(cmd)
	return cmd
}

func (o *planOptions) run(ctx context.Context, args []string, cfg engine.Config, topts lookup.TemplateOptions, connect connectFunc, notes io.Writer) (*forecast.Forecast, error) {
	if o.replicas < -1 {
		return nil, fmt.Errorf("invalid --replicas %d (want 0 or more)", o.replicas)
	}
	var fromFile client.Object
	if o.file != "" {
		var err error
		if fromFile, err = loadWorkload(o.file); err != nil {
			return nil, err
		}
	}
	var store *lookup.Store
	namespace := o.namespace
	if fromFile != nil {
		namespace = cmp.Or(namespace, fromFile.GetNamespace())
	}
	if o.cluster != "" {
		var err error
		if store, err = lookup.Load(o.cluster); err != nil {
			return nil, err
		}
		namespace = cmp.Or(namespace, metav1.NamespaceDefault)
	} else {
		c, err := connect(o.kube.kubeconfig, o.kube.context)
		if err != nil {
			return nil, err
		}
		namespace = cmp.Or(namespace, c.namespace, metav1.NamespaceDefault)
		objs, err := list(ctx, c.reader, namespace, topts, notes)
		if err != nil {
			return nil, err
		}
		if store, err = lookup.NewStore(objs...); err != nil {
			return nil, fmt.Errorf("building the store of the cluster: %w", err)
		}
	}
	var w *forecast.Workload
	var err error
	if fromFile != nil {
		fromFile.SetNamespace(namespace)
		w, err = forecast.Of(fromFile, 0)
	} else {
		w, err = existingWorkload(ctx, store, args[0], namespace)
	}
	if err != nil {
		return nil, err
	}
	if o.replicas >= 0 {
		w.Replicas = o.replicas
	}
	cluster := state.Load(store.Objects())
	derived, err := deriveTemplates(ctx, store, topts, notes)
	if err != nil {
		return nil, err
	}
	cluster.SetDerived(derived)
	index := cluster.Index()
	if o.keeper && w.Kind != workload.StatefulSet.GVK.Kind && int(w.Replicas) < len(w.Pods) {
		// Without a constraint on the pods the keeper keeps no cost: the
		// controller's own ranking is the order.
		r, err := forecast.NewKeeperRanking(time.Now(), index, w.Pods)
		switch {
		case err == nil:
			w.Order = r
		case !errors.Is(err, spread.ErrNoConstraints):
			return nil, fmt.Errorf("ranking the pods of %s: %w", w, err)
		}
	}
	f, err := forecast.Run(w, lookup.NewSources(store), index, cfg)
	if err != nil {
		return nil, fmt.Errorf("forecasting %s: %w", w, err)
	}
	return f, nil
}

// loadWorkload decodes the one workload of path.
func loadWorkload(path string) (client.Object, error) {
	s, err := lookup.Load(path)
	if err != nil {
		return nil, err
	}
	var found []client.Object
	for _, obj := range s.Objects() {
		if _, ok := workload.For(obj); !ok {
			return nil, fmt.Errorf("%s: a %s is not a workload (want one %s)", path, obj.GetObjectKind().GroupVersionKind().Kind, workloadKinds(false))
		}
		found = append(found, obj.(client.Object))
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s: holds %d workloads, want exactly one", path, len(found))
	}
	return found[0], nil
}

// existingWorkload is the workload TYPE/NAME of store at its current
// revision, with its bound pods of that revision as the replicas that
// exist. A Deployment's current revision is its current ReplicaSet's
// (workload.CurrentReplicaSet), whose pod-template-hash its pods carry; one
// without that ReplicaSet is forecast as a new revision.
func existingWorkload(ctx context.Context, store *lookup.Store, target, namespace string) (*forecast.Workload, error) {
	typ, name, ok := strings.Cut(target, "/")
	if !ok || name == "" {
		return nil, fmt.Errorf("want TYPE/NAME (%s), got %q", workloadKinds(true), target)
	}
	kind, ok := workload.ByName(typ)
	if !ok {
		return nil, fmt.Errorf("cannot plan %q: want %s", typ, workloadKinds(true))
	}
	obj := kind.New()
	if err := store.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		return nil, fmt.Errorf("getting %s %s/%s: %w", strings.ToLower(typ), namespace, name, err)
	}
	var replicaSets appsv1.ReplicaSetList
	if err := store.List(ctx, &replicaSets, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	owner, selector := client.Object(obj), kind.LabelSelector(obj)
	if d, ok := obj.(*appsv1.Deployment); ok {
		if rs := workload.CurrentReplicaSet(d, workload.Pointers(replicaSets.Items)); rs != nil {
			rs = rs.DeepCopy()
			rs.Spec.Replicas = d.Spec.Replicas
			owner, selector = rs, rs.Spec.Selector
		}
	}
	var pods v1.PodList
	if err := store.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	active, err := activePods(pods.Items, selector)
	if err != nil {
		return nil, err
	}
	existing := int32(0)
	for _, p := range active {
		if p.Spec.NodeName != "" {
			existing++
		}
	}
	w, err := forecast.Of(owner, existing)
	if err != nil {
		return nil, err
	}
	w.Pods, w.Related = active, relatedPods(obj, workload.Pointers(replicaSets.Items), pods.Items)
	// The workload is the one named, whichever revision places its pods.
	w.Ref = workload.RefTo(kind, obj)
	return w, nil
}

// workloadKinds lists the workload kinds for a message: "Deployment,
// StatefulSet, ReplicaSet or ReplicationController", or in lower case as
// kubectl takes them.
func workloadKinds(lower bool) string {
	names := make([]string, len(workload.Kinds))
	for i, k := range workload.Kinds {
		names[i] = k.GVK.Kind
		if lower {
			names[i] = strings.ToLower(names[i])
		}
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// activePods are the pods selector selects, neither terminating nor
// finished: the replicas the ReplicaSet controller counts, scheduled or
// not (FilterActivePods in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go).
// Those bound to a node are the ones the index counts.
func activePods(pods []v1.Pod, selector *metav1.LabelSelector) ([]*v1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || selector == nil {
		return nil, fmt.Errorf("reading the workload's selector: %w", cmp.Or(err, errors.New("none")))
	}
	var out []*v1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed &&
			sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// relatedPods are the pods the ReplicaSet controller counts per node when
// it ranks obj's pods for deletion: those of every ReplicaSet with the same
// controller (a Deployment's, of every revision), or of obj alone
// (getIndirectlyRelatedPods in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/replicaset/replica_set.go).
// nil for any other kind: the forecast then ranks against obj's own pods.
func relatedPods(obj client.Object, replicaSets []*appsv1.ReplicaSet, pods []v1.Pod) []*v1.Pod {
	controller := obj.GetUID()
	switch o := obj.(type) {
	case *appsv1.Deployment:
	case *appsv1.ReplicaSet:
		ref := metav1.GetControllerOf(o)
		if ref == nil {
			return nil
		}
		controller = ref.UID
	default:
		return nil
	}
	var related []*v1.Pod
	seen := map[*v1.Pod]bool{}
	for _, rs := range replicaSets {
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != controller {
			continue
		}
		selected, err := activePods(pods, rs.Spec.Selector)
		if err != nil {
			continue // selects nothing, as the controller reads it
		}
		for _, p := range selected {
			if !seen[p] {
				seen[p] = true
				related = append(related, p)
			}
		}
	}
	return related
}

// writePlan prints the forecast for a person, naming what f.Detail lets it
// (the configuration the forecast ran with).
func writePlan(out io.Writer, f *forecast.Forecast) error {
	var b strings.Builder
	if f.To < f.From {
		fmt.Fprintf(&b, "%s: scaled down from %d to %d replicas", f.Workload, f.From, f.To)
	} else {
		fmt.Fprintf(&b, "%s: replicas %d to %d", f.Workload, f.From+1, f.To)
	}
	if f.Policy != "" {
		fmt.Fprintf(&b, ", policy %s (%s)", f.Policy, f.Action)
	}
	b.WriteString("\n")
	switch {
	case len(f.Departures) > 0:
		writeScaleDown(&b, f)
	case f.To == f.From:
		fmt.Fprintf(&b, "Nothing to place: %d replicas exist.\n", f.From)
	case f.Skipped != "":
		fmt.Fprintf(&b, "Not forecast: %s.\n", f.Skipped)
	case f.To < f.From:
		fmt.Fprintf(&b, "Not forecast: which %d of the %d pods go is not known.\n", f.From-f.To, f.From)
	default:
		for _, line := range pictureChanges(f) {
			b.WriteString("  " + line + "\n")
		}
		if f.Truncated && f.Refused == nil {
			fmt.Fprintf(&b, "The first %d replicas placed; a forecast places no more.\n", len(f.Placements))
		} else if f.Refused == nil {
			fmt.Fprintf(&b, "All %d replicas placed.\n", f.To-f.From)
		} else {
			fmt.Fprintf(&b, "%s\n", f.Warning())
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// writeScaleDown prints the pods a scale-down deletes, in the order
// assumed, where each is counted, the counts they leave, and the warning
// when they leave a constraint skewed.
func writeScaleDown(b *strings.Builder, f *forecast.Forecast) {
	fmt.Fprintf(b, "Deleted in %s:\n", f.Order)
	counts := make([]map[string]int, len(f.Constraints))
	for i, c := range f.Constraints {
		counts[i] = maps.Clone(c.Domains)
	}
	for _, d := range f.Departures {
		var where []string
		for i, c := range f.Constraints {
			if d.Domains[i] == "" {
				continue
			}
			counts[i][d.Domains[i]]--
			if f.Detail.NamesDomainsOf(c.TopologyKey) {
				where = append(where, f.Detail.DomainName(c.TopologyKey, d.Domains[i]))
			}
		}
		switch {
		case d.Node == "":
			where = []string{"not counted: not running on a node"}
		case len(where) == 0:
			where = []string{"counted on a node"}
		}
		fmt.Fprintf(b, "  %s  %s\n", d.Pod, strings.Join(where, ", "))
	}
	line := "after the scale-down"
	for i, c := range f.Constraints {
		line += "  " + domainCounts(c.TopologyKey, counts[i], f.Detail)
	}
	b.WriteString("  " + line + "\n")
	if f.Skewed != nil {
		b.WriteString(f.Warning() + "\n")
		return
	}
	b.WriteString("No hard constraint is left skewed beyond its maxSkew.\n")
}

// pictureChanges replays the placements on the counts and returns a line
// with every constraint's counts after each replica that raises a global
// minimum, adds a node, or is the last placed.
func pictureChanges(f *forecast.Forecast) []string {
	counts := make([]map[string]int, len(f.Constraints))
	for i, c := range f.Constraints {
		counts[i] = map[string]int{}
		for d, n := range c.Domains {
			counts[i][d] = n
		}
	}
	mins := make([]int, len(counts))
	for i := range counts {
		mins[i] = globalMin(f.Constraints[i], counts[i])
	}
	var lines []string
	for k, p := range f.Placements {
		raised := false
		for i, c := range f.Constraints {
			if _, ok := counts[i][p.Domains[i]]; !ok {
				counts[i][p.Domains[i]] = 0
			}
			counts[i][p.Domains[i]] += c.SelfMatch
			if m := globalMin(c, counts[i]); m != mins[i] {
				mins[i], raised = m, true
			}
		}
		if !raised && !p.NewNode && k != len(f.Placements)-1 {
			continue
		}
		line := fmt.Sprintf("after replica %d", p.Replica)
		switch {
		case p.NewNode && f.Detail.NamesNodes():
			line += fmt.Sprintf(" (on a new node of %s)", p.Template)
		case p.NewNode:
			line += " (on a new node)"
		}
		for i, c := range f.Constraints {
			line += "  " + domainCounts(c.TopologyKey, counts[i], f.Detail)
		}
		lines = append(lines, line)
	}
	return lines
}

func globalMin(c forecast.Counts, counts map[string]int) int {
	if len(counts) < int(c.MinDomains) || len(counts) == 0 {
		return 0
	}
	m := -1
	for _, n := range counts {
		if m < 0 || n < m {
			m = n
		}
	}
	return m
}

// maxDomainsShown keeps a line of hostname counts readable.
const maxDomainsShown = 12

// domainCounts is "zone: a=1 b=2", or, for the domains detail does not
// name, "hostname: 2 nodes with 1".
func domainCounts(key string, counts map[string]int, detail spread.MessageDetail) string {
	short := key[strings.LastIndexByte(key, '/')+1:]
	if !detail.NamesDomainsOf(key) {
		return short + ": " + spread.NodesPerCount(counts, len(counts))
	}
	names := make([]string, 0, len(counts))
	for d := range counts {
		names = append(names, d)
	}
	slices.Sort(names)
	parts := []string{short + ":"}
	for i, d := range names {
		if i == maxDomainsShown {
			parts = append(parts, fmt.Sprintf("(+%d more)", len(names)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s=%d", d, counts[d]))
	}
	return strings.Join(parts, " ")
}

// planJSON is what plan -o json prints: the forecast and its warning.
type planJSON struct {
	*forecast.Forecast
	Warning string `json:"warning"`
}

// writePlanDocument prints the forecast as format (json or yaml) says. It
// names nodes and templates: the command refuses it under messageDetail
// domains.
func writePlanDocument(out io.Writer, format string, f *forecast.Forecast) error {
	return encode(out, format, planJSON{Forecast: f, Warning: f.Warning()})
}
