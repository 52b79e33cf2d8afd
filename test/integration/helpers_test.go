//go:build integration

package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// propagation bounds how long the webhook's informers may take to see an
// object the test just created.
const propagation = 30 * time.Second

// newNamespace creates a namespace named after the scenario.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	create(t, ns)
	return ns.Name
}

// create creates obj through the apiserver, failing the test on error.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := suite.client.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName()+obj.GetGenerateName(), err)
	}
}

// storedPod reads a pod back from the apiserver, bypassing every cache.
func storedPod(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{}
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatalf("reading pod %s/%s: %v", ns, name, err)
	}
	return pod
}

// podObj completes a spreadtest pod with what the apiserver requires.
func podObj(w *spreadtest.PodWrapper) *v1.Pod {
	p := w.Obj()
	p.Spec.Containers = []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}
	return p
}

// controlledBy makes owner the controller of pod, with its real uid.
func controlledBy(pod *v1.Pod, owner client.Object, kind string) *v1.Pod {
	gvk := appsv1.SchemeGroupVersion.WithKind(kind)
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)}
	return pod
}

// replicaSet returns a ReplicaSet selecting matchLabels, with a valid
// template.
func replicaSet(ns, name string, matchLabels map[string]string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: matchLabels},
			Template: podTemplate(matchLabels),
		},
	}
}

func podTemplate(labels map[string]string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// zonePolicy is a SpreadPolicy with one hard zone constraint, maxSkew 1.
func zonePolicy(ns string) *policytest.SpreadPolicyWrapper {
	return policytest.MakeSpreadPolicy().Namespace(ns).Name("zones").
		Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj())
}

// waitForPolicy waits until the webhook's cache holds the namespace's
// policy: a dry-run pod of a probe ReplicaSet comes back annotated with it.
// Dry runs go through the webhooks (sideEffects None or NoneOnDryRun) and
// store nothing.
func waitForPolicy(t *testing.T, ns string) {
	t.Helper()
	probe := replicaSet(ns, "probe", map[string]string{"app": "probe"})
	create(t, probe)
	pod := controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name("probe").Label("app", "probe")), probe, "ReplicaSet")
	eventually(t, "the webhook applies the namespace's policy to a probe pod", func(ctx context.Context) (bool, error) {
		p := pod.DeepCopy()
		if err := suite.client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err
		}
		return p.Annotations[v1alpha1.AnnotationPolicy] != "", nil
	})
}

// eventually polls cond until it holds, for at most propagation.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, propagation, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", what, propagation, last)
	}
}

// ensureZoneNodes creates, once, nodes a1 (zone-a), b1 (zone-b) and c1
// (zone-c), c1 cordoned and tainted node.kubernetes.io/unschedulable.
func ensureZoneNodes(t *testing.T) {
	t.Helper()
	for _, n := range []*v1.Node{
		spreadtest.MakeNode().Name("a1").Zone("zone-a").Obj(),
		spreadtest.MakeNode().Name("b1").Zone("zone-b").Obj(),
		spreadtest.MakeNode().Name("c1").Zone("zone-c").Cordoned().Obj(),
	} {
		createNode(t, n)
	}
}

// createNode creates n unless a node of its name exists, with the taints
// it was given.
func createNode(t *testing.T, n *v1.Node) {
	t.Helper()
	want := n.Spec.Taints
	if err := suite.client.Create(t.Context(), n); apierrors.IsAlreadyExists(err) {
		return
	} else if err != nil {
		t.Fatalf("creating node %s: %v", n.Name, err)
	}
	// The TaintNodesByCondition admission plugin taints every new node
	// not-ready; the node lifecycle controller would lift that once the
	// kubelet reports Ready. No kubelet runs here, so lift it the same way.
	if diff := cmp.Diff(want, n.Spec.Taints); diff != "" {
		n.Spec.Taints = want
		if err := suite.client.Update(t.Context(), n); err != nil {
			t.Fatalf("lifting the not-ready taint of node %s: %v", n.Name, err)
		}
	}
}

// warningRecorder collects the warnings the apiserver returns.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, message string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, message)
}

func (w *warningRecorder) contains(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.warnings {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// clientWithWarnings returns a client whose warnings go to the recorder.
func clientWithWarnings(t *testing.T) (client.Client, *warningRecorder) {
	t.Helper()
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(suite.restConfig)
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: suite.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// warningEvent reports whether namespace ns holds a Warning event
// (events.k8s.io) about the object called regarding, with reason and a note
// that contains note.
func warningEvent(ctx context.Context, ns, regarding, reason, note string) (bool, error) {
	var list eventsv1.EventList
	if err := suite.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == regarding && e.Reason == reason && e.Type == v1.EventTypeWarning && strings.Contains(e.Note, note) {
			return true, nil
		}
	}
	return false, nil
}
