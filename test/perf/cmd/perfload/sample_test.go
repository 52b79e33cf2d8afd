package main

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestParseProcStat(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 1234 and 566 in each line: 18.0 s
	// at USER_HZ 100.
	tail := " S 1 4242 4242 0 -1 4194560 27612 0 0 0 1234 566 0 0 20 0 12 0 4413 1370058752 25519 18446744073709551615"
	tests := []struct {
		name    string
		line    string
		want    float64
		wantErr string
	}{
		{name: "a plain command name", line: "4242 (spreadguard-web)" + tail, want: 18},
		{name: "a command name with spaces is one field", line: "4242 (kube apiserver)" + tail, want: 18},
		{name: "a command name with a closing parenthesis: the last one ends it", line: "4242 (a) b (c))" + tail, want: 18},
		{name: "no command name at all", line: "4242 S 1", wantErr: "no command name in parentheses"},
		{name: "a line cut short", line: "4242 (x) S 1 4242", wantErr: "3 fields after the command name, want at least 13"},
		{name: "utime that is no number", line: "4242 (x) S 1 4242 4242 0 -1 4194560 27612 0 0 0 12x4 566", wantErr: `utime or stime: strconv.ParseUint: parsing "12x4": invalid syntax`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat(tt.line)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if got != tt.want {
				t.Errorf("parseProcStat = %v s, want %v s", got, tt.want)
			}
		})
	}
}

func TestParseProcStatus(t *testing.T) {
	tests := []struct {
		name             string
		text             string
		wantRSS, wantHWM int64
		wantErr          string
	}{
		{
			name:    "a running process: VmHWM before VmRSS, as the kernel writes them",
			text:    "Name:\tkube-apiserver\nVmPeak:\t 2000000 kB\nVmHWM:\t  131072 kB\nVmRSS:\t  104448 kB\nThreads:\t12\n",
			wantRSS: 104448, wantHWM: 131072,
		},
		{name: "a kernel thread has no memory lines", text: "Name:\tkworker/0:1\nThreads:\t1\n", wantErr: "no VmRSS and VmHWM: a kernel thread, or a process that has exited"},
		{name: "a size in another unit", text: "VmHWM:\t1 MB\nVmRSS:\t1 kB\n", wantErr: `VmHWM: "1 MB", want a number of kB`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rss, hwm, err := parseProcStatus(tt.text)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if rss != tt.wantRSS || hwm != tt.wantHWM {
				t.Errorf("parseProcStatus = VmRSS %d kB, VmHWM %d kB; want %d and %d", rss, hwm, tt.wantRSS, tt.wantHWM)
			}
		})
	}
}

func TestReadProcess(t *testing.T) {
	proc := fstest.MapFS{
		"77/stat":   {Data: []byte("77 (noopwebhook) S 1 77 77 0 -1 0 0 0 0 0 250 50 0 0 20 0 8 0 1 1 1 1\n")},
		"77/status": {Data: []byte("VmHWM:\t 20480 kB\nVmRSS:\t 10240 kB\n")},
	}
	got, err := readProcess(proc, "77")
	if err != nil {
		t.Fatal(err)
	}
	cpu, rss, hwm := 3.0, int64(10240), int64(20480)
	want := processSample{CPUSeconds: &cpu, VmRSSKiB: &rss, VmHWMKiB: &hwm}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readProcess (-want +got):\n%s", diff)
	}
	if got := memory(got); got != "VmRSS 10 MiB, VmHWM 20 MiB" {
		t.Errorf("memory = %q, want %q", got, "VmRSS 10 MiB, VmHWM 20 MiB")
	}
	if _, err := readProcess(proc, "78"); err == nil {
		t.Error("a process that does not exist was read without an error")
	}
}

func TestParseCFS(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    cfsStat
		wantErr string
	}{
		{
			name: "cgroup v2 cpu.stat, usage first",
			text: "usage_usec 8820000\nuser_usec 7000000\nsystem_usec 1820000\nnr_periods 585\nnr_throttled 569\nthrottled_usec 41000000\n",
			want: cfsStat{Periods: 585, Throttled: 569},
		},
		{
			name: "cgroup v1 cpu.stat",
			text: "nr_periods 351\nnr_throttled 302\nthrottled_time 29000000000\n",
			want: cfsStat{Periods: 351, Throttled: 302},
		},
		{name: "a cgroup without the cpu controller", text: "usage_usec 10\n", wantErr: "cpu.stat has no nr_periods and nr_throttled: the cgroup has no CPU quota accounting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCFS(tt.text)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseCFS (-want +got):\n%s", diff)
			}
		})
	}
}

