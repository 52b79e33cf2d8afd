// Package healthtest builds the clusters the benchmarks of spread health
// run on: pkg/health's audit alone, and pkg/controller/spreadhealth's
// whole pass with its writes.
package healthtest

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// Replicas is the number of pods of each workload.
const Replicas = 30

// Cluster is a cluster of Deployments, each with its ReplicaSet, in 3 zones, with as
// many nodes as workloads (30 pods per node, 10 replicas of each workload
// per zone on distinct nodes), spread over some namespaces, and one
// ClusterSpreadPolicy "zones" (a hard zone constraint and a soft hostname
// one) selecting them all. The templates declare no constraint, as most
// do: the pods carry what the webhook injected at their creation, except
// one workload in 10, whose pods predate spreadguard (uncovered).
type Cluster struct {
	Index  *spread.Index
	Store  *lookup.Store
	Owners health.Owners
	// Policy is the Store's policy itself: a test may write its status, as
	// the API server and the cache would.
	Policy *v1alpha1.ClusterSpreadPolicy
	// replicaSets are the Deployments' ReplicaSets, one each.
	replicaSets []*appsv1.ReplicaSet
}

// Sources answers the engine's lookups from the Store.
func (c *Cluster) Sources() engine.Sources { return lookup.NewSources(c.Store) }

// String names the cluster's size, for a benchmark's name.
func (c *Cluster) String() string {
	n := len(c.replicaSets)
	return fmt.Sprintf("nodes=%d,pods=%d,workloads=%d", n, n*Replicas, n)
}

// New builds a Cluster of workloads spread over namespaces ns-0, ns-1...
func New(workloads, namespaces int) (*Cluster, error) {
	nodes := workloads
	c := &Cluster{Index: spread.NewIndex()}
	objects := make([]kruntime.Object, 0, namespaces+1+2*workloads)
	for i := range namespaces {
		objects = append(objects, pt.MakeNamespace("ns-"+strconv.Itoa(i)).Obj())
	}
	c.Policy = pt.MakeClusterSpreadPolicy().Name("zones").Constraint(
		pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj(),
		pt.MakeConstraint().Hostname().MaxSkew(1).ScheduleAnyway().Obj()).Obj()
	c.Policy.Generation = 1
	objects = append(objects, c.Policy)
	zones := []string{"a", "b", "c"}
	for i := range nodes {
		c.Index.AddNode(st.MakeNode().Name("node-" + strconv.Itoa(i)).Zone(zones[i%3]).Obj())
	}
	yes := true
	for w := range workloads {
		namespace := "ns-" + strconv.Itoa(w%namespaces)
		name := "app-" + strconv.Itoa(w)
		labels := map[string]string{"app": name, "pod-template-hash": "h1"}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-h1",
				Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: types.UID("uid-" + name), Controller: &yes}}},
			Spec: appsv1.ReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
			},
		}
		// The Deployment's template is its ReplicaSet's, but for the
		// pod-template-hash: rs is its current ReplicaSet.
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}},
			},
		}
		objects = append(objects, d, rs)
		c.Owners.Workloads = append(c.Owners.Workloads, d, rs)
		c.replicaSets = append(c.replicaSets, rs)
	}
	store, err := lookup.NewStore(objects...)
	if err != nil {
		return nil, fmt.Errorf("building the store: %w", err)
	}
	c.Store = store
	src := c.Sources()
	for w, rs := range c.replicaSets {
		pod := st.MakePod().Namespace(rs.Namespace).Labels(rs.Spec.Template.Labels).ControlledBy("ReplicaSet", "apps/v1", rs.Name).Obj()
		if w%10 != 0 {
			m, err := engine.Mutate(pod, src, engine.Config{})
			if err != nil || m.Pod == nil {
				return nil, fmt.Errorf("injecting the constraints of %s: %v, %v", rs.Name, m, err)
			}
			pod = m.Pod
		}
		for r := range Replicas {
			// Replica r of workload w lands on a node of zone r%3; the
			// workloads are offset so that every node holds 30 pods.
			node := (w*Replicas + r) % nodes
			node -= node % 3
			node += r % 3
			p := pod.DeepCopy()
			p.Name = rs.Name + "-" + strconv.Itoa(r)
			p.Spec.NodeName = "node-" + strconv.Itoa(node%nodes)
			p.Status.Phase = v1.PodRunning
			c.Index.AddPod(p)
		}
	}
	return c, nil
}

// Measure runs op b.N times and reports its CPU time (the process's,
// garbage collection included: what a pass costs the replica that runs
// it, on a machine where wall time also counts waiting for a core) and
// the bytes it allocates per run, in units that read against the targets
// (2 s, 50 MiB).
func Measure(b *testing.B, op func()) {
	b.Helper()
	b.ReportAllocs()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start, ok := processCPU()
	b.ResetTimer()
	for b.Loop() {
		op()
	}
	b.StopTimer()
	end, _ := processCPU()
	runtime.ReadMemStats(&after)
	if ok {
		b.ReportMetric(float64((end-start).Milliseconds())/float64(b.N), "cpu-ms/op")
	}
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
}
