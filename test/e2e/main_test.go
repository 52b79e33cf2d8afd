//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// The suite's knobs, all optional except a reachable cluster.
const (
	// envWebhookLog names the webhook's log file when it runs as a local
	// process; failed tests print what it wrote while they ran. On a cluster
	// the logs of the pods behind the webhook Service are collected instead.
	envWebhookLog = "SPREADGUARD_E2E_WEBHOOK_LOG"
	// envStopCmd and envStartCmd are shell commands that stop the webhook
	// and start it again (`kubectl scale` on kind, a signal to the local
	// process for `make e2e`). Without them the outage scenario points a copy
	// of the webhook configuration at an address where nothing listens.
	envStopCmd  = "SPREADGUARD_E2E_STOP_CMD"
	envStartCmd = "SPREADGUARD_E2E_START_CMD"
	// envArtifacts is where failed tests write their logs (default
	// _artifacts next to this file).
	envArtifacts = "SPREADGUARD_E2E_ARTIFACTS"
	// envKubectlSpread is the kubectl-spread binary for the explain
	// scenario (default: kubectl-spread in ../../bin or on PATH).
	envKubectlSpread = "SPREADGUARD_E2E_KUBECTL_SPREAD"
)

const (
	zoneKey = v1.LabelTopologyZone
	hostKey = v1.LabelHostname
	// e2eLabel marks every namespace the suite creates.
	e2eLabel = "spreadguard.io/e2e"
	// cordonedAnnotation marks a node the suite cordoned, so that a run
	// killed halfway is repaired by the next one.
	cordonedAnnotation = "spreadguard.io/e2e-cordoned"

	policyAnnotation = v1alpha1.AnnotationPolicy

	mutatePodPath   = "/mutate-v1-pod"
	validatePodPath = "/validate-v1-pod"
)

var (
	scheme     = runtime.NewScheme()
	restConfig *rest.Config
	k8s        client.Client
	clientset  kubernetes.Interface
	cluster    clusterInfo
)

// clusterInfo is what the suite learned about the cluster before any test.
type clusterInfo struct {
	// zones are the zones of the schedulable nodes, sorted.
	zones []string
	// nodesByZone lists the schedulable nodes of each zone.
	nodesByZone map[string][]string
	// mutating and validating are spreadguard's pod webhooks, found by the
	// paths they call, whatever the installation named them.
	mutating   []namedWebhook
	validating []namedWebhook
}

// namedWebhook is one webhook of a configuration.
type namedWebhook struct {
	configuration     string
	name              string
	failurePolicy     admissionregistrationv1.FailurePolicyType
	namespaceSelector *metav1.LabelSelector
	clientConfig      admissionregistrationv1.WebhookClientConfig
}

