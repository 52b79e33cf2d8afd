package spreadtest

import (
	"runtime"
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

// HeldBy returns the heap that what fill returns keeps alive: the live heap
// after fill less the live heap before it, each measured after a
// collection. Nothing else may allocate meanwhile.
func HeldBy(b *testing.B, fill func() any) uint64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	if after.HeapAlloc < before.HeapAlloc {
		b.Fatalf("the heap shrank during the fill (%d to %d bytes): something else freed memory", before.HeapAlloc, after.HeapAlloc)
	}
	return after.HeapAlloc - before.HeapAlloc
}
