package health_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/health/healthtest"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// benchNamespaces is the number of namespaces the benchmark's workloads
// are spread over.
const benchNamespaces = 50

var (
	benchMu    sync.Mutex
	benchSizes = map[int]*healthtest.Cluster{}
)

func benchCluster(b *testing.B, workloads int) *healthtest.Cluster {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if c := benchSizes[workloads]; c != nil {
		return c
	}
	c, err := healthtest.New(workloads, benchNamespaces)
	if err != nil {
		b.Fatal(err)
	}
	benchSizes[workloads] = c
	return c
}

// BenchmarkHealthPass is one full pass: finding the workloads and auditing
// each. cpu-ms/op is the process's CPU time, garbage collection included;
// alloc-MiB/op bounds the extra heap a pass needs.
func BenchmarkHealthPass(b *testing.B) {
	for _, workloads := range []int{50, 5000} {
		c := benchCluster(b, workloads)
		src := c.Sources()
		b.Run(c.String(), func(b *testing.B) {
			pass := func() []health.Result {
				rs := health.Run(c.Index, src, engine.Config{}, health.Workloads(c.Owners, c.Index))
				if len(rs) != workloads {
					b.Fatalf("health.Run() = %d results; want %d", len(rs), workloads)
				}
				return rs
			}
			healthtest.Measure(b, func() { pass() })
			b.ReportMetric(retainedMiB(pass), "retained-MiB")
		})
	}
}

// BenchmarkHealthBaselineCheck is the baseline: one admission check
// (Index.Check) of a pod of each workload, the work the webhook does for
// as many pod creations.
func BenchmarkHealthBaselineCheck(b *testing.B) {
	for _, workloads := range []int{50, 5000} {
		c := benchCluster(b, workloads)
		ws := health.Workloads(c.Owners, c.Index)
		b.Run(c.String(), func(b *testing.B) {
			healthtest.Measure(b, func() {
				for _, w := range ws {
					if _, err := c.Index.Check(w.Pod, spread.Options{}); err != nil {
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
