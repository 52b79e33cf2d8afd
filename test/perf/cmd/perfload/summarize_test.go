package main

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	thousand := make([]float64, 1000)
	for i := range thousand {
		thousand[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		q      float64
		want   float64
	}{
		{name: "the median of an odd count is the middle value", sorted: []float64{1, 2, 3}, q: 0.5, want: 2},
		{name: "the median of an even count is the lower middle value (nearest rank)", sorted: []float64{1, 2, 3, 4}, q: 0.5, want: 2},
		{name: "p99 of 1,000 creates is the 990th, not the 991st", sorted: thousand, q: 0.99, want: 990},
		{name: "p99.9 of 1,000 creates is the second slowest", sorted: thousand, q: 0.999, want: 999},
		{name: "p100 is the slowest", sorted: thousand, q: 1, want: 1000},
		{name: "p0 is the fastest", sorted: thousand, q: 0, want: 1},
		{name: "one create is every percentile", sorted: []float64{7}, q: 0.999, want: 7},
		{name: "no creates at all is 0", sorted: nil, q: 0.99, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestAddedRatio(t *testing.T) {
	tests := []struct {
		name             string
		mode, noop, none float64
		want             float64
		wantOK           bool
	}{
		{name: "spreadguard adding twice what the no-op adds is 2x", mode: 30, noop: 20, none: 10, want: 2, wantOK: true},
		{name: "spreadguard adding what the no-op adds is 1x", mode: 20, noop: 20, none: 10, want: 1, wantOK: true},
		{name: "spreadguard faster than no webhook at all is a negative ratio", mode: 5, noop: 20, none: 10, want: -0.5, wantOK: true},
		{name: "a no-op adding nothing leaves the ratio undefined", mode: 30, noop: 10, none: 10, wantOK: false},
		{name: "a no-op faster than no webhook leaves the ratio undefined", mode: 30, noop: 8, none: 10, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := addedRatio(tt.mode, tt.noop, tt.none)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("addedRatio(%v, %v, %v) = %v, %t; want %v, %t", tt.mode, tt.noop, tt.none, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// round builds a burst result, as perfload burst prints it, from its
// latencies; option methods set the rest.
type round struct{ r burstResult }

func aRound(tag string, latencies ...float64) *round {
	return &round{burstResult{Tag: tag, Pods: len(latencies), Parallel: 8, DryRun: true, LatenciesMs: latencies,
		P50: percentile(latencies, 0.5), P90: percentile(latencies, 0.9), P99: percentile(latencies, 0.99),
		P999: percentile(latencies, 0.999), Max: percentile(latencies, 1), PerSecond: 100}}
}

func (b *round) handshakes(n int64) *round { b.r.Handshakes = &n; return b }

// apiserverGC records the collections kube-apiserver completed during the
// round and the CPU seconds it used.
func (b *round) apiserverGC(n int64, cpuSeconds float64) *round {
	b.r.APIServerGCCycles, b.r.APIServerCPUSeconds = &n, &cpuSeconds
	return b
}

// rate makes the round one paced at perSecond creates a second.
func (b *round) rate(perSecond float64) *round { b.r.Parallel, b.r.Rate = 0, perSecond; return b }

// webhook records the webhook's CPU seconds and garbage collections during
// the round.
func (b *round) webhook(cpuSeconds float64, gcCycles int64) *round {
	b.r.WebhookCPUSeconds, b.r.WebhookGCCycles = &cpuSeconds, &gcCycles
	return b
}

func TestWriteSummary(t *testing.T) {
	tests := []struct {
		name   string
		rounds []*round
		// want are lines the summary must hold.
		want []string
		// wantNoPrefix are beginnings no line of the summary may have.
		wantNoPrefix []string
	}{
		{
			name: "three modes over two rounds: percentiles pooled over the rounds, additions and the ratio",
			rounds: []*round{
				aRound(tagNone, 1, 2, 3, 4),
				aRound(tagNoop, 3, 4, 5, 6).handshakes(2),
				aRound(tagSpreadguard, 5, 6, 7, 8).handshakes(3),
				aRound(tagNoop, 3, 4, 5, 14).handshakes(0),
				aRound(tagSpreadguard, 5, 6, 7, 24).handshakes(1),
				aRound(tagNone, 1, 2, 3, 10),
			},
			want: []string{
				"webhook=noop: 2 rounds of 4 creates, 8 parallel, dry-run true, 0 errors",
				"  handshakes 2 0 (per round)",
				"  webhook=none               8     2.00    10.00    10.00          -          -            -  -",
				"  webhook=noop               8     4.00    14.00    14.00      +2.00      +4.00        +4.00  2 0",
				"  webhook=spreadguard        8     6.00    24.00    24.00      +4.00     +14.00       +14.00  3 1",
				"spreadguard / no-op, of the added latency (pooled):  p50 2.00x  p99 3.50x  p99.9 3.50x",
				"  webhook=noop         p50   median   +2.00, rounds: +2.0 +2.0",
				"  webhook=noop         p99   median   +3.00, rounds: +2.0 +4.0",
				"  webhook=spreadguard  p99   median   +9.00, rounds: +4.0 +14.0",
			},
		},
		{
			name: "four modes: spreadguard's addition is set against the no-op's and the patching no-op's",
			rounds: []*round{
				aRound(tagNone, 1, 2, 3, 4),
				aRound(tagNoop, 3, 4, 5, 6),
				aRound(tagNoopPatch, 4, 5, 6, 7).handshakes(2),
				aRound(tagSpreadguard, 5, 6, 7, 8),
				aRound(tagNoopPatch, 4, 5, 6, 16).handshakes(1),
				aRound(tagSpreadguard, 5, 6, 7, 24),
				aRound(tagNone, 1, 2, 3, 10),
				aRound(tagNoop, 3, 4, 5, 14),
			},
			want: []string{
				"webhook=noop-patch: 2 rounds of 4 creates, 8 parallel, dry-run true, 0 errors",
				"  webhook=noop               8     4.00    14.00    14.00      +2.00      +4.00        +4.00  -",
				"  webhook=noop-patch         8     5.00    16.00    16.00      +3.00      +6.00        +6.00  2 1",
				"  webhook=noop-patch   p99   median   +4.50, rounds: +3.0 +6.0",
				"spreadguard / no-op, of the added latency (pooled):  p50 2.00x  p99 3.50x  p99.9 3.50x",
				"spreadguard / patching no-op, of the added latency (pooled):  p50 1.33x  p99 2.33x  p99.9 2.33x",
			},
		},
		{
			name: "a run without the plain no-op sets spreadguard against the patching no-op only",
			rounds: []*round{
				aRound(tagNone, 1, 2, 3, 4),
				aRound(tagNoopPatch, 2, 3, 4, 5),
				aRound(tagSpreadguard, 3, 4, 5, 6),
			},
			want:         []string{"spreadguard / patching no-op, of the added latency (pooled):  p50 2.00x  p99 2.00x  p99.9 2.00x"},
			wantNoPrefix: []string{"spreadguard / no-op,"},
		},
		{
			name: "a patching no-op that adds nothing leaves its ratio undefined and says so",
			rounds: []*round{
				aRound(tagNone, 1, 2, 3, 4),
				aRound(tagNoop, 2, 3, 4, 5),
				aRound(tagNoopPatch, 1, 2, 3, 4),
				aRound(tagSpreadguard, 3, 4, 5, 6),
			},
			want: []string{
				"spreadguard / no-op, of the added latency (pooled):  p50 2.00x  p99 2.00x  p99.9 2.00x",
				"spreadguard / patching no-op, of the added latency (pooled):  p50 n/a (the patching no-op adds +0.00 ms)  p99 n/a (the patching no-op adds +0.00 ms)  p99.9 n/a (the patching no-op adds +0.00 ms)",
			},
		},
		{
			name: "a no-op that adds nothing leaves its ratio undefined and says so",
			rounds: []*round{
				aRound(tagNone, 1, 2, 3, 4),
				aRound(tagNoop, 1, 2, 3, 4),
				aRound(tagSpreadguard, 1, 3, 3, 5),
			},
			want: []string{
				"spreadguard / no-op, of the added latency (pooled):  p50 n/a (the no-op adds +0.00 ms)  p99 n/a (the no-op adds +0.00 ms)  p99.9 n/a (the no-op adds +0.00 ms)",
			},
		},
		{
			name: "the webhook's CPU per create and its collections per round, and the p99 of rounds with and without one",
			rounds: []*round{
				aRound(tagSpreadguard, 1, 2, 3, 4).webhook(0.002, 0),
				aRound(tagSpreadguard, 1, 2, 3, 40).webhook(0.004, 1),
				aRound(tagSpreadguard, 1, 2, 3, 6).webhook(0.003, 0),
				aRound(tagSpreadguard, 1, 2, 3, 30).webhook(0.006, 2),
			},
			want: []string{
				"  webhook        0.875  (0.500 .. 1.500) ms of the webhook's CPU per create",
				"  GC cycles  0 1 0 2 (the webhook's, per round)",
				"  p99 ms of the rounds in which the webhook collected: median 35.00 (2 rounds); in which it did not: 5.00 (2 rounds)",
			},
		},
		{
			name: "kube-apiserver's CPU per create and collections per round, and the p99 of rounds with and without a collection",
			rounds: []*round{
				aRound(tagNone, 1, 2, 3, 90).apiserverGC(1, 0.02),
				aRound(tagNone, 1, 2, 3, 5).apiserverGC(0, 0.006),
				aRound(tagNone, 1, 2, 3, 70).apiserverGC(2, 0.008),
			},
			want: []string{
				"  apiserver      2.000  (1.500 .. 5.000) ms of kube-apiserver's CPU per create; per round: 5.00 1.50 2.00",
				"  GC cycles  1 0 2 (kube-apiserver's, per round)",
				"  p99 ms of the rounds in which kube-apiserver collected: median 80.00 (2 rounds); in which it did not: 5.00 (1 rounds)",
			},
			wantNoPrefix: []string{"  p99 ms of the rounds in which the webhook"},
		},
		{
			name: "a webhook that never collected has no p99 to set apart",
			rounds: []*round{
				aRound(tagNoop, 1, 2).webhook(0.001, 0),
				aRound(tagNoop, 1, 3).webhook(0.001, 0),
			},
			want:         []string{"  GC cycles  0 0 (the webhook's, per round)"},
			wantNoPrefix: []string{"  p99 ms of the rounds"},
		},
		{
			name:         "rounds without the webhook's counters print none of them",
			rounds:       []*round{aRound(tagNoop, 1, 2).handshakes(1)},
			wantNoPrefix: []string{"  webhook ", "  GC cycles"},
		},
		{
			name: "bursts paced by a rate say so in place of their clients",
			rounds: []*round{
				aRound(tagNone, 1, 2).rate(40),
				aRound(tagSpreadguard, 2, 3).rate(40),
			},
			want: []string{"webhook=spreadguard: 1 rounds of 2 creates, 40/s (open loop), dry-run true, 0 errors"},
		},
		{
			name: "three rounds or more give the ratio an interval over resampled rounds",
			rounds: []*round{
				aRound(tagNone, 1, 2, 3, 4), aRound(tagNoop, 3, 4, 5, 6), aRound(tagSpreadguard, 5, 6, 7, 8),
				aRound(tagNone, 1, 2, 3, 4), aRound(tagNoop, 3, 4, 5, 6), aRound(tagSpreadguard, 5, 6, 7, 8),
				aRound(tagNone, 1, 2, 3, 4), aRound(tagNoop, 3, 4, 5, 6), aRound(tagSpreadguard, 5, 6, 7, 8),
			},
			want: []string{
				"spreadguard / no-op, of the added latency (pooled):  p50 2.00x  p99 2.00x  p99.9 2.00x",
				"  90% interval, rounds resampled 1000 times: p50 2.00x .. 2.00x  p99 2.00x .. 2.00x",
			},
		},
		{
			name: "two rounds are too few for an interval",
			rounds: []*round{
				aRound(tagNone, 1, 2), aRound(tagNoop, 2, 3), aRound(tagSpreadguard, 3, 4),
				aRound(tagNone, 1, 2), aRound(tagNoop, 2, 3), aRound(tagSpreadguard, 3, 4),
			},
			wantNoPrefix: []string{"  90% interval"},
		},
		{
			name:         "without the none mode there is no addition to print",
			rounds:       []*round{aRound(tagSpreadguard, 1, 2)},
			want:         []string{"webhook=spreadguard: 1 rounds of 2 creates, 8 parallel, dry-run true, 0 errors"},
			wantNoPrefix: []string{"create latency", "spreadguard /"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			writeSummary(&out, results(tt.rounds))
			lines := strings.Split(out.String(), "\n")
			for _, want := range tt.want {
				if !containsLine(lines, want) {
					t.Errorf("the summary has no line %q:\n%s", want, out.String())
				}
			}
			for _, prefix := range tt.wantNoPrefix {
				for _, l := range lines {
					if strings.HasPrefix(l, prefix) {
						t.Errorf("the summary has a line %q, want none beginning %q:\n%s", l, prefix, out.String())
					}
				}
			}
		})
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

func TestCounterValue(t *testing.T) {
	text := `# HELP spreadguard_webhook_tls_handshakes_total TLS handshakes.
# TYPE spreadguard_webhook_tls_handshakes_total counter
spreadguard_webhook_tls_handshakes_total 17
spreadguard_admission_requests_total{webhook="mutate"} 4
noopwebhook_tls_handshakes_total_other 3
`
	tests := []struct {
		name    string
		metric  string
		want    float64
		wantErr string
	}{
		{name: "a counter without labels is read", metric: "spreadguard_webhook_tls_handshakes_total", want: 17},
		{name: "a name that is only a prefix of another is not found", metric: "noopwebhook_tls_handshakes_total", wantErr: "no sample of noopwebhook_tls_handshakes_total"},
		{name: "a counter that only has labelled samples is not found", metric: "spreadguard_admission_requests_total", wantErr: "no sample of spreadguard_admission_requests_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := counterValue(text, tt.metric)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tt.want {
				t.Errorf("counterValue = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReadWebhookCounters(t *testing.T) {
	pages := []string{
		"spreadguard_webhook_tls_handshakes_total 3\nprocess_cpu_seconds_total 10.5\ngo_gc_duration_seconds_count 40\n",
		"spreadguard_webhook_tls_handshakes_total 5\nprocess_cpu_seconds_total 11.25\ngo_gc_duration_seconds_count 42\n",
		"spreadguard_webhook_tls_handshakes_total 5\n",
	}
	page := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, pages[page])
		page++
	}))
	defer srv.Close()
	read := func() *webhookCounters {
		t.Helper()
		c, err := readWebhookCounters(t.Context(), srv.URL, "spreadguard_webhook_tls_handshakes_total")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before, after, bare := read(), read(), read()

	var res burstResult
	after.since(before, &res)
	if res.Handshakes == nil || *res.Handshakes != 2 || res.WebhookCPUSeconds == nil || *res.WebhookCPUSeconds != 0.75 ||
		res.WebhookGCCycles == nil || *res.WebhookGCCycles != 2 {
		t.Errorf("a burst between the first two pages: handshakes %v, CPU %v s, GC %v; want 2, 0.75 and 2",
			deref(res.Handshakes), deref(res.WebhookCPUSeconds), deref(res.WebhookGCCycles))
	}
	res = burstResult{}
	bare.since(after, &res)
	if res.Handshakes == nil || *res.Handshakes != 0 || res.WebhookCPUSeconds != nil || res.WebhookGCCycles != nil {
		t.Errorf("a webhook whose /metrics lost its process counters: handshakes %v, CPU %v, GC %v; want 0 and none of the others",
			deref(res.Handshakes), deref(res.WebhookCPUSeconds), deref(res.WebhookGCCycles))
	}
	if _, err := readWebhookCounters(t.Context(), srv.URL, "no_such_counter"); err == nil {
		t.Error("a /metrics without the handshakes counter was read without an error")
	}
}

func TestAPIServerCalls(t *testing.T) {
	page := func(mutatingSeconds, mutatingCalls, validatingSeconds, validatingCalls, gcCycles, cpuSeconds float64) string {
		return fmt.Sprintf(`# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="pods.mutate.spreadguard.io",operation="CREATE",rejected="false",type="admit",le="0.005"} 3
apiserver_admission_webhook_admission_duration_seconds_sum{name="pods.mutate.spreadguard.io",operation="CREATE",rejected="false",type="admit"} %g
apiserver_admission_webhook_admission_duration_seconds_count{name="pods.mutate.spreadguard.io",operation="CREATE",rejected="false",type="admit"} %g
apiserver_admission_webhook_admission_duration_seconds_sum{name="pods.validate.spreadguard.io",operation="CREATE",rejected="false",type="validating"} %g
apiserver_admission_webhook_admission_duration_seconds_count{name="pods.validate.spreadguard.io",operation="CREATE",rejected="false",type="validating"} %g
apiserver_admission_webhook_admission_duration_seconds_sum{name="pods.validate.spreadguard.io",operation="CREATE",rejected="true",type="validating"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="pods.validate.spreadguard.io",operation="CREATE",rejected="true",type="validating"} 2
apiserver_admission_webhook_admission_duration_seconds_sum_other{type="admit"} 99
go_gc_duration_seconds_sum 0.25
go_gc_duration_seconds_count %g
process_cpu_seconds_total %g
`, mutatingSeconds, mutatingCalls, validatingSeconds, validatingCalls, gcCycles, cpuSeconds)
	}
	before, err := parseAPIServerCalls(page(1.5, 100, 0.5, 100, 40, 10))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseAPIServerCalls(page(5.5, 1100, 2.5, 1100, 43, 12.5))
	if err != nil {
		t.Fatal(err)
	}
	var res burstResult
	res.APIServerCPUSeconds, res.APIServerGCCycles = after.process.since(before.process)
	if res.APIServerGCCycles == nil || *res.APIServerGCCycles != 3 {
		t.Errorf("kube-apiserver's collections: from 40 to 43 is 3, got %v", deref(res.APIServerGCCycles))
	}
	if res.APIServerCPUSeconds == nil || math.Abs(*res.APIServerCPUSeconds-2.5) > 1e-9 {
		t.Errorf("kube-apiserver's CPU: from 10 to 12.5 s is 2.5 s, got %v", deref(res.APIServerCPUSeconds))
	}
	bare, err := parseAPIServerCalls(webhookCallMetric + `_count{type="admit"} 1` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	res = burstResult{}
	res.APIServerCPUSeconds, res.APIServerGCCycles = after.process.since(bare.process)
	if res.APIServerGCCycles != nil || res.APIServerCPUSeconds != nil {
		t.Errorf("a /metrics without Go's and the process's collectors has no collections or CPU, got %v and %v",
			deref(res.APIServerGCCycles), deref(res.APIServerCPUSeconds))
	}
	if got := after.meanSince(before, "admit"); got == nil || math.Abs(*got-4) > 1e-9 {
		t.Errorf("mutating calls: 4 s over 1,000 calls is a mean of 4 ms, got %v", deref(got))
	}
	if got := after.meanSince(before, "validating"); got == nil || math.Abs(*got-2) > 1e-9 {
		t.Errorf("validating calls: 2 s over 1,000 calls is a mean of 2 ms, got %v", deref(got))
	}
	if got := before.meanSince(before, "admit"); got != nil {
		t.Errorf("no call in between has no mean, got %v", *got)
	}
	if _, err := parseAPIServerCalls(webhookCallMetric + `_sum{type="admit"}`); err == nil {
		t.Error("a sample without a value was read without an error")
	}

	var out strings.Builder
	mutating, validating := 4.0, 2.0
	r := aRound(tagSpreadguard, 1, 2)
	r.r.MutatingCallMs, r.r.ValidatingCallMs = &mutating, &validating
	writeSummary(&out, results([]*round{r}))
	want := "  kube-apiserver's mean webhook call, median of rounds: mutating 4.00 (4.00 .. 4.00) ms, validating 2.00 (2.00 .. 2.00) ms"
	if !containsLine(strings.Split(out.String(), "\n"), want) {
		t.Errorf("the summary has no line %q:\n%s", want, out.String())
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestPairedAdded(t *testing.T) {
	p50 := func(r burstResult) float64 { return r.P50 }
	tests := []struct {
		name       string
		mode, none []*round
		want       []float64
	}{
		{
			name: "each round's burst is set against the none burst of the same round",
			mode: []*round{aRound(tagNoop, 5), aRound(tagNoop, 3)},
			none: []*round{aRound(tagNone, 2), aRound(tagNone, 4)},
			want: []float64{3, -1},
		},
		{
			name: "a round cut short before its none burst is left out",
			mode: []*round{aRound(tagNoop, 5), aRound(tagNoop, 3)},
			none: []*round{aRound(tagNone, 2)},
			want: []float64{3},
		},
		{
			name: "no none burst at all leaves nothing to set against",
			mode: []*round{aRound(tagNoop, 5)},
			want: []float64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pairedAdded(results(tt.mode), results(tt.none), p50)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pairedAdded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRatioInterval(t *testing.T) {
	// Rounds of one create each: every mode's pooled p50 is then the median
	// of the rounds drawn.
	rounds := func(tag string, latencies ...float64) []burstResult {
		var rs []*round
		for _, l := range latencies {
			rs = append(rs, aRound(tag, l))
		}
		return results(rs)
	}
	tests := []struct {
		name               string
		sg, baseline, none []burstResult
		want               string
		wantOK             bool
	}{
		{
			name: "rounds that agree give a point: spreadguard adds 3 ms, the no-op 2, in every round -> 1.50x",
			sg:   rounds(tagSpreadguard, 4, 4, 4, 4), baseline: rounds(tagNoop, 3, 3, 3, 3), none: rounds(tagNone, 1, 1, 1, 1),
			want: "1.50x .. 1.50x", wantOK: true,
		},
		{
			name: "one slow spreadguard round of five widens the interval above the point, never below",
			sg:   rounds(tagSpreadguard, 4, 4, 4, 4, 9), baseline: rounds(tagNoop, 3, 3, 3, 3, 3), none: rounds(tagNone, 1, 1, 1, 1, 1),
			want: "1.50x .. 4.00x", wantOK: true,
		},
		{
			name: "resamples in which the no-op adds nothing are counted, not given a ratio",
			sg:   rounds(tagSpreadguard, 4, 4, 4), baseline: rounds(tagNoop, 3, 1, 1), none: rounds(tagNone, 1, 1, 1),
			wantOK: true,
		},
		{
			name: "two rounds are too few",
			sg:   rounds(tagSpreadguard, 4, 4), baseline: rounds(tagNoop, 3, 3), none: rounds(tagNone, 1, 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ratioInterval(tt.sg, tt.baseline, tt.none, []float64{0.5})
			if ok != tt.wantOK {
				t.Fatalf("ratioInterval defined = %t, want %t", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if tt.want != "" && got[0] != tt.want {
				t.Errorf("ratioInterval = %q, want %q", got[0], tt.want)
			}
			if tt.want == "" && !strings.Contains(got[0], "without a ratio") {
				t.Errorf("ratioInterval = %q, want it to count the resamples without a ratio", got[0])
			}
		})
	}
}

func results(rounds []*round) []burstResult {
	rs := make([]burstResult, len(rounds))
	for i, r := range rounds {
		rs[i] = r.r
	}
	return rs
}
