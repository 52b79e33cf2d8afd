package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The tags of hack/bench-scale.sh's four modes: no webhook, the no-op
// webhook of test/perf/cmd/noopwebhook, the same answering the mutating
// review with spreadguard's patch, and spreadguard.
const (
	tagNone        = "webhook=none"
	tagNoop        = "webhook=noop"
	tagNoopPatch   = "webhook=noop-patch"
	tagSpreadguard = "webhook=spreadguard"
)

// baselines are the webhooks spreadguard's addition is set against, with
// the name the summary gives each: the no-op, and the no-op that patches
// like spreadguard, whose addition holds the API server's work on the patch
// and on the patched pod, so that what is left is the webhook's own.
var baselines = []struct{ tag, name string }{
	{tagNoop, "no-op"},
	{tagNoopPatch, "patching no-op"},
}

// readJSONLines reads a file of one JSON object per line: burst's lines,
// or sample's.
func readJSONLines[T any](path string) ([]T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []T
	for line := range strings.Lines(string(data)) {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// writeSummary prints, per tag, the median and range over the rounds of each
// figure and the TLS handshakes of each round; then the create latency of
// each tag over all its rounds pooled, what each adds to webhook=none's, and
// the ratio of spreadguard's addition to that of each baseline webhook (the
// no-op, the patching no-op) the run measured.
//
// The additions are taken from pooled percentiles, not round by round: a
// round of 1,000 creates puts its p99.9 on the second slowest create, so a
// round's p99.9 (and its p99, on the tenth) is mostly noise, while five
// rounds pooled rest the p99.9 on five creates. The rounds run the modes
// one after the other, so a change of the machine's load over the run
// weighs on every mode alike. The additions of p50 and p99 are also printed
// round by round (each burst minus the none burst of its round), so that
// one can see whether the rounds agree on their sign.
func writeSummary(w io.Writer, results []burstResult) {
	byTag := map[string][]burstResult{}
	var tags []string
	for _, r := range results {
		if _, ok := byTag[r.Tag]; !ok {
			tags = append(tags, r.Tag)
		}
		byTag[r.Tag] = append(byTag[r.Tag], r)
	}
	figures := []figure{
		{"p50 ms", func(r burstResult) float64 { return r.P50 }},
		{"p90 ms", func(r burstResult) float64 { return r.P90 }},
		{"p99 ms", func(r burstResult) float64 { return r.P99 }},
		{"p99.9 ms", func(r burstResult) float64 { return r.P999 }},
		{"max ms", func(r burstResult) float64 { return r.Max }},
		{"creates/s", func(r burstResult) float64 { return r.PerSecond }},
	}
	for _, tag := range tags {
		rs := byTag[tag]
		errs := 0
		for _, r := range rs {
			errs += r.Errors
		}
		fmt.Fprintf(w, "%s: %d rounds of %d creates, %s, dry-run %t, %d errors\n",
			tag, len(rs), rs[0].Pods, rs[0].load(), rs[0].DryRun, errs)
		for _, f := range figures {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f.get(r)
			}
			slices.Sort(v)
			fmt.Fprintf(w, "  %-10s %9.2f  (%.2f .. %.2f)\n", f.name, median(v), v[0], v[len(v)-1])
		}
		if h := handshakes(rs); h != "" {
			fmt.Fprintf(w, "  %-10s %s (per round)\n", "handshakes", h)
		}
		writeWebhookProcess(w, rs)
	}

	if _, ok := byTag[tagNone]; !ok {
		return
	}
	qs := []float64{0.5, 0.99, 0.999}
	pooled := map[string][]float64{}
	for _, tag := range tags {
		pooled[tag] = pool(byTag[tag])
	}
	at := func(tag string) []float64 {
		p := make([]float64, len(qs))
		for i, q := range qs {
			p[i] = percentile(pooled[tag], q)
		}
		return p
	}
	base := at(tagNone)
	fmt.Fprintf(w, "create latency, all rounds pooled, ms (added: minus %s's):\n", tagNone)
	fmt.Fprintf(w, "  %-20s %7s %8s %8s %8s %10s %10s %12s  %s\n",
		"mode", "creates", "p50", "p99", "p99.9", "added p50", "added p99", "added p99.9", "handshakes per round")
	for _, tag := range tags {
		if len(pooled[tag]) == 0 {
			continue
		}
		p := at(tag)
		added := [3]string{"-", "-", "-"}
		if tag != tagNone {
			for i := range qs {
				added[i] = fmt.Sprintf("%+.2f", p[i]-base[i])
			}
		}
		fmt.Fprintf(w, "  %-20s %7d %8.2f %8.2f %8.2f %10s %10s %12s  %s\n",
			tag, len(pooled[tag]), p[0], p[1], p[2], added[0], added[1], added[2], cmp.Or(handshakes(byTag[tag]), "-"))
	}
	// The same additions taken round by round, to show how much of them
	// the rounds agree on.
	fmt.Fprintf(w, "added in each round (the round's figure minus its %s burst's), ms:\n", tagNone)
	for _, tag := range tags {
		if tag == tagNone {
			continue
		}
		for _, f := range []figure{figures[0], figures[2]} {
			d := pairedAdded(byTag[tag], byTag[tagNone], f.get)
			if len(d) == 0 {
				continue
			}
			var b strings.Builder
			for _, v := range d {
				fmt.Fprintf(&b, " %+.1f", v)
			}
			sorted := slices.Sorted(slices.Values(d))
			fmt.Fprintf(w, "  %-20s %-5s median %+7.2f, rounds:%s\n", tag, strings.TrimSuffix(f.name, " ms"), median(sorted), b.String())
		}
	}
	if _, ok := byTag[tagSpreadguard]; !ok {
		return
	}
	sg := at(tagSpreadguard)
	for _, b := range baselines {
		if _, ok := byTag[b.tag]; !ok {
			continue
		}
		baseline := at(b.tag)
		fmt.Fprintf(w, "spreadguard / %s, of the added latency (pooled):", b.name)
		for i, name := range []string{"p50", "p99", "p99.9"} {
			r, ok := addedRatio(sg[i], baseline[i], base[i])
			if !ok {
				fmt.Fprintf(w, "  %s n/a (the %s adds %+.2f ms)", name, b.name, baseline[i]-base[i])
				continue
			}
			fmt.Fprintf(w, "  %s %.2fx", name, r)
		}
		fmt.Fprintln(w)
		if iv, ok := ratioInterval(byTag[tagSpreadguard], byTag[b.tag], byTag[tagNone], []float64{0.5, 0.99}); ok {
			fmt.Fprintf(w, "  %d%% interval, rounds resampled %d times: p50 %s  p99 %s\n",
				int(math.Round(100*(1-2*intervalTail))), resamples, iv[0], iv[1])
		}
	}
}

// The bootstrap of ratioInterval: how many resamples, and the share of them
// left out at each end.
const (
	resamples    = 1000
	intervalTail = 0.05
)

// ratioInterval is how far the pooled ratio of spreadguard's added latency
// to a baseline's, at each quantile of qs, moves when the rounds are drawn
// again: the 5th and 95th percentile of the ratio over resamples bootstrap
// resamples, each of which draws as many rounds as the run had, with
// replacement, and pools them. It draws round numbers, not creates, and
// takes the same round of every mode, because a round's creates share the
// machine's state of the moment and the modes of one round ran one after
// the other. A resample in which the baseline adds nothing has no ratio;
// the interval says how many had none. The seed is fixed, so the summary of
// a file is always the same. It is not defined (false) with fewer than
// three rounds.
func ratioInterval(sg, baseline, none []burstResult, qs []float64) ([]string, bool) {
	n := min(len(sg), len(baseline), len(none))
	if n < 3 {
		return nil, false
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ratios := make([][]float64, len(qs))
	draw := make([]int, n)
	drawn := make([]burstResult, n)
	pooled := func(rs []burstResult) []float64 {
		for k, i := range draw {
			drawn[k] = rs[i]
		}
		return pool(drawn)
	}
	for range resamples {
		for i := range draw {
			draw[i] = rng.IntN(n)
		}
		s, b, z := pooled(sg), pooled(baseline), pooled(none)
		for j, q := range qs {
			if r, ok := addedRatio(percentile(s, q), percentile(b, q), percentile(z, q)); ok {
				ratios[j] = append(ratios[j], r)
			}
		}
	}
	out := make([]string, len(qs))
	for j, r := range ratios {
		if len(r) == 0 {
			out[j] = "n/a (no resample with a ratio)"
			continue
		}
		slices.Sort(r)
		out[j] = fmt.Sprintf("%.2fx .. %.2fx", percentile(r, intervalTail), percentile(r, 1-intervalTail))
		if undefined := resamples - len(r); undefined > 0 {
			out[j] += fmt.Sprintf(" (%d without a ratio)", undefined)
		}
	}
	return out, true
}

// load says how the burst's creates were started.
func (r burstResult) load() string {
	if r.Rate > 0 {
		return fmt.Sprintf("%g/s (open loop)", r.Rate)
	}
	return fmt.Sprintf("%d parallel", r.Parallel)
}

// writeWebhookProcess prints, for rounds that counted them, how long
// kube-apiserver's calls of the webhooks took, the webhook's CPU time per
// create, kube-apiserver's CPU time per create in each round, and the
// garbage collections of the webhook and of kube-apiserver
// (writeCollections).
func writeWebhookProcess(w io.Writer, rs []burstResult) {
	cpu := perCreateMs(rs, func(r burstResult) *float64 { return r.WebhookCPUSeconds })
	apiserverCPU := perCreateMs(rs, func(r burstResult) *float64 { return r.APIServerCPUSeconds })
	if mutating, validating := roundMedian(rs, func(r burstResult) *float64 { return r.MutatingCallMs }),
		roundMedian(rs, func(r burstResult) *float64 { return r.ValidatingCallMs }); mutating != "" || validating != "" {
		fmt.Fprintf(w, "  kube-apiserver's mean webhook call, median of rounds: mutating %s ms, validating %s ms\n",
			cmp.Or(mutating, "-"), cmp.Or(validating, "-"))
	}
	if len(cpu) > 0 {
		slices.Sort(cpu)
		fmt.Fprintf(w, "  %-10s %9.3f  (%.3f .. %.3f) ms of the webhook's CPU per create\n", "webhook", median(cpu), cpu[0], cpu[len(cpu)-1])
	}
	if len(apiserverCPU) > 0 {
		var b strings.Builder
		for _, v := range apiserverCPU {
			fmt.Fprintf(&b, " %.2f", v)
		}
		slices.Sort(apiserverCPU)
		fmt.Fprintf(w, "  %-10s %9.3f  (%.3f .. %.3f) ms of kube-apiserver's CPU per create; per round:%s\n",
			"apiserver", median(apiserverCPU), apiserverCPU[0], apiserverCPU[len(apiserverCPU)-1], b.String())
	}
	writeCollections(w, rs, "the webhook", func(r burstResult) *int64 { return r.WebhookGCCycles })
	writeCollections(w, rs, "kube-apiserver", func(r burstResult) *int64 { return r.APIServerGCCycles })
}

// perCreateMs is, for each round that has it, the CPU seconds get reads
// divided over the round's creates, in milliseconds, in round order.
func perCreateMs(rs []burstResult, get func(burstResult) *float64) []float64 {
	var ms []float64
	for _, r := range rs {
		if s := get(r); s != nil && r.Pods > 0 {
			ms = append(ms, *s*1000/float64(r.Pods))
		}
	}
	return ms
}

// writeCollections prints the garbage collections that get reads of each
// round, those of the process called who, and the median p99 of the rounds
// in which it collected against that of the others: whether its
// collections line up with the slow rounds. It prints nothing when no round
// has the count.
func writeCollections(w io.Writer, rs []burstResult, who string, get func(burstResult) *int64) {
	var gc strings.Builder
	var withGC, withoutGC []float64
	for _, r := range rs {
		n := get(r)
		if n == nil {
			continue
		}
		fmt.Fprintf(&gc, " %d", *n)
		if *n > 0 {
			withGC = append(withGC, r.P99)
		} else {
			withoutGC = append(withoutGC, r.P99)
		}
	}
	if gc.Len() == 0 {
		return
	}
	fmt.Fprintf(w, "  %-10s%s (%s's, per round)\n", "GC cycles", gc.String(), who)
	if len(withGC) > 0 && len(withoutGC) > 0 {
		slices.Sort(withGC)
		slices.Sort(withoutGC)
		fmt.Fprintf(w, "  p99 ms of the rounds in which %s collected: median %.2f (%d rounds); in which it did not: %.2f (%d rounds)\n",
			who, median(withGC), len(withGC), median(withoutGC), len(withoutGC))
	}
}

// roundMedian is the median, with its range, of get over the rounds that
// have it, or "" when none has.
func roundMedian(rs []burstResult, get func(burstResult) *float64) string {
	var v []float64
	for _, r := range rs {
		if p := get(r); p != nil {
			v = append(v, *p)
		}
	}
	if len(v) == 0 {
		return ""
	}
	slices.Sort(v)
	return fmt.Sprintf("%.2f (%.2f .. %.2f)", median(v), v[0], v[len(v)-1])
}

// figure is one number of a burst, by name.
type figure struct {
	name string
	get  func(burstResult) float64
}

// median is the median of sorted, which is not empty.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 0 {
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return sorted[n/2]
}

// percentile is the nearest-rank q-quantile of sorted: the smallest value
// that at least q of the values do not exceed. It is 0 for no values.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	// The tolerance keeps 0.99 × 1000 (989.99999... in floating point) at
	// rank 990.
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	return sorted[max(0, min(rank-1, len(sorted)-1))]
}

