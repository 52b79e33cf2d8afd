package spread_test

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// benchWorkload is one Deployment of the benchmark cluster (clusterOf) as
// a keeper holds it: its template (a pod carrying the zone and hostname
// constraints of the cluster's incoming pod) and its pods.
type benchWorkload struct {
	template *v1.Pod
	pods     []*v1.Pod
}

// benchWorkloads returns the Deployments of the cluster of nodes nodes,
// in the order clusterOf makes them.
func benchWorkloads(nodes int) []benchWorkload {
	c := clusterOf(nodes)
	var out []benchWorkload
	for start := 0; start < len(c.snap.Pods); start += replicas {
		pods := c.snap.Pods[start : start+replicas]
		tmpl := pods[0].DeepCopy()
		tmpl.Name, tmpl.Spec.NodeName = pods[0].Labels["app"]+"-template", ""
		for _, tsc := range c.incoming.Spec.TopologySpreadConstraints {
			tsc.LabelSelector = st.WithMatchLabel(nil, "app", pods[0].Labels["app"])
			tmpl.Spec.TopologySpreadConstraints = append(tmpl.Spec.TopologySpreadConstraints, tsc)
		}
		out = append(out, benchWorkload{template: tmpl, pods: pods})
	}
	return out
}

// wideWorkload adds to ix a Deployment of n replicas, one per node of c
// from the first, in namespace "big", and returns it.
func wideWorkload(ix *spread.Index, c *benchCluster, n int) benchWorkload {
	w := benchWorkload{template: st.MakePod().Name("wide-template").Namespace("big").
		Label("app", "wide").Label("pod-template-hash", "7f9c").
		SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "wide").MatchLabelKeys("pod-template-hash").Obj()).
		SpreadConstraint(st.Constraint(1, v1.LabelHostname).MatchLabel("app", "wide").MatchLabelKeys("pod-template-hash").Obj()).Obj()}
	for i := range n {
		p := st.MakePod().Name(fmt.Sprintf("wide-%d", i)).Namespace("big").Label("app", "wide").Label("pod-template-hash", "7f9c").
			Node(c.snap.Nodes[i].Name).Phase(v1.PodRunning).Obj()
		ix.AddPod(p)
		w.pods = append(w.pods, p)
	}
	return w
}

// deletionEvents are the pod events of a workload a keeper follows, each
// as a pair that brings the index back where it started: a pod created on
// a node of its own and deleted as the ReplicaSet controller deletes (the
// cheapest), and a pod evicted from the middle of its stacks and created
// again.
func deletionEvents(ix *spread.Index, w benchWorkload, free *v1.Node, o *spread.DeletionOrder) map[string]func(i int) []string {
	created := w.pods[0].DeepCopy()
	created.Name, created.Spec.NodeName = created.Name+"-new", free.Name
	// In the middle of its zone's stack and of no use to the order's top.
	middle := w.pods[len(w.pods)/2]
	return map[string]func(i int) []string{
		"create-delete": func(i int) []string {
			if i%2 == 0 {
				ix.AddPod(created)
			} else {
				ix.DeletePod(created)
			}
			return []string{created.Name}
		},
		"evict-create": func(i int) []string {
			if i%2 == 0 {
				ix.DeletePod(middle)
			} else {
				ix.AddPod(middle)
			}
			return []string{middle.Name}
		},
	}
}

// BenchmarkDeletionOrderEvent measures what a keeper adds to a pod event
// of a workload it keeps: the event into the index, then the order's
// Update, which reads the workload's counts from the index and returns the
// costs to write. Its baseline is BenchmarkDeletionOrderRebuild. changes/op
// is the costs written per event.
func BenchmarkDeletionOrderEvent(b *testing.B) {
	benchDeletionEvents(b, func(b *testing.B, ix *spread.Index, w benchWorkload, o *spread.DeletionOrder, names []string) int {
		return len(o.Update(ix, names...))
	})
}

