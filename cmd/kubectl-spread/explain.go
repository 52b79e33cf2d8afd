package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// clients are what explain reads a live cluster with. Tests give fakes.
type clients struct {
	reader client.Reader
	// namespace is the kubeconfig context's namespace, for when -n is not
	// given.
	namespace string
}

// connectFunc builds the clients from the kubeconfig flags.
type connectFunc func(kubeconfig, context string) (*clients, error)

type explainOptions struct {
	engineFlags
	kube      kubeFlags
	namespace string
	output    string
}

func newExplainCommand(code *int, connect connectFunc) *cobra.Command {
	o := &explainOptions{engineFlags: newEngineFlags()}
	cmd := &cobra.Command{
		Use:   "explain (deployment|statefulset|pod)/NAME [-n NAMESPACE] [-o json|yaml]",
		Short: "Review a workload's next pod against a live cluster",
		Long: `explain reads the cluster the kubeconfig points at, builds the pod the
workload would create next (from a Deployment's newest ReplicaSet, or from a
StatefulSet's template at its next ordinal; a pod is taken as it is, unbound),
and reviews it as the webhook would: the same output as check.

It lists what the webhook's informers hold: ` + readsText() + `.

Exit codes: 0 allowed, 1 denied, 2 bad input or an unreachable cluster.`,
		Example: `  kubectl spread explain deployment/web -n shop
  kubectl spread explain statefulset/db -n shop -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			cfg, templates, err := o.settings(cmd, o.kube, connect)
			if err != nil {
				return err
			}
			if err := checkOutput(o.output); err != nil {
				return err
			}
			c, err := connect(o.kube.kubeconfig, o.kube.context)
			if err != nil {
				return err
			}
			ns := cmp.Or(o.namespace, c.namespace, metav1.NamespaceDefault)
			rev, err := explain(cmd.Context(), c, kind, ns, name, cfg, templates, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			*code = exitCode(rev)
			return writeReview(cmd.OutOrStdout(), o.output, rev, cfg.MessageDetail)
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the workload's namespace (default: the kubeconfig context's)")
	o.kube.register(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: empty for a readable report, json or yaml")
	o.register(cmd)
	return cmd
}

// connect builds clients the way kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, else in-cluster.
func connect(kubeconfig, context string) (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	rest, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig's namespace: %w", err)
	}
	scheme, err := cache.NewScheme()
	if err != nil {
		return nil, err
	}
	// Deployments are read too; their group is in the scheme already.
	r, err := client.New(rest, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	return &clients{reader: r, namespace: ns}, nil
}

// readsText names what list reads, from the table of kinds.
func readsText() string {
	var cluster, namespaced []string
	for _, k := range cache.InformedKinds {
		if k.Named {
			continue
		}
		if k.Namespaced {
			namespaced = append(namespaced, k.Resource)
		} else {
			cluster = append(cluster, k.Resource)
		}
	}
	return strings.Join(cluster, ", ") + ", and in the namespace " + strings.Join(namespaced, ", ") +
		"; and cluster-autoscaler's status ConfigMap (--cluster-autoscaler-status)"
}

// parseTarget reads TYPE/NAME, accepting kubectl's names for the types.
func parseTarget(arg string) (kind, name string, err error) {
	typ, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("want deployment/NAME, statefulset/NAME or pod/NAME, got %q", arg)
	}
	// Of the workloads, explain builds the next pod of a Deployment's
	// newest ReplicaSet and of a StatefulSet's lowest missing ordinal.
	if k, ok := workload.ByName(typ); ok && (k.Is(workload.Deployment) || k.Is(workload.StatefulSet)) {
		return k.GVK.Kind, name, nil
	}
	switch strings.ToLower(typ) {
	case "pod", "pods", "po":
		return "Pod", name, nil
	}
	return "", "", fmt.Errorf("cannot explain %q: want deployment, statefulset or pod", typ)
}

// explain lists what the engine reads, synthesises the next pod, and
// reviews it against a Store of the listed objects, as check reviews a
// pod against a file.
func explain(ctx context.Context, c *clients, kind, namespace, name string, cfg engine.Config, topts lookup.TemplateOptions, notes io.Writer) (*engine.Review, error) {
	objs, err := list(ctx, c.reader, namespace, topts, notes)
	if err != nil {
		return nil, err
	}

	var pod *v1.Pod
	switch kind {
	case workload.Deployment.GVK.Kind:
		var d appsv1.Deployment
		if err := c.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
			return nil, fmt.Errorf("getting deployment %s/%s: %w", namespace, name, err)
		}
		pod, err = nextDeploymentPod(&d, ofType[*appsv1.ReplicaSet](objs))
		if err != nil {
			return nil, err
		}
	case workload.StatefulSet.GVK.Kind:
		s := find(ofType[*appsv1.StatefulSet](objs), name)
		if s == nil {
			return nil, fmt.Errorf("statefulset %s/%s not found", namespace, name)
		}
		pod = forecast.StatefulSetPod(s, ofType[*v1.Pod](objs))
	case "Pod":
		p := find(ofType[*v1.Pod](objs), name)
		if p == nil {
			return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
		}
		pod = unbound(p)
		// The pod is reviewed as if it were being created now: it must not
		// count itself where it runs.
		objs = slices.DeleteFunc(objs, func(o runtime.Object) bool { return o == runtime.Object(p) })
	default:
		return nil, fmt.Errorf("cannot explain kind %q", kind)
	}

	store, err := lookup.NewStore(objs...)
	if err != nil {
		return nil, fmt.Errorf("building the store of the cluster: %w", err)
	}
	return review(pod, store, cfg, topts, notes)
}

// list reads what the engine reads for a pod of namespace (lookup.Read),
// which must exist, and cluster-autoscaler's status ConfigMap where topts
// names it. Whoever may not read that ConfigMap is told so on notes, and
// gets the answer without it, as a webhook that may not read it gives.
func list(ctx context.Context, r client.Reader, namespace string, topts lookup.TemplateOptions, notes io.Writer) ([]runtime.Object, error) {
	objs, err := lookup.Read(ctx, r, namespace)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(ofType[*v1.Namespace](objs), func(ns *v1.Namespace) bool { return ns.Name == namespace }) {
		return nil, fmt.Errorf("namespace %s not found", namespace)
	}
	return withStatusConfigMap(ctx, r, objs, topts, notes)
}

// withStatusConfigMap adds to objs cluster-autoscaler's status ConfigMap
// where topts names it and it is there. Whoever may not read it is told so
// on notes, and gets the answer without it, as a webhook that may not read
// it gives.
func withStatusConfigMap(ctx context.Context, r client.Reader, objs []runtime.Object, topts lookup.TemplateOptions, notes io.Writer) ([]runtime.Object, error) {
	status, err := lookup.ReadStatusConfigMap(ctx, r, topts.ClusterAutoscalerStatus)
	switch {
	case apierrors.IsForbidden(err):
		fmt.Fprintf(notes, "%s: note: %v; every node group is taken to be able to grow (--cluster-autoscaler-status= skips it)\n", name, err)
	case err != nil:
		return nil, err
	case status != nil:
		objs = append(objs, status)
	}
	return objs, nil
}

// ofType returns the objects of objs of type T.
func ofType[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func find[T metav1.Object](objs []T, name string) T {
	for _, o := range objs {
		if o.GetName() == name {
			return o
		}
	}
	var zero T
	return zero
}
