package health_test

import (
	"fmt"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

const ns = "shop"

// clusterBuilder builds a cluster for the audit: nodes, policies and
// workloads with their pods. Start with newCluster.
type clusterBuilder struct {
	objects []runtime.Object
	owners  health.Owners
	pods    int
	// deployments are the Deployments' builders, whose templates run
	// makes their newest ReplicaSets'.
	deployments []*workloadBuilder
}

func newCluster() *clusterBuilder {
	c := &clusterBuilder{}
	c.objects = append(c.objects, pt.MakeNamespace(ns).Obj())
	return c
}

// Zone adds nodes named zone-0 ... in zone, shaped by opts.
func (c *clusterBuilder) Zone(zone string, nodes int, opts ...func(*st.NodeWrapper)) *clusterBuilder {
	opts = append([]func(*st.NodeWrapper){func(n *st.NodeWrapper) { n.Zone(zone) }}, opts...)
	for _, n := range st.Nodes(zone, nodes, opts...) {
		c.objects = append(c.objects, n)
	}
	return c
}

// Policy adds a SpreadPolicy of the namespace holding cs.
func (c *clusterBuilder) Policy(name string, cs ...v1alpha1.Constraint) *clusterBuilder {
	c.objects = append(c.objects, pt.MakeSpreadPolicy().Namespace(ns).Name(name).Constraint(cs...).Obj())
	return c
}

// workloadBuilder adds a workload and its pods. Its pods go to the
// newest ReplicaSet of a Deployment.
type workloadBuilder struct {
	c      *clusterBuilder
	labels map[string]string
	// rs is the ReplicaSet added last (nil for a Service), and tmpl its
	// template.
	rs   *appsv1.ReplicaSet
	tmpl *v1.PodTemplateSpec
	// deployment is set for a Deployment, whose revisions Rollout adds.
	deployment *appsv1.Deployment
	revision   int
	// carried is what the pods added next carry beside the template.
	carried []v1.TopologySpreadConstraint
}

// ReplicaSet adds a ReplicaSet without owner whose pods carry app=name.
func (c *clusterBuilder) ReplicaSet(name string) *workloadBuilder {
	w := &workloadBuilder{c: c, labels: map[string]string{"app": name}}
	w.rs = c.addReplicaSet(name, w.labels, nil)
	w.tmpl = &w.rs.Spec.Template
	return w
}

// owned adds obj, a workload of any kind whose pod template is tmpl, with
// pods carrying tmpl's labels. obj is the audit's only: the Store holds
// the kinds of its scheme.
func (c *clusterBuilder) owned(obj workload.Object, tmpl *v1.PodTemplateSpec) *workloadBuilder {
	c.owners.Workloads = append(c.owners.Workloads, obj)
	return &workloadBuilder{c: c, labels: tmpl.Labels, tmpl: tmpl}
}

// Deployment adds a Deployment with its first ReplicaSet, revision 1. Its
// template is its newest ReplicaSet's, the pod-template-hash aside.
func (c *clusterBuilder) Deployment(name string) *workloadBuilder {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	c.objects = append(c.objects, d)
	c.owners.Workloads = append(c.owners.Workloads, d)
	w := &workloadBuilder{c: c, deployment: d}
	c.deployments = append(c.deployments, w)
	return w.Rollout()
}

// Service adds a Service selecting app=name and pods no controller owns.
func (c *clusterBuilder) Service(name string) *workloadBuilder {
	w := &workloadBuilder{c: c, labels: map[string]string{"app": name}, tmpl: &v1.PodTemplateSpec{}}
	svc := st.MakeService().Name(name).Namespace(ns).Selector("app", name).Obj()
	c.objects = append(c.objects, svc)
	c.owners.Services = append(c.owners.Services, svc)
	return w
}

// Rollout adds the Deployment's next ReplicaSet, with the constraints of
// the current one; later pods are its pods.
func (w *workloadBuilder) Rollout() *workloadBuilder {
	w.revision++
	hash := "h" + strconv.Itoa(w.revision)
	w.labels = map[string]string{"app": w.deployment.Name, "pod-template-hash": hash}
	var cs []v1.TopologySpreadConstraint
	if w.tmpl != nil {
		cs = w.tmpl.Spec.TopologySpreadConstraints
	}
	yes := true
	owner := metav1.OwnerReference{Kind: "Deployment", APIVersion: "apps/v1", Name: w.deployment.Name, UID: w.deployment.UID, Controller: &yes}
	w.rs = w.c.addReplicaSet(w.deployment.Name+"-"+hash, w.labels, func(rs *appsv1.ReplicaSet) {
		rs.OwnerReferences = []metav1.OwnerReference{owner}
		rs.Annotations = map[string]string{"deployment.kubernetes.io/revision": strconv.Itoa(w.revision)}
	})
	w.tmpl = &w.rs.Spec.Template
	w.tmpl.Spec.TopologySpreadConstraints = cs
	return w
}

func (c *clusterBuilder) addReplicaSet(name string, labels map[string]string, opt func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
		},
	}
	if opt != nil {
		opt(rs)
	}
	c.objects = append(c.objects, rs)
	c.owners.Workloads = append(c.owners.Workloads, rs)
	return rs
}

