package perf

import (
	"math"
	"os"
	"runtime/metrics"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the Go runtime of the server did during a timed run, from
// runtime/metrics: enough to tell, without a trace, whether a slow tail
// comes from the garbage collector or from goroutines waiting for a CPU.
const (
	metricGCCycles   = "/gc/cycles/total:gc-cycles"
	metricGCCPU      = "/cpu/classes/gc/total:cpu-seconds"
	metricAssistCPU  = "/cpu/classes/gc/mark/assist:cpu-seconds"
	metricUserCPU    = "/cpu/classes/user:cpu-seconds"
	metricSchedWait  = "/sched/latencies:seconds"
	metricGCPauses   = "/sched/pauses/total/gc:seconds"
	metricAllocBytes = "/gc/heap/allocs:bytes"
)

// runtimeSample is one reading of the metrics above, and of the time the
// process's threads waited for a CPU in the kernel's run queues.
type runtimeSample struct {
	metrics []metrics.Sample
	// runqueue is the sum of the threads' run-queue waits so far
	// (/proc/self/task/*/schedstat): the Go scheduler's own wait does not
	// see a thread that the kernel took off a CPU for another process,
	// such as the load generator.
	runqueue time.Duration
}

func readRuntime() runtimeSample {
	s := runtimeSample{metrics: []metrics.Sample{
		{Name: metricGCCycles}, {Name: metricGCCPU}, {Name: metricAssistCPU}, {Name: metricUserCPU},
		{Name: metricSchedWait}, {Name: metricGCPauses}, {Name: metricAllocBytes},
	}}
	metrics.Read(s.metrics)
	s.runqueue = runqueueWait()
	return s
}

// runqueueWait sums the second field of each thread's schedstat, the
// nanoseconds it has spent runnable but waiting for a CPU; 0 where the
// kernel does not say (not Linux, no schedstats).
func runqueueWait() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread has exited
		}
		if f := strings.Fields(string(data)); len(f) >= 2 {
			if ns, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				total += time.Duration(ns)
			}
		}
	}
	return total
}

func (s runtimeSample) value(name string) metrics.Value {
	for _, m := range s.metrics {
		if m.Name == name {
			return m.Value
		}
	}
	panic("unread runtime metric " + name)
}

func (s runtimeSample) float(name string) float64 {
	v := s.value(name)
	if v.Kind() == metrics.KindUint64 {
		return float64(v.Uint64())
	}
	return v.Float64()
}

// runtimeDelta is what the runtime did between two samples.
type runtimeDelta struct {
	GCCycles float64
	// RunqueueWait is how long the process's threads waited for a CPU.
	RunqueueWait time.Duration
	// GCShare and AssistShare are the garbage collector's CPU time, and
	// the part of it that request goroutines did themselves (mark assists),
	// as shares of the CPU time the runtime spent on Go code and the GC.
	GCShare, AssistShare float64
	AllocBytes           float64
	// SchedWait are the quantiles of the time goroutines spent runnable
	// before they ran, GCPauseMax the longest stop-the-world pause.
	SchedWaitP99, SchedWaitP999, GCPauseMax time.Duration
}

func runtimeSince(before, after runtimeSample) runtimeDelta {
	d := func(name string) float64 { return after.float(name) - before.float(name) }
	gc, user := d(metricGCCPU), d(metricUserCPU)
	out := runtimeDelta{GCCycles: d(metricGCCycles), AllocBytes: d(metricAllocBytes), RunqueueWait: after.runqueue - before.runqueue}
	if gc+user > 0 {
		out.GCShare, out.AssistShare = gc/(gc+user), d(metricAssistCPU)/(gc+user)
	}
	wait := histogramSince(before.value(metricSchedWait).Float64Histogram(), after.value(metricSchedWait).Float64Histogram())
	out.SchedWaitP99, out.SchedWaitP999 = wait.quantile(0.99), wait.quantile(0.999)
	out.GCPauseMax = histogramSince(before.value(metricGCPauses).Float64Histogram(),
		after.value(metricGCPauses).Float64Histogram()).quantile(1)
	return out
}

