package forecast

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// benchSetup is the validation benchmarks' cluster (test/perf/fixture:
// 30 pods per node in 30-replica Deployments, 3 zones, the cluster policy
// spreading over zones and hostnames, maxSkew 1) and its workload 0, a
// ReplicaSet whose 30 pods exist, to be scaled by 1,000 replicas.
type benchSetup struct {
	ix  *spread.Index
	src engine.Sources
	rs  *appsv1.ReplicaSet
}

func newBenchSetup(nodes int) benchSetup {
	c := fixture.New(nodes)
	ix := spread.NewIndex()
	for i := range c.Nodes {
		ix.AddNode(c.Node(i))
	}
	for w := range c.Workloads() {
		for r := range c.Replicas {
			ix.AddPod(c.Pod(w, r))
		}
	}
	rs := c.ReplicaSet(0)
	var namespaces []*v1.Namespace
	for i, name := range c.NamespaceNames() {
		namespaces = append(namespaces, fixture.NamespaceObject(name, i))
	}
	src := &sources{
		FakeSelectorSources: spreadtest.SelectorSources(c.Service(0), rs),
		SliceLister:         policy.SliceLister{Namespaces: namespaces, ClusterPolicies: []*v1alpha1.ClusterSpreadPolicy{fixture.Policy()}},
	}
	return benchSetup{ix: ix, src: src, rs: rs}
}

// BenchmarkForecast measures one forecast of 1,000 replicas: the mutation
// and the layout of the pod, then 1,000 placements. The
// baselines, in the same run, are one check of the same pod: unexplained,
// what the pod webhook spends per pod, and explained, what listing every
// node with its reason costs; and the layout alone.
func BenchmarkForecast(b *testing.B) {
	for _, nodes := range []int{5000} {
		s := newBenchSetup(nodes)
		scaled := s.rs.DeepCopy()
		scaled.Spec.Replicas = ptr.To(*s.rs.Spec.Replicas + 1000)
		w, err := Of(scaled, *s.rs.Spec.Replicas)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("nodes=%d,pods=%d,replicas=1000", nodes, nodes*30)
		b.Run(name, func(b *testing.B) {
			f, err := Run(w, s.src, s.ix, engine.Config{})
			if err != nil {
				b.Fatal(err)
			}
			if len(f.Placements) != 1000 {
				b.Fatalf("placed %d replicas, want 1000 (refused: %+v, skipped: %q)", len(f.Placements), f.Refused, f.Skipped)
			}
			b.ReportAllocs()
			samples := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if _, err := Run(w, s.src, s.ix, engine.Config{}); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(start))
			}
			spreadtest.ReportLatency(b, samples)
		})
		m, err := engine.Mutate(w.Pod, withOwner(s.src, w.owner), engine.Config{})
		if err != nil || m.Pod == nil {
			b.Fatalf("mutating: %v (skipped: %v)", err, m)
		}
		for _, explain := range []bool{false, true} {
			b.Run(fmt.Sprintf("baseline=check,explain=%v/nodes=%d,pods=%d", explain, nodes, nodes*30), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.ix.Check(m.Pod, spread.Options{Explain: explain}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("baseline=layout/nodes=%d,pods=%d", nodes, nodes*30), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ix.Layout(m.Pod, spread.DetailNodes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
