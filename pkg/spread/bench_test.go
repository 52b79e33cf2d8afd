package spread_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// benchCluster is the benchmark's cluster: nodes in 3 zones, 30 pods per
// node, made of Deployments of 30 replicas (one ReplicaSet revision each)
// spread across many namespaces plus one big namespace holding half of
// them. Every Deployment has 10 replicas per zone on 30 distinct nodes.
type benchCluster struct {
	snap     spread.Snapshot
	incoming *v1.Pod
}

var (
	benchMu       sync.Mutex
	benchClusters = map[int]*benchCluster{}
)

const (
	podsPerNode = 30
	replicas    = 30
)

func clusterOf(nodes int) *benchCluster {
	benchMu.Lock()
	defer benchMu.Unlock()
	if c := benchClusters[nodes]; c != nil {
		return c
	}
	zones := []string{"zone-a", "zone-b", "zone-c"}
	c := &benchCluster{}
	for i := range nodes {
		c.snap.Nodes = append(c.snap.Nodes, st.MakeNode().Name(fmt.Sprintf("node-%05d", i)).Zone(zones[i%len(zones)]).
			Label("node.kubernetes.io/instance-type", "m6i.xlarge").Label(v1.LabelOSStable, "linux").Obj())
	}
	deployments := nodes * podsPerNode / replicas
	slot := 0
	for d := range deployments {
		ns := "big"
		if d%2 == 1 {
			ns = fmt.Sprintf("team-%03d", d%200)
		}
		name := fmt.Sprintf("deploy-%05d", d)
		for r := range replicas {
			// Consecutive node IDs cycle through the zones, so 30
			// consecutive slots put 10 replicas in each zone.
			node := c.snap.Nodes[slot%nodes]
			slot++
			c.snap.Pods = append(c.snap.Pods, st.MakePod().Name(fmt.Sprintf("%s-%d", name, r)).Namespace(ns).
				Label("app", name).Label("pod-template-hash", "5d8f7c6b9").Label("team", fmt.Sprintf("t%d", d%20)).
				ControlledBy("ReplicaSet", "apps/v1", name+"-5d8f7c6b9").Node(node.Name).Phase(v1.PodRunning).Obj())
		}
	}
	// An even Deployment number: one of the big namespace's.
	target := fmt.Sprintf("deploy-%05d", deployments/2&^1)
	c.incoming = st.MakePod().Name(target+"-new").Namespace("big").
		Label("app", target).Label("pod-template-hash", "5d8f7c6b9").Label("team", "t0").
		SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", target).MatchLabelKeys("pod-template-hash").Obj()).
		SpreadConstraint(st.Constraint(1, v1.LabelHostname).MatchLabel("app", target).MatchLabelKeys("pod-template-hash").Obj()).
		Obj()
	benchClusters[nodes] = c
	return c
}

var benchSizes = []int{50, 5000}

func sizeName(nodes int) string {
	return fmt.Sprintf("nodes=%d,pods=%d", nodes, nodes*podsPerNode)
}

// cpuMeter reports the CPU time of the benchmark's own thread per
// operation as cpu-ns/op (see threadCPU).
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() *cpuMeter {
	runtime.LockOSThread()
	m := &cpuMeter{}
	m.start, m.ok = threadCPU()
	return m
}

func (m *cpuMeter) report(b *testing.B, ops int) {
	b.Helper()
	end, ok := threadCPU()
	runtime.UnlockOSThread()
	if m.ok && ok && ops > 0 {
		b.ReportMetric(float64((end-m.start).Nanoseconds())/float64(ops), "cpu-ns/op")
	}
}

// measureCheck times checker.Check(pod) per iteration, reporting CPU, p50
// and p99 and allocations.
func measureCheck(b *testing.B, checker spread.Checker, pod *v1.Pod) {
	b.Helper()
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for b.Loop() {
		start := time.Now()
		_, _ = checker.Check(pod, spread.Options{})
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	cpu.report(b, len(samples))
	st.ReportLatency(b, samples)
}

// BenchmarkCheck measures an admission decision from the index: the
// incoming pod of a 30-replica Deployment with a zone and a hostname
// constraint.
func BenchmarkCheck(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		ix := spread.IndexFromSnapshot(c.snap)
		b.Run(sizeName(nodes), func(b *testing.B) {
			res, err := ix.Check(c.incoming, spread.Options{})
			if err != nil || res.Verdict != spread.VerdictFeasible || res.FeasibleCount != nodes-replicas ||
				len(res.Constraints[0].Domains) != 3 || res.Constraints[0].GlobalMin != replicas/3 || len(res.Constraints[1].Domains) != replicas {
				b.Fatalf("Check() = %+v, %v; want Feasible on every node but the Deployment's %d", res, err, replicas)
			}
			measureCheck(b, ix, c.incoming)
		})
	}
}