// histogram is the difference of two readings of one runtime histogram.
type histogram struct {
	counts  []uint64
	buckets []float64
}

func histogramSince(before, after *metrics.Float64Histogram) histogram {
	h := histogram{counts: make([]uint64, len(after.Counts)), buckets: after.Buckets}
	for i := range after.Counts {
		h.counts[i] = after.Counts[i] - before.Counts[i]
	}
	return h
}

// quantile returns the upper bound of the bucket that holds the q-quantile
// (the runtime's buckets are a few percent wide), 0 when empty.
func (h histogram) quantile(q float64) time.Duration {
	var total uint64
	for _, c := range h.counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			upper := h.buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = h.buckets[i]
			}
			return time.Duration(upper * float64(time.Second))
		}
	}
	return 0
}

// report adds the delta to the benchmark's metrics, per review where that
// is a rate.
func (d runtimeDelta) report(b *testing.B, reviews float64) {
	b.Helper()
	ms := func(t time.Duration) float64 { return float64(t) / float64(time.Millisecond) }
	b.ReportMetric(d.GCCycles*1000/reviews, "gc-cycles/1k-reviews")
	b.ReportMetric(100*d.GCShare, "gc-cpu-%")
	b.ReportMetric(100*d.AssistShare, "gc-assist-cpu-%")
	b.ReportMetric(d.AllocBytes/reviews, "alloc-B/review")
	b.ReportMetric(ms(d.SchedWaitP99), "sched-wait-p99-ms")
	b.ReportMetric(ms(d.SchedWaitP999), "sched-wait-p99.9-ms")
	b.ReportMetric(ms(d.GCPauseMax), "gc-pause-max-ms")
	b.ReportMetric(float64(d.RunqueueWait.Microseconds())/reviews, "os-runqueue-wait-us/review")
}

// envTrace names a directory; when set, each admission benchmark writes an
// execution trace of the server (this process) covering its timed run
// only: trace-<benchmark name>-N<reviews>.out, for `go tool trace`.
const envTrace = "SPREADGUARD_PERF_TRACE"

func startTrace(b *testing.B) (stop func(), err error) {
	return startRecording(b, envTrace, "trace-%s-N%d.out", trace.Start, trace.Stop)
}

// fileName is the benchmark's name as a file name.
func fileName(b *testing.B) string {
	return strings.NewReplacer("/", "_", ",", "_", "=", "-").Replace(b.Name())
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	buckets := []float64{0, 0.001, 0.002, 0.010, inf}
	for _, tc := range []struct {
		name          string
		before, after []uint64
		q             float64
		want          time.Duration
	}{
		{name: "a histogram that did not change has no quantile",
			before: []uint64{1, 2, 3, 4}, after: []uint64{1, 2, 3, 4}, q: 0.999, want: 0},
		{name: "the median of a run is the upper bound of the bucket that holds it",
			before: []uint64{5, 0, 0, 0}, after: []uint64{5, 6, 4, 0}, q: 0.5, want: 2 * time.Millisecond},
		{name: "only what was counted during the run counts, not what came before",
			before: []uint64{0, 100, 0, 0}, after: []uint64{0, 100, 1, 1}, q: 0.5, want: 10 * time.Millisecond},
		{name: "the tail in the last, unbounded bucket is its lower bound",
			before: []uint64{0, 0, 0, 0}, after: []uint64{998, 0, 0, 2}, q: 0.999, want: 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := histogramSince(&metrics.Float64Histogram{Counts: tc.before, Buckets: buckets},
				&metrics.Float64Histogram{Counts: tc.after, Buckets: buckets})
			if got := h.quantile(tc.q); got != tc.want {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}
