package spreadtest

import (
	"slices"
	"testing"
	"time"
)

// ReportLatency adds the p50 and p99 of a benchmark's per-iteration
// timings as metrics: targets are percentiles, which ns/op (a mean) does
// not show. It sorts samples.
func ReportLatency(b *testing.B, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "p99-ns")
}