// Constraint makes the workload's pods carry c, selecting the pods by
// their app label (a Deployment's revisions by matchLabelKeys).
func (w *workloadBuilder) Constraint(c *st.ConstraintWrapper) *workloadBuilder {
	c.MatchLabel("app", w.labels["app"])
	w.tmpl.Spec.TopologySpreadConstraints = append(w.tmpl.Spec.TopologySpreadConstraints, c.Obj())
	return w
}

// Label adds k=v to the labels of the workload's pods, and so to a
// ReplicaSet's selector and template, which share the map.
func (w *workloadBuilder) Label(k, v string) *workloadBuilder {
	w.labels[k] = v
	return w
}

// Injected makes the pods added next carry c, selecting the pods by their
// app label, while the template declares nothing: the webhook injected it
// when they were created. None makes them carry nothing again.
func (w *workloadBuilder) Injected(c *st.ConstraintWrapper) *workloadBuilder {
	c.MatchLabel("app", w.labels["app"])
	w.carried = append(w.carried, c.Obj())
	return w
}

// None makes the pods added next carry no constraint: created before
// spreadguard was installed.
func (w *workloadBuilder) None() *workloadBuilder {
	w.carried = nil
	return w
}

// Selector replaces the ReplicaSet's selector with sel, which the API
// server may have stored before it validated selectors.
func (w *workloadBuilder) Selector(sel *metav1.LabelSelector) *workloadBuilder {
	w.rs.Spec.Selector = sel
	return w
}

// Pods binds n pods of the workload to node.
func (w *workloadBuilder) Pods(node string, n int) *workloadBuilder {
	return w.pods(node, n, func(*st.PodWrapper) {})
}

// TerminatingPods binds n pods being deleted to node.
func (w *workloadBuilder) TerminatingPods(node string, n int) *workloadBuilder {
	return w.pods(node, n, func(p *st.PodWrapper) { p.Terminating() })
}

func (w *workloadBuilder) pods(node string, n int, opt func(*st.PodWrapper)) *workloadBuilder {
	for range n {
		w.c.pods++
		p := st.MakePod().Namespace(ns).Name(fmt.Sprintf("pod-%d", w.c.pods)).Labels(w.labels).Node(node)
		for _, c := range w.carried {
			p.SpreadConstraint(c)
		}
		opt(p)
		w.c.objects = append(w.c.objects, p.Obj())
	}
	return w
}

// And returns to the cluster.
func (w *workloadBuilder) And() *clusterBuilder { return w.c }

// run audits the cluster.
func (c *clusterBuilder) run(t *testing.T) []health.Result {
	t.Helper()
	for _, w := range c.deployments {
		w.deployment.Spec.Template = *w.tmpl.DeepCopy()
		delete(w.deployment.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	}
	store, err := lookup.NewStore(c.objects...)
	if err != nil {
		t.Fatalf("building the store: %v", err)
	}
	ix := spread.IndexFromSnapshot(store.Snapshot())
	return health.Run(ix, lookup.NewSources(store), engine.Config{}, health.Workloads(c.owners, ix))
}

func threeZoneNodes() []*v1.Node {
	var out []*v1.Node
	for _, z := range []string{"a", "b", "c"} {
		out = append(out, st.Nodes(z, 1, func(n *st.NodeWrapper) { n.Zone(z) })...)
	}
	return out
}

func webPod(node string) *v1.Pod {
	return st.MakePod().Namespace(ns).Name("web-"+node).Label("app", "web").Node(node).Obj()
}