// spreadguardMetrics is a page of spreadguard-webhook's /metrics, cut down.
const spreadguardMetrics = `# HELP spreadguard_admission_requests_total Reviews answered.
# TYPE spreadguard_admission_requests_total counter
spreadguard_admission_requests_total{outcome="allowed",webhook="mutate"} 4000
spreadguard_admission_requests_total{outcome="patched",webhook="mutate"} 5
spreadguard_admission_requests_total{outcome="allowed",webhook="validate"} 4003
spreadguard_admission_requests_total_other 7
spreadguard_webhook_tls_handshakes_total 9
spreadguard_admission_decision_duration_seconds_bucket{webhook="mutate",le="0.001"} 3990
spreadguard_admission_decision_duration_seconds_sum{webhook="mutate"} 0.216
spreadguard_admission_decision_duration_seconds_count{webhook="mutate"} 4005
spreadguard_admission_decision_duration_seconds_sum{webhook="validate"} 0.2
spreadguard_admission_decision_duration_seconds_count{webhook="validate"} 4000
process_cpu_seconds_total 12.5
`

func TestMetricsOf(t *testing.T) {
	counters, decisions, err := metricsOf(spreadguardMetrics)
	if err != nil {
		t.Fatal(err)
	}
	wantCounters := map[string]float64{metricReviews: 8008, metricHandshakes: 9}
	if diff := cmp.Diff(wantCounters, counters); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
	wantDecisions := map[string]histogramTotals{"mutate": {Sum: 0.216, Count: 4005}, "validate": {Sum: 0.2, Count: 4000}}
	if diff := cmp.Diff(wantDecisions, decisions); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if _, _, err := metricsOf("spreadguard_webhook_tls_handshakes_total\n"); err == nil {
		t.Error("a sample without a value was read without an error")
	}
}

func TestSumSeries(t *testing.T) {
	tests := []struct {
		name   string
		metric string
		want   float64
	}{
		{name: "every labelled series is summed, a longer name sharing the prefix is not", metric: metricReviews, want: 8008},
		{name: "a counter without labels is its one sample", metric: metricHandshakes, want: 9},
		{name: "a counter not yet incremented has no series and counts 0", metric: metricNoopReviews, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sumSeries(spreadguardMetrics, tt.metric)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("sumSeries(%s) = %v, want %v", tt.metric, got, tt.want)
			}
		})
	}
}

func TestParseWatches(t *testing.T) {
	text := `# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="spreadguard.io",resource="spreadpolicies",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 2
apiserver_longrunning_requests{component="apiserver",group="apps",resource="replicasets",scope="cluster",subresource="",verb="WATCH",version="v1"} 0
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="CONNECT",version="v1"} 5
apiserver_request_total{group="",resource="pods",verb="WATCH"} 100
`
	got, err := parseWatches(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"core/pods": 4, "spreadguard.io/spreadpolicies": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseWatches: the WATCH requests by group/resource, none of those at 0, no other verb or metric (-want +got):\n%s", diff)
	}
}

func TestWatchDelta(t *testing.T) {
	before := map[string]int{"core/nodes": 3, "core/pods": 4, "apps/replicasets": 2}
	after := map[string]int{"core/nodes": 4, "core/pods": 5, "spreadguard.io/spreadpolicies": 1}
	if got, want := watchDelta(before, after), " apps/replicasets -2 core/nodes +1 core/pods +1 spreadguard.io/spreadpolicies +1"; got != want {
		t.Errorf("watchDelta = %q, want %q", got, want)
	}
	if got := watchDelta(after, after); got != "" {
		t.Errorf("watchDelta of the same watches = %q, want nothing", got)
	}
}

// at builds a sample of a moment; option methods set the rest.
type at struct{ s sample }

func aSample(tag, phase string, seconds float64) *at {
	return &at{sample{Tag: tag, Phase: phase, Time: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).Add(time.Duration(seconds * float64(time.Second)))}}
}

// process records a process's CPU seconds and resident set (its
// high-water mark 10 MiB above).
func (a *at) process(name string, cpuSeconds float64, rssMiB int64) *at {
	rss, hwm := rssMiB*1024, (rssMiB+10)*1024
	a.proc(name, func(p *processSample) { p.CPUSeconds, p.VmRSSKiB, p.VmHWMKiB = &cpuSeconds, &rss, &hwm })
	return a
}

