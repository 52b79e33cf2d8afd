package spreadhealth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/health/healthtest"
)

// BenchmarkPass is one whole pass of the leader at 5,000 workloads: the
// owners listed from the cache (a lookup.Store here), every workload
// audited against the index, then the status of the policy and the
// Reports written to a recording client, which answers as the API server
// would and keeps what it is sent (the rate limit's waits are left out).
// The workloads are in 50 namespaces, or all in one, whose Reports are
// split (health.Shards).
//
// writes=all: everything changed since the last pass, so the status and
// every Report are written again; writes=none, the baseline: nothing
// changed, nothing is sent, as in most passes of a quiet cluster.
// requests/op counts what the pass sent; largest-KiB is the largest object
// it wrote, Reports/op how many Reports the namespaces have.
func BenchmarkPass(b *testing.B) {
	for _, namespaces := range []int{50, 1} {
		c, err := healthtest.New(5000, namespaces)
		if err != nil {
			b.Fatal(err)
		}
		for _, writes := range []string{"none", "all"} {
			b.Run(fmt.Sprintf("%s,namespaces=%d/writes=%s", c, namespaces, writes), func(b *testing.B) {
				rec := newRecorder(c.Store)
				ctrl, err := newTestController(c.Store, c.Index, rec, prometheus.NewRegistry(), true)
				if err != nil {
					b.Fatal(err)
				}
				ctrl.writes = rate.NewLimiter(rate.Inf, 0)
				c.Policy.Status = v1alpha1.PolicyStatus{}
				pass := func() {
					if writes == "all" {
						c.Policy.Status = v1alpha1.PolicyStatus{}
						ctrl.reports.mu.Lock()
						for key, w := range ctrl.reports.written {
							w.content = ""
							ctrl.reports.written[key] = w
						}
						ctrl.reports.mu.Unlock()
					}
					p := &Pass{}
					if err := ctrl.run(b.Context(), p); err != nil || p.Workloads != 5000 {
						b.Fatalf("run() = %v, %d workloads; want 5000", err, p.Workloads)
					}
				}
				pass() // the Reports are created
				rec.take()
				requests := 0
				healthtest.Measure(b, func() {
					pass()
					requests += len(rec.take())
				})
				b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
				b.ReportMetric(float64(rec.largest)/(1<<10), "largest-KiB")
				reports := 0
				for _, key := range ctrl.reports.keys() {
					if strings.HasPrefix(key.Name, "spreadguard") {
						reports++
					}
				}
				b.ReportMetric(float64(reports), "Reports/op")
			})
		}
	}
}
