package health_test

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// benchAudit is the benchmark's cluster: nodes in 3 zones; ReplicaSets of
// 30 replicas in 50 namespaces, 10 replicas per zone on distinct nodes;
// every pod carries a hard zone constraint and a soft hostname one, except
// one workload in 10, whose pods predate spreadguard (uncovered); one
// ClusterSpreadPolicy selects them all.
type benchAudit struct {
	ix     *spread.Index
	src    engine.Sources
	owners health.Owners
}

const (
	benchReplicas   = 30
	benchNamespaces = 50
)

var (
	benchMu    sync.Mutex
	benchSizes = map[int]*benchAudit{}
)

func benchCluster(b *testing.B, workloads int) *benchAudit {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if c := benchSizes[workloads]; c != nil {
		return c
	}
	nodes := workloads // 30 pods per node
	ix := spread.NewIndex()
	var objects []kruntime.Object
	for i := range benchNamespaces {
		objects = append(objects, pt.MakeNamespace("ns-"+strconv.Itoa(i)).Obj())
	}
	objects = append(objects, pt.MakeClusterSpreadPolicy().Name("zones").Constraint(
		pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj())
	zones := []string{"a", "b", "c"}
	for i := range nodes {
		n := st.MakeNode().Name("node-" + strconv.Itoa(i)).Zone(zones[i%3]).Obj()
		ix.AddNode(n)
	}
	c := &benchAudit{ix: ix}
	for w := range workloads {
		namespace := "ns-" + strconv.Itoa(w%benchNamespaces)
		name := "app-" + strconv.Itoa(w)
		labels := map[string]string{"app": name, "pod-template-hash": "h1"}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-h1"},
			Spec: appsv1.ReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
			},
		}
		if w%10 != 0 {
			rs.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
				st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", name).MatchLabelKeys("pod-template-hash").Obj(),
				st.Constraint(1, v1.LabelHostname).ScheduleAnyway().MatchLabel("app", name).MatchLabelKeys("pod-template-hash").Obj(),
			}
		}
		objects = append(objects, rs)
		c.owners.ReplicaSets = append(c.owners.ReplicaSets, rs)
		for r := range benchReplicas {
			// Replica r of workload w lands on a node of zone r%3; the
			// workloads are offset so that every node holds 30 pods.
			node := (w*benchReplicas + r) % nodes
			node -= node % 3
			node += r % 3
			ix.AddPod(st.MakePod().Namespace(namespace).Name(name + "-" + strconv.Itoa(r)).
				Labels(labels).Node("node-" + strconv.Itoa(node%nodes)).Obj())
		}
	}
	store, err := lookup.NewStore(objects...)
	if err != nil {
		b.Fatalf("building the store: %v", err)
	}
	c.src = lookup.NewSources(store)
	benchSizes[workloads] = c
	return c
}

// BenchmarkAuditPass is one full pass: finding the workloads and auditing
// each. cpu-ms/op is the process's CPU time, garbage collection included;
// alloc-MiB/op bounds the extra heap a pass needs.
func BenchmarkAuditPass(b *testing.B) {
	for _, workloads := range []int{50, 5000} {
		c := benchCluster(b, workloads)
		b.Run(fmt.Sprintf("nodes=%d,pods=%d,workloads=%d", workloads, workloads*benchReplicas, workloads), func(b *testing.B) {
			pass := func() []health.Result {
				rs, err := health.Run(c.ix, c.src, engine.Config{}, health.Workloads(c.owners, c.ix))
				if err != nil || len(rs) != workloads {
					b.Fatalf("health.Run() = %d results, %v; want %d", len(rs), err, workloads)
				}
				return rs
			}
			measure(b, func() { pass() })
			b.ReportMetric(retainedMiB(pass), "retained-MiB")
		})
	}
}

// BenchmarkAuditBaselineCheck is the baseline: one admission check
// (Index.Check) of a pod of each workload, the work the webhook does for
// as many pod creations.
func BenchmarkAuditBaselineCheck(b *testing.B) {
	for _, workloads := range []int{50, 5000} {
		c := benchCluster(b, workloads)
		ws := health.Workloads(c.owners, c.ix)
		b.Run(fmt.Sprintf("nodes=%d,pods=%d,workloads=%d", workloads, workloads*benchReplicas, workloads), func(b *testing.B) {
			measure(b, func() {
				for _, w := range ws {
					if _, err := c.ix.Check(w.Pod, spread.Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// retainedMiB is the heap that the results of op keep alive once
// garbage is collected: what a pass adds to the replica's heap between
// passes.
func retainedMiB(op func() []health.Result) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rs := op()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(rs)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / (1 << 20)
}

// measure runs op b.N times and reports its CPU time and allocated bytes
// per run in units that read against the targets (2 s, 50 MiB).
func measure(b *testing.B, op func()) {
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