func (a *at) metric(name, metric string, v float64) *at {
	a.proc(name, func(p *processSample) {
		if p.Metrics == nil {
			p.Metrics = map[string]float64{}
		}
		p.Metrics[metric] = v
	})
	return a
}

func (a *at) cfs(name string, periods, throttled int64) *at {
	a.proc(name, func(p *processSample) { p.CFS = &cfsStat{Periods: periods, Throttled: throttled} })
	return a
}

func (a *at) decisions(name string, d map[string]histogramTotals) *at {
	a.proc(name, func(p *processSample) { p.Decisions = d })
	return a
}

func (a *at) watches(w map[string]int) *at { a.s.Watches = w; return a }

func (a *at) load(l float64) *at { a.s.Load1 = l; return a }

func (a *at) readyNodes(n int) *at { a.s.ReadyNodes = &n; return a }

func (a *at) proc(name string, set func(*processSample)) {
	if a.s.Processes == nil {
		a.s.Processes = map[string]processSample{}
	}
	p := a.s.Processes[name]
	set(&p)
	a.s.Processes[name] = p
}

func samples(as ...*at) []sample {
	out := make([]sample, len(as))
	for i, a := range as {
		out[i] = a.s
	}
	return out
}

func TestWriteRunAndDecisions(t *testing.T) {
	ss := samples(
		aSample(sampleFilled, "", 0).process(procAPIServer, 100, 5120).process(procEtcd, 10, 700).
			metric(procEtcd, metricEtcdDBBytes, 604*(1<<20)+1000).readyNodes(30),
		aSample(sampleReady, "", 20).process(procWebhook, 1, 100),
		aSample(sampleIdle, "", 50).process(procWebhook, 2, 105),
		aSample(sampleRound, "", 100).load(1.5),
		aSample(sampleRound, "", 150).load(2.25),
		aSample(sampleAfter, "", 160).process(procWebhook, 10, 118).process(procAPIServer, 300, 5200).process(procEtcd, 20, 710).
			metric(procEtcd, metricEtcdDBBytes, 610*(1<<20)).
			decisions(procWebhook, map[string]histogramTotals{"validate": {Sum: 0.2, Count: 4000}, "mutate": {Sum: 0.216, Count: 4005}, "forecast": {}}),
	)
	var out strings.Builder
	writeRun(&out, ss)
	writeDecisions(&out, ss)
	want := `nodes Ready after the fill: 30
webhook memory: idle after sync: VmRSS 105 MiB, VmHWM 115 MiB; after the bursts: VmRSS 118 MiB, VmHWM 128 MiB
control plane after the fill: kube-apiserver VmRSS 5120 MiB, VmHWM 5130 MiB; etcd VmRSS 700 MiB, VmHWM 710 MiB, database 604 MiB
control plane after the bursts: kube-apiserver VmRSS 5200 MiB, VmHWM 5210 MiB; etcd VmRSS 710 MiB, VmHWM 720 MiB, database 610 MiB
1-minute load average after each round: 1.5 2.25
webhook's own decision time (spreadguard_admission_decision_duration_seconds):
  mutate: 4005 decisions, mean 0.054 ms
  validate: 4000 decisions, mean 0.050 ms
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("the run's figures (-want +got):\n%s", diff)
	}
}

func TestWriteReplicas(t *testing.T) {
	r1, r2 := replicaProcess(1), replicaProcess(2)
	ss := samples(
		aSample(sampleWatchesBefore, "replicas=1", 0).watches(map[string]int{"core/pods": 3, "core/nodes": 4}),
		aSample(sampleReady, "replicas=1", 10).process(r1, 5, 105),
		aSample(sampleWatches, "replicas=1", 20).watches(map[string]int{"core/pods": 4, "core/nodes": 5, "spreadguard.io/spreadpolicies": 1}),
		aSample(sampleIdleStart, "replicas=1", 30).process(r1, 5, 105),
		aSample(sampleIdleEnd, "replicas=1", 50).process(r1, 5.01, 105),
		aSample(sampleBurstsStart, "replicas=1", 60).process(r1, 6, 105).metric(r1, metricReviews, 2).metric(r1, metricHandshakes, 7),
		aSample(sampleBurstsEnd, "replicas=1", 80).process(r1, 8.632, 114).metric(r1, metricReviews, 8002).metric(r1, metricHandshakes, 16),

		aSample(sampleWatchesBefore, "replicas=2", 100).watches(map[string]int{"core/pods": 4, "core/nodes": 5, "spreadguard.io/spreadpolicies": 1}),
		aSample(sampleReady, "replicas=2", 110).process(r2, 5, 105),
		aSample(sampleWatches, "replicas=2", 120).watches(map[string]int{"core/pods": 5, "core/nodes": 6, "spreadguard.io/spreadpolicies": 2}),
		aSample(sampleIdleStart, "replicas=2", 130).process(r1, 9, 114).process(r2, 5, 105),
		aSample(sampleIdleEnd, "replicas=2", 150).process(r1, 9.01, 114).process(r2, 5.02, 105),
		aSample(sampleBurstsStart, "replicas=2", 160).process(r1, 10, 114).metric(r1, metricReviews, 8002).cfs(r1, 100, 10).
			process(r2, 6, 105).metric(r2, metricReviews, 0).cfs(r2, 50, 0),
		aSample(sampleBurstsEnd, "replicas=2", 185).process(r1, 11.42, 115).metric(r1, metricReviews, 12002).cfs(r1, 451, 312).
			process(r2, 7.44, 109).metric(r2, metricReviews, 4000).cfs(r2, 395, 292),
	)
	bursts := map[string][]burstResult{
		"replicas=1": {{Tag: "replicas=1", Pods: 1000}, {Tag: "replicas=1", Pods: 1000}, {Tag: "replicas=1", Pods: 1000}, {Tag: "replicas=1", Pods: 1000}},
		"replicas=2": {{Tag: "replicas=2", Pods: 1000}, {Tag: "replicas=2", Pods: 1000}, {Tag: "replicas=2", Pods: 1000}, {Tag: "replicas=2", Pods: 1000}},
	}
	var out strings.Builder
	writeReplicas(&out, ss, bursts)
	want := `kube-apiserver WATCH requests (apiserver_longrunning_requests{verb="WATCH"}), just before and after each replica started:
  0 replicas: 7 -> 1 replicas: 10 (+3): core/nodes +1 core/pods +1 spreadguard.io/spreadpolicies +1
  1 replicas: 10 -> 2 replicas: 13 (+3): core/nodes +1 core/pods +1 spreadguard.io/spreadpolicies +1
  replica 1 ready (caches synced): VmRSS 105 MiB, VmHWM 115 MiB
  replica 1 of 1, idle: 0.5 ms of CPU per second over 20s without a review
replicas=1: 4 bursts, 4000 creates, 20000 ms in all; 8000 reviews answered (8000 expected: a mutating and a validating review per create)
  replica 1: 8000 reviews (100.0%), 400 reviews/s over the bursts, 9 TLS handshakes, CPU 2632 ms = 0.329 ms per review, VmRSS 114 MiB, VmHWM 124 MiB
  replica 2 ready (caches synced): VmRSS 105 MiB, VmHWM 115 MiB
  replica 1 of 2, idle: 0.5 ms of CPU per second over 20s without a review
  replica 2 of 2, idle: 1.0 ms of CPU per second over 20s without a review
replicas=2: 4 bursts, 4000 creates, 25000 ms in all; 8000 reviews answered (8000 expected: a mutating and a validating review per create)
  replica 1: 4000 reviews (50.0%), 160 reviews/s over the bursts, 0 TLS handshakes, CPU 1420 ms = 0.355 ms per review, VmRSS 115 MiB, VmHWM 125 MiB, throttled in 302 of 351 CFS periods
  replica 2: 4000 reviews (50.0%), 160 reviews/s over the bursts, 0 TLS handshakes, CPU 1440 ms = 0.360 ms per review, VmRSS 109 MiB, VmHWM 119 MiB, throttled in 292 of 345 CFS periods
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("the replicas' figures (-want +got):\n%s", diff)
	}
}

func TestReadyNodes(t *testing.T) {
	node := func(name string, conds ...v1.NodeCondition) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Conditions: conds}}
	}
	cl := fake.NewClientBuilder().WithObjects(
		node("ready", v1.NodeCondition{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse}, v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue}),
		node("not-ready", v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse}),
		node("unknown", v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown}),
		node("new"),
	).Build()
	got, err := readyNodes(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if got != 1 {
		t.Errorf("readyNodes of one Ready node among a NotReady, an Unknown and a new one = %d, want 1", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
