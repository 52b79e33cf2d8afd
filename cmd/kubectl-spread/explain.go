package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/snapshot"
)

// Clients are what explain reads a live cluster with. Tests give fakes.
type clients struct {
	core    kubernetes.Interface
	dynamic dynamic.Interface
	// namespace is the kubeconfig context's namespace, for when -n is not
	// given.
	namespace string
}

// connectFunc builds the clients from the kubeconfig flags.
type connectFunc func(kubeconfig, context string) (*clients, error)

var (
	spreadPoliciesResource        = v1alpha1.GroupVersion.WithResource("spreadpolicies")
	clusterSpreadPoliciesResource = v1alpha1.GroupVersion.WithResource("clusterspreadpolicies")
)

const (
	// revisionAnnotation is the deployment controller's revision number on
	// each ReplicaSet; the highest is the one it creates new pods from.
	revisionAnnotation = "deployment.kubernetes.io/revision"
)

type explainOptions struct {
	engineFlags
	namespace  string
	kubeconfig string
	context    string
}

func newExplainCommand(code *int, connect connectFunc) *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain (deployment|statefulset|pod)/NAME [-n NAMESPACE] [-o json]",
		Short: "Review a workload's next pod against a live cluster",
		Long: `explain reads the cluster the kubeconfig points at, builds the pod the
workload would create next (from a Deployment's newest ReplicaSet, or from a
StatefulSet's template at its next ordinal; a pod is taken as it is, unbound),
and reviews it as the webhook would: the same output as check.

It reads nodes, and in the namespace pods, services, replicationcontrollers,
replicasets, statefulsets, spreadpolicies, plus the namespace and the
clusterspreadpolicies.

Exit codes: 0 allowed, 1 denied, 2 bad input or an unreachable cluster.`,
		Example: `  kubectl spread explain deployment/web -n shop
  kubectl spread explain statefulset/db -n shop -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			cfg, err := o.config()
			if err != nil {
				return err
			}
			c, err := connect(o.kubeconfig, o.context)
			if err != nil {
				return err
			}
			ns := cmp.Or(o.namespace, c.namespace, metav1.NamespaceDefault)
			rev, err := explain(cmd.Context(), c, kind, ns, name, cfg)
			if err != nil {
				return err
			}
			*code = exitCode(rev)
			return writeReview(cmd.OutOrStdout(), o.output, rev)
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "the workload's namespace (default: the kubeconfig context's)")
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	cmd.Flags().StringVar(&o.context, "context", "", "the kubeconfig context (default: the current one)")
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
	core, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rest)
	if err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	return &clients{core: core, dynamic: dyn, namespace: ns}, nil
}

// parseTarget reads TYPE/NAME, accepting kubectl's names for the types.
func parseTarget(arg string) (kind, name string, err error) {
	typ, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("want deployment/NAME, statefulset/NAME or pod/NAME, got %q", arg)
	}
	switch strings.ToLower(typ) {
	case "deployment", "deployments", "deploy", "deployment.apps":
		return "Deployment", name, nil
	case "statefulset", "statefulsets", "sts", "statefulset.apps":
		return "StatefulSet", name, nil
	case "pod", "pods", "po":
		return "Pod", name, nil
	}
	return "", "", fmt.Errorf("cannot explain %q: want deployment, statefulset or pod", typ)
}

// explain lists what the engine reads, synthesises the next pod, and
// reviews it against a snapshot built from the listed objects.
func explain(ctx context.Context, c *clients, kind, namespace, name string, cfg engine.Config) (*engine.Review, error) {
	objs, err := list(ctx, c, namespace)
	if err != nil {
		return nil, err
	}

	var pod *v1.Pod
	switch kind {
	case "Deployment":
		d, err := c.core.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("getting deployment %s/%s: %w", namespace, name, err)
		}
		pod, err = nextDeploymentPod(d, objs.replicaSets)
		if err != nil {
			return nil, err
		}
	case "StatefulSet":
		s := find(objs.statefulSets, name)
		if s == nil {
			return nil, fmt.Errorf("statefulset %s/%s not found", namespace, name)
		}
		pod = nextStatefulSetPod(s, objs.pods)
	case "Pod":
		p := find(objs.pods, name)
		if p == nil {
			return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
		}
		pod = unbound(p)
		// The pod is reviewed as if it were being created now: it must not
		// count itself where it runs.
		objs.pods = slices.DeleteFunc(objs.pods, func(o *v1.Pod) bool { return o == p })
	default:
		return nil, fmt.Errorf("cannot explain kind %q", kind)
	}

	cluster, err := snapshot.New(objs.all()...)
	if err != nil {
		return nil, fmt.Errorf("building the snapshot of the cluster: %w", err)
	}
	return review(pod, cluster, cfg)
}

// listed is what explain read from the cluster.
type listed struct {
	nodes                  []*v1.Node
	pods                   []*v1.Pod
	services               []*v1.Service
	replicationControllers []*v1.ReplicationController
	replicaSets            []*appsv1.ReplicaSet
	statefulSets           []*appsv1.StatefulSet
	namespace              *v1.Namespace
	spreadPolicies         []*v1alpha1.SpreadPolicy
	clusterSpreadPolicies  []*v1alpha1.ClusterSpreadPolicy
}

func (l *listed) all() []runtime.Object {
	var out []runtime.Object
	out = appendAll(out, l.nodes)
	out = appendAll(out, l.pods)
	out = appendAll(out, l.services)
	out = appendAll(out, l.replicationControllers)
	out = appendAll(out, l.replicaSets)
	out = appendAll(out, l.statefulSets)
	if l.namespace != nil {
		out = append(out, l.namespace)
	}
	out = appendAll(out, l.spreadPolicies)
	return appendAll(out, l.clusterSpreadPolicies)
}

func appendAll[T runtime.Object](out []runtime.Object, objs []T) []runtime.Object {
	for _, o := range objs {
		out = append(out, o)
	}
	return out
}

// list reads exactly what the webhook's informers hold that can matter for
// a pod of namespace: every node, and the namespace's own objects (spread
// counts only pods of the pod's namespace).
func list(ctx context.Context, c *clients, namespace string) (*listed, error) {
	l := &listed{}
	core, apps := c.core.CoreV1(), c.core.AppsV1()
	all := metav1.ListOptions{}

	nodes, err := core.Nodes().List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	l.nodes = pointers(nodes.Items)
	pods, err := core.Pods(namespace).List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("listing the pods of namespace %s: %w", namespace, err)
	}
	l.pods = pointers(pods.Items)
	svcs, err := core.Services(namespace).List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("listing the services of namespace %s: %w", namespace, err)
	}
	l.services = pointers(svcs.Items)
	rcs, err := core.ReplicationControllers(namespace).List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("listing the replicationcontrollers of namespace %s: %w", namespace, err)
	}
	l.replicationControllers = pointers(rcs.Items)
	rss, err := apps.ReplicaSets(namespace).List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("listing the replicasets of namespace %s: %w", namespace, err)
	}
	l.replicaSets = pointers(rss.Items)
	sss, err := apps.StatefulSets(namespace).List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("listing the statefulsets of namespace %s: %w", namespace, err)
	}
	l.statefulSets = pointers(sss.Items)

	ns, err := core.Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("namespace %s not found", namespace)
	case err != nil:
		return nil, fmt.Errorf("getting namespace %s: %w", namespace, err)
	}
	l.namespace = ns

	if l.spreadPolicies, err = listPolicies[v1alpha1.SpreadPolicy](ctx, c.dynamic.Resource(spreadPoliciesResource).Namespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the spreadpolicies of namespace %s: %w", namespace, err)
	}
	if l.clusterSpreadPolicies, err = listPolicies[v1alpha1.ClusterSpreadPolicy](ctx, c.dynamic.Resource(clusterSpreadPoliciesResource)); err != nil {
		return nil, fmt.Errorf("listing the clusterspreadpolicies: %w", err)
	}
	return l, nil
}

// listPolicies lists spreadguard's resources through the dynamic client,
// since they have no generated clientset. A cluster without the CRDs has
// no policies, which is an answer, not an error.
func listPolicies[T any, PT interface {
	*T
	runtime.Object
}](ctx context.Context, r dynamic.ResourceInterface) ([]PT, error) {
	list, err := r.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]PT, 0, len(list.Items))
	for _, u := range list.Items {
		obj := PT(new(T))
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return nil, fmt.Errorf("converting %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
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

// nextDeploymentPod is the pod the Deployment's newest ReplicaSet creates
// next: the deployment controller scales up the ReplicaSet with the highest
// revision, and the ReplicaSet controller stamps out its template.
func nextDeploymentPod(d *appsv1.Deployment, replicaSets []*appsv1.ReplicaSet) (*v1.Pod, error) {
	var newest *appsv1.ReplicaSet
	newestRev := int64(-1)
	for _, rs := range replicaSets {
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		rev, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
		if rev > newestRev || (rev == newestRev && rs.CreationTimestamp.After(newest.CreationTimestamp.Time)) {
			newest, newestRev = rs, rev
		}
	}
	if newest == nil {
		return nil, fmt.Errorf("deployment %s/%s has no ReplicaSet yet; once the deployment controller creates one, explain it again, or check a pod offline with `kubectl spread check`", d.Namespace, d.Name)
	}
	pod := podFromTemplate(&newest.Spec.Template, newest.Namespace,
		*metav1.NewControllerRef(newest, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")))
	// As the ReplicaSet controller names its pods.
	pod.GenerateName = newest.Name + "-"
	return pod, nil
}

// nextStatefulSetPod is the StatefulSet's pod at its lowest missing
// ordinal, or at the next ordinal when all exist (a scale-up by one), with
// the labels the StatefulSet controller adds.
func nextStatefulSetPod(s *appsv1.StatefulSet, pods []*v1.Pod) *v1.Pod {
	start := int32(0)
	if s.Spec.Ordinals != nil {
		start = s.Spec.Ordinals.Start
	}
	existing := map[string]bool{}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == s.UID {
			existing[p.Name] = true
		}
	}
	ordinal := start
	for existing[fmt.Sprintf("%s-%d", s.Name, ordinal)] {
		ordinal++
	}
	pod := podFromTemplate(&s.Spec.Template, s.Namespace,
		*metav1.NewControllerRef(s, appsv1.SchemeGroupVersion.WithKind("StatefulSet")))
	pod.Name = fmt.Sprintf("%s-%d", s.Name, ordinal)
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(int(ordinal))
	if s.Status.UpdateRevision != "" {
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] = s.Status.UpdateRevision
	}
	return pod
}

func podFromTemplate(t *v1.PodTemplateSpec, namespace string, owner metav1.OwnerReference) *v1.Pod {
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       namespace,
			Labels:          map[string]string{},
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	for k, v := range t.Labels {
		pod.Labels[k] = v
	}
	return pod
}

// unbound is p as it was when created: not yet on a node, no status.
func unbound(p *v1.Pod) *v1.Pod {
	pod := p.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.Spec.NodeName = ""
	pod.Status = v1.PodStatus{}
	pod.ResourceVersion, pod.UID, pod.ManagedFields = "", "", nil
	pod.CreationTimestamp = metav1.Time{}
	return pod
}