func TestMain(m *testing.M) {
	if err := setUp(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setUp() error {
	// The suite's client hears the API server's warnings (the forecast of a
	// scale, say) through controller-runtime's logger; the scenarios that
	// care read them with their own handlers.
	ctrllog.SetLogger(logr.Discard())
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	// The dump for kubectl-spread check lists every kind spreadguard reads
	// (Karpenter's NodePools and the node classes among them): the scheme is
	// the webhook's own.
	if err := cache.AddToScheme(scheme); err != nil {
		return err
	}
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("no kubeconfig: %w (set KUBECONFIG to a cluster with spreadguard installed; `make e2e` starts one)", err)
	}
	cfg.Timeout = 30 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	restConfig = cfg

	clientset, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	reach := *cfg
	reach.Timeout = 10 * time.Second
	probe, err := kubernetes.NewForConfig(&reach)
	if err != nil {
		return err
	}
	version, err := probe.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("no cluster reachable at %s: %w (set KUBECONFIG to a running cluster; `make e2e` starts one)", cfg.Host, err)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster %s, Kubernetes %s\n", cfg.Host, version.GitVersion)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := uncordonLeftovers(ctx); err != nil {
		return err
	}
	if cluster, err = discoverNodes(ctx); err != nil {
		return err
	}
	for _, z := range cluster.zones {
		fmt.Fprintf(os.Stderr, "e2e: zone %s: %s\n", z, strings.Join(cluster.nodesByZone[z], ", "))
	}
	if os.Getenv(envPhase) == phaseUpgrade {
		// The upgrade scenario installs spreadguard itself.
		return nil
	}
	if err := discoverWebhooks(ctx, &cluster); err != nil {
		return err
	}
	start := time.Now()
	if err := waitServing(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: spreadguard answers (waited %v)\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// waitServing waits until the API server calls spreadguard's validating
// webhook, which denies a pod that no node can take. Right after an install
// the API server may not know the webhook configurations yet, or
// cert-manager not have filled in their caBundle.
func waitServing(ctx context.Context) error {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-ready-", Labels: map[string]string{e2eLabel: "true"}}}
	if err := k8s.Create(ctx, ns); err != nil {
		return fmt.Errorf("create a namespace: %w", err)
	}
	defer func() { _ = k8s.Delete(context.WithoutCancel(ctx), ns) }()
	policy := &v1alpha1.SpreadPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "deny"},
		Spec: v1alpha1.SpreadPolicySpec{
			Constraints: []v1alpha1.Constraint{{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: v1.DoNotSchedule}},
			Validation:  &v1alpha1.ValidationSpec{Action: v1alpha1.ActionDeny},
		},
	}
	if err := k8s.Create(ctx, policy); err != nil {
		return fmt.Errorf("create a SpreadPolicy: %w", err)
	}
	p := impossiblePod(ns.Name)
	err := poll(ctx, 50*time.Second, func(ctx context.Context) error {
		err := k8s.Create(ctx, p.DeepCopy(), client.DryRunAll)
		if deniedByWebhook(err) {
			return nil
		}
		return fmt.Errorf("want a denial from the webhook, got %v", err)
	})
	if err != nil {
		return fmt.Errorf("spreadguard does not answer: %w", err)
	}
	return nil
}

// impossiblePod is a pod that no node can take, as no node has the
// topology key of its hard constraint: the webhook denies it wherever a
// Deny policy applies.
func impossiblePod(ns string) *v1.Pod {
	return pod(spreadtest.MakePod().Namespace(ns).Name("impossible").Label("e2e-probe", "true").
		SpreadConstraint(spreadtest.Constraint(1, "e2e.spreadguard.io/no-such-label").DoNotSchedule().MatchLabel("e2e-probe", "true").Obj()))
}

// deniedByWebhook says whether err is an admission webhook's denial, not,
// say, the ServiceAccount admission plugin's refusal, also a 403.
func deniedByWebhook(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "admission webhook")
}

// uncordonLeftovers undoes the cordons of a run that was killed before its
// cleanup could.
func uncordonLeftovers(ctx context.Context) error {
	var nodes v1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if _, ok := n.Annotations[cordonedAnnotation]; !ok {
			continue
		}
		fmt.Fprintf(os.Stderr, "e2e: uncordoning node %s, left cordoned by an earlier run\n", n.Name)
		if err := setCordon(ctx, n.Name, false); err != nil {
			return err
		}
	}
	return nil
}

// discoverNodes finds the zones of the schedulable nodes.
func discoverNodes(ctx context.Context) (clusterInfo, error) {
	info := clusterInfo{nodesByZone: map[string][]string{}}
	var nodes v1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		return info, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		zone, ok := n.Labels[zoneKey]
		if !ok || !schedulable(n) {
			continue
		}
		info.nodesByZone[zone] = append(info.nodesByZone[zone], n.Name)
	}
	for z := range info.nodesByZone {
		info.zones = append(info.zones, z)
		sort.Strings(info.nodesByZone[z])
	}
	sort.Strings(info.zones)
	if len(info.zones) != 3 {
		return info, fmt.Errorf("the suite needs Ready, schedulable, untainted nodes in exactly 3 zones (label %s); found %d: %v",
			zoneKey, len(info.zones), info.nodesByZone)
	}
	return info, nil
}