// BenchmarkCheckDenied measures a denial as the webhook computes it, message
// included, in one check: the incoming pod's zone constraint asks for 4
// zones of 3 (minDomains 4, so the global minimum is 0), and every zone
// already holds 10 of its Deployment's pods: 10 + 1 - 0 > maxSkew 1.
func BenchmarkCheckDenied(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		ix := spread.IndexFromSnapshot(c.snap)
		denied := c.incoming.DeepCopy()
		denied.Spec.TopologySpreadConstraints[0].MinDomains = new(int32(4))
		b.Run(sizeName(nodes), func(b *testing.B) {
			res, err := ix.Check(denied, spread.Options{})
			if err != nil || res.Verdict != spread.VerdictUnsatisfiable || res.FeasibleCount != 0 || res.Message == "" {
				b.Fatalf("Check() = %+v, %v; want Unsatisfiable with a message", res, err)
			}
			measureCheck(b, ix, denied)
		})
	}
}

// BenchmarkCheckDeniedTemplates measures BenchmarkCheckDenied's pod with 20
// templates of nodes an autoscaler can add, as a cluster with a few
// NodePools or node groups has: every template is checked, since no
// existing node is feasible. With "new-zone", one template is in a fourth
// zone and takes the pod (FeasibleOnNewNode); with "existing-zones", all 20
// are in full zones and the pod is denied, each template named in the
// message.
func BenchmarkCheckDeniedTemplates(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		denied := c.incoming.DeepCopy()
		denied.Spec.TopologySpreadConstraints[0].MinDomains = new(int32(4))
		for _, tc := range []struct {
			name    string
			zone    string
			verdict spread.Verdict
		}{
			{"existing-zones", "zone-a", spread.VerdictUnsatisfiable},
			{"new-zone", "zone-d", spread.VerdictFeasibleOnNewNode},
		} {
			snap := c.snap
			snap.Templates = nil
			zones := []string{"zone-a", "zone-b", "zone-c"}
			for i := range 20 {
				zone := zones[i%3]
				if i == 19 {
					zone = tc.zone
				}
				snap.Templates = append(snap.Templates, spread.Template{
					Name:   fmt.Sprintf("nodepool/pool-%02d/%s", i, zone),
					Source: fmt.Sprintf("NodePool pool-%02d", i),
					Labels: map[string]string{v1.LabelTopologyZone: zone, "karpenter.sh/capacity-type": "on-demand",
						"node.kubernetes.io/instance-type": fmt.Sprintf("m6i.%dxlarge", 1+i%4), v1.LabelOSStable: "linux"},
				})
			}
			ix := spread.IndexFromSnapshot(snap)
			b.Run(sizeName(nodes)+"/templates="+tc.name, func(b *testing.B) {
				res, err := ix.Check(denied, spread.Options{})
				if err != nil || res.Verdict != tc.verdict || res.Message == "" {
					b.Fatalf("Check() = %+v, %v; want %s with a message", res, err, tc.verdict)
				}
				measureCheck(b, ix, denied)
			})
		}
	}
}

// BenchmarkCheckDeniedHostname measures the denial whose message has the
// most nodes to summarise: the incoming pod may only go to the 30 nodes
// holding its Deployment's pods (required node affinity on their hostnames),
// and with nodeAffinityPolicy Ignore every other node counts at hostname
// level with 0 pods, so 1 + 1 - 0 > maxSkew 1 on each of the 30. The
// message counts 5,000 domains and the nodes left out by affinity.
func BenchmarkCheckDeniedHostname(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		ix := spread.IndexFromSnapshot(c.snap)
		var names []string
		for _, p := range c.snap.Pods {
			if p.Labels["app"] == c.incoming.Labels["app"] {
				names = append(names, p.Spec.NodeName)
			}
		}
		denied := st.MakePod().Name(c.incoming.Name).Namespace(c.incoming.Namespace).Labels(c.incoming.Labels).
			NodeAffinityIn(v1.LabelHostname, names...).Obj()
		host := c.incoming.Spec.TopologySpreadConstraints[1]
		host.NodeAffinityPolicy = new(v1.NodeInclusionPolicyIgnore)
		denied.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{host}
		b.Run(sizeName(nodes), func(b *testing.B) {
			res, err := ix.Check(denied, spread.Options{})
			if err != nil || res.Verdict != spread.VerdictUnsatisfiable || res.Message == "" || res.Constraints[0].DomainCount != nodes {
				b.Fatalf("Check() = %+v, %v; want Unsatisfiable over %d hostname domains", res, err, nodes)
			}
			measureCheck(b, ix, denied)
		})
	}
}