// pool is every create latency of rs, sorted.
func pool(rs []burstResult) []float64 {
	var all []float64
	for _, r := range rs {
		all = append(all, r.LatenciesMs...)
	}
	slices.Sort(all)
	return all
}

// addedRatio is (mode - none) / (noop - none): how many times a baseline
// webhook's added latency a mode adds. It is not defined (false) when the
// baseline adds nothing measurable.
func addedRatio(mode, noop, none float64) (float64, bool) {
	if noop <= none {
		return 0, false
	}
	return (mode - none) / (noop - none), true
}

// handshakes lists the TLS handshakes of each round, or "" when no round
// counted them.
func handshakes(rs []burstResult) string {
	var b strings.Builder
	counted := false
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		if r.Handshakes == nil {
			b.WriteByte('-')
			continue
		}
		counted = true
		b.WriteString(strconv.FormatInt(*r.Handshakes, 10))
	}
	if !counted {
		return ""
	}
	return b.String()
}

// pairedAdded is, for each round that both have, get of the mode's burst
// minus get of the none burst of the same round (the i-th of each tag).
func pairedAdded(mode, none []burstResult, get func(burstResult) float64) []float64 {
	d := make([]float64, min(len(mode), len(none)))
	for i := range d {
		d[i] = get(mode[i]) - get(none[i])
	}
	return d
}