// discoverWebhooks finds spreadguard's pod webhooks, and fails when it is
// not installed.
func discoverWebhooks(ctx context.Context, info *clusterInfo) error {
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	if err := k8s.List(ctx, &mutating); err != nil {
		return fmt.Errorf("list mutating webhook configurations: %w", err)
	}
	for _, c := range mutating.Items {
		for _, w := range c.Webhooks {
			if webhookPath(w.ClientConfig) == mutatePodPath {
				info.mutating = append(info.mutating, named(c.Name, w.Name, w.FailurePolicy, w.NamespaceSelector, w.ClientConfig))
			}
		}
	}
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := k8s.List(ctx, &validating); err != nil {
		return fmt.Errorf("list validating webhook configurations: %w", err)
	}
	for _, c := range validating.Items {
		for _, w := range c.Webhooks {
			if webhookPath(w.ClientConfig) == validatePodPath {
				info.validating = append(info.validating, named(c.Name, w.Name, w.FailurePolicy, w.NamespaceSelector, w.ClientConfig))
			}
		}
	}
	if len(info.mutating) == 0 || len(info.validating) == 0 {
		return fmt.Errorf("spreadguard is not installed: no webhook configuration calls %s and %s (found %d and %d); install the chart first",
			mutatePodPath, validatePodPath, len(info.mutating), len(info.validating))
	}
	if _, err := k8s.RESTMapper().RESTMapping(v1alpha1.Kind(v1alpha1.KindSpreadPolicy), v1alpha1.GroupVersion.Version); err != nil {
		return fmt.Errorf("the SpreadPolicy CRD is not installed: %w", err)
	}
	return nil
}

func named(conf, name string, fp *admissionregistrationv1.FailurePolicyType, sel *metav1.LabelSelector, cc admissionregistrationv1.WebhookClientConfig) namedWebhook {
	w := namedWebhook{configuration: conf, name: name, clientConfig: cc, namespaceSelector: sel}
	if fp != nil {
		w.failurePolicy = *fp
	}
	return w
}

func webhookPath(cc admissionregistrationv1.WebhookClientConfig) string {
	if cc.Service != nil && cc.Service.Path != nil {
		return *cc.Service.Path
	}
	if cc.URL != nil {
		u := *cc.URL
		if i := strings.Index(u, "://"); i >= 0 {
			u = u[i+3:]
		}
		if i := strings.Index(u, "/"); i >= 0 {
			return strings.SplitN(u[i:], "?", 2)[0]
		}
	}
	return ""
}

// schedulable says whether the scheduler may place an ordinary pod on n.
func schedulable(n *v1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			return false
		}
	}
	return slices.ContainsFunc(n.Status.Conditions, func(c v1.NodeCondition) bool {
		return c.Type == v1.NodeReady && c.Status == v1.ConditionTrue
	})
}

// setCordon cordons or uncordons a node, marking it so that an interrupted
// run can be repaired, and waits until the node-lifecycle controller has
// added or removed the unschedulable taint: with nodeTaintsPolicy Honor the
// scheduler and the webhook count taints, not spec.unschedulable.
func setCordon(ctx context.Context, node string, cordon bool) error {
	var patch string
	if cordon {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}},"spec":{"unschedulable":true}}`, cordonedAnnotation)
	} else {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"unschedulable":null}}`, cordonedAnnotation)
	}
	n := &v1.Node{}
	n.Name = node
	if err := k8s.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("patch node %s: %w", node, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := k8s.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return fmt.Errorf("get node %s: %w", node, err)
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeUnschedulable })
		if tainted == cordon {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: the %s taint is still %s 30s after the cordon changed (is the node-lifecycle controller running?)",
				node, v1.TaintNodeUnschedulable, map[bool]string{true: "absent", false: "present"}[cordon])
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("node %s: waiting for the unschedulable taint", node), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