// BenchmarkCheckExplain measures the same decision with Explain, as the
// webhook runs it to word a denial and the kubectl plugin always does:
// per-node lists make it grow with the number of nodes.
func BenchmarkCheckExplain(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		ix := spread.IndexFromSnapshot(c.snap)
		b.Run(sizeName(nodes), func(b *testing.B) {
			samples := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				_, _ = ix.Check(c.incoming, spread.Options{Explain: true})
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			st.ReportLatency(b, samples)
		})
	}
}

// BenchmarkSnapshotRecount is the baseline: the scheduler's way, every
// node and every pod scanned for each incoming pod, on the same cluster.
func BenchmarkSnapshotRecount(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		b.Run(sizeName(nodes), func(b *testing.B) {
			measureCheck(b, c.snap, c.incoming)
		})
	}
}

// BenchmarkIndexPodEvent measures one informer event on a full index, in
// steady state: a pod moving between two nodes, a pod finishing and
// coming back, a pod deleted and re-added.
func BenchmarkIndexPodEvent(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		ix := spread.IndexFromSnapshot(c.snap)
		pod := c.snap.Pods[len(c.snap.Pods)/2]
		moved := pod.DeepCopy()
		moved.Spec.NodeName = c.snap.Nodes[(slices.IndexFunc(c.snap.Nodes, func(n *v1.Node) bool { return n.Name == pod.Spec.NodeName })+1)%nodes].Name
		done := pod.DeepCopy()
		done.Status.Phase = v1.PodSucceeded
		events := map[string]func(i int){
			"move": func(i int) {
				if i%2 == 0 {
					ix.UpdatePod(pod, moved)
				} else {
					ix.UpdatePod(moved, pod)
				}
			},
			"phase": func(i int) {
				if i%2 == 0 {
					ix.UpdatePod(pod, done)
				} else {
					ix.UpdatePod(done, pod)
				}
			},
			"delete-add": func(i int) {
				if i%2 == 0 {
					ix.DeletePod(pod)
				} else {
					ix.AddPod(pod)
				}
			},
			"unchanged": func(int) { ix.UpdatePod(pod, pod) },
		}
		for _, name := range []string{"move", "phase", "delete-add", "unchanged"} {
			ev := events[name]
			b.Run(sizeName(nodes)+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				cpu := startCPU()
				for b.Loop() {
					ev(i)
					i++
				}
				cpu.report(b, i)
				if i%2 == 1 {
					ev(i)
				}
			})
		}
	}
}

// BenchmarkIndexNodeEvent measures a node status heartbeat, by far the
// most frequent node event: nothing the index keeps changes.
func BenchmarkIndexNodeEvent(b *testing.B) {
	for _, nodes := range benchSizes {
		c := clusterOf(nodes)
		ix := spread.IndexFromSnapshot(c.snap)
		node := c.snap.Nodes[nodes/2]
		beat := node.DeepCopy()
		beat.Status.Conditions = append(beat.Status.Conditions, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue})
		b.Run(sizeName(nodes)+"/heartbeat", func(b *testing.B) {
			b.ReportAllocs()
			cpu := startCPU()
			n := 0
			for b.Loop() {
				ix.UpdateNode(node, beat)
				n++
			}
			cpu.report(b, n)
		})
	}
}

// BenchmarkInterning measures what the pod cache's transform pays per pod
// event to intern what the pod carries, once the set is interned (another
// replica carries it): its constraints, one as the webhook injects them
// or two, and the check that they are a set already known (Matches),
// against the baseline, its 7 labels.
func BenchmarkInterning(b *testing.B) {
	labels := map[string]string{
		"app": "svc-00042", "app.kubernetes.io/name": "svc-00042", "app.kubernetes.io/part-of": "product-02",
		"app.kubernetes.io/managed-by": "argocd", "team": "t2", "version": "v1.8.3", "pod-template-hash": "7c9d5b8f4q",
	}
	honor := v1.NodeInclusionPolicyHonor
	zone := v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "svc-00042", "pod-template-hash": "7c9d5b8f4q"}},
		NodeTaintsPolicy: &honor}
	host := zone
	host.TopologyKey, host.WhenUnsatisfiable = v1.LabelHostname, v1.ScheduleAnyway
	known := spread.ConstraintSetOf([]v1.TopologySpreadConstraint{zone, host})
	for _, bench := range []struct {
		name string
		run  func()
	}{
		{"set=labels", func() { _ = spread.LabelSetOf(labels) }},
		{"set=constraints,n=1", func() { _ = spread.ConstraintSetOf([]v1.TopologySpreadConstraint{zone}) }},
		{"set=constraints,n=2", func() { _ = spread.ConstraintSetOf([]v1.TopologySpreadConstraint{zone, host}) }},
		{"set=constraints,n=2,known", func() { _ = known.Matches([]v1.TopologySpreadConstraint{zone, host}) }},
	} {
		b.Run(bench.name, func(b *testing.B) {
			bench.run()
			b.ReportAllocs()
			for b.Loop() {
				bench.run()
			}
		})
	}
}