// BenchmarkDeletionOrderRebuild is the baseline of
// BenchmarkDeletionOrderEvent: the same events, each followed by the
// workload's costs computed afresh, as a keeper holding no order would.
// Its changes/op counts every cost computed: without an order's memory,
// each is to be compared with the cost written.
func BenchmarkDeletionOrderRebuild(b *testing.B) {
	benchDeletionEvents(b, func(b *testing.B, ix *spread.Index, w benchWorkload, _ *spread.DeletionOrder, _ []string) int {
		o, err := spread.NewDeletionOrder(w.template)
		if err != nil {
			b.Fatal(err)
		}
		return len(o.Update(ix, names(w.pods)...))
	})
}

func benchDeletionEvents(b *testing.B, update func(b *testing.B, ix *spread.Index, w benchWorkload, o *spread.DeletionOrder, names []string) int) {
	const nodes = 5000
	c := clusterOf(nodes)
	ix := spread.IndexFromSnapshot(c.snap)
	all := benchWorkloads(nodes)
	workloads := map[int]benchWorkload{replicas: all[len(all)/2], 3000: wideWorkload(ix, c, 3000)}
	for _, n := range []int{replicas, 3000} {
		w := workloads[n]
		o, err := spread.NewDeletionOrder(w.template)
		if err != nil {
			b.Fatal(err)
		}
		if got := len(o.Update(ix, names(w.pods)...)); got != n {
			b.Fatalf("the first Update() costed %d pods, want %d", got, n)
		}
		events := deletionEvents(ix, w, c.snap.Nodes[nodes-1], o)
		for _, name := range []string{"create-delete", "evict-create"} {
			ev := events[name]
			b.Run(fmt.Sprintf("%s,replicas=%d/%s", sizeName(nodes), n, name), func(b *testing.B) {
				b.ReportAllocs()
				i, changes := 0, 0
				cpu := startCPU()
				for b.Loop() {
					changes += update(b, ix, w, o, ev(i))
					i++
				}
				cpu.report(b, i)
				b.ReportMetric(float64(changes)/float64(i), "changes/op")
				if i%2 == 1 {
					o.Update(ix, ev(i)...)
				}
			})
		}
	}
}

// BenchmarkDeletionOrderStart measures a keeper's start: an order for each
// of the cluster's 5,000 Deployments and the costs of all its 150,000
// pods. ns/pod is the time per pod costed. Its baseline is
// BenchmarkDeletionOrderStartSpreads.
func BenchmarkDeletionOrderStart(b *testing.B) {
	benchStart(b, func(b *testing.B, ix *spread.Index, w benchWorkload) {
		o, err := spread.NewDeletionOrder(w.template)
		if err != nil {
			b.Fatal(err)
		}
		if len(o.Update(ix, names(w.pods)...)) != len(w.pods) {
			b.Fatal("the first Update() did not cost every pod")
		}
	})
}

// BenchmarkDeletionOrderStartSpreads is the baseline of
// BenchmarkDeletionOrderStart: the spread of each Deployment, as a pass of
// the health audit computes it from the same index (Index.Spreads).
func BenchmarkDeletionOrderStartSpreads(b *testing.B) {
	benchStart(b, func(b *testing.B, ix *spread.Index, w benchWorkload) {
		if _, err := ix.Spreads(w.template); err != nil {
			b.Fatal(err)
		}
	})
}

func benchStart(b *testing.B, each func(b *testing.B, ix *spread.Index, w benchWorkload)) {
	const nodes = 5000
	c := clusterOf(nodes)
	ix := spread.IndexFromSnapshot(c.snap)
	workloads := benchWorkloads(nodes)
	b.Run(sizeName(nodes), func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		cpu := startCPU()
		for b.Loop() {
			for _, w := range workloads {
				each(b, ix, w)
			}
			n++
		}
		cpu.report(b, n)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*len(c.snap.Pods)), "ns/pod")
	})
}
