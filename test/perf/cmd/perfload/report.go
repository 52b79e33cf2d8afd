package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// The names hack/bench-scale.sh gives the processes it samples.
const (
	procWebhook   = "webhook"
	procAPIServer = "kube-apiserver"
	procEtcd      = "etcd"
)

// replicaProcess is the name of spreadguard replica i in a sample.
func replicaProcess(i int) string { return "replica-" + strconv.Itoa(i) }

// machine describes this machine: its CPUs, their model and the load
// average now.
func machine() string {
	model := "unknown CPU model"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, value, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(name) == "model name" {
				model = strings.TrimSpace(value)
				break
			}
		}
		f.Close()
	}
	load := "unknown"
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("machine: %d CPUs, %s, load average %s", runtime.NumCPU(), model, load)
}

// memory is a process's resident set and its high-water mark, "" when the
// sample did not read them.
func memory(p processSample) string {
	if p.VmRSSKiB == nil || p.VmHWMKiB == nil {
		return ""
	}
	return fmt.Sprintf("VmRSS %.0f MiB, VmHWM %.0f MiB", float64(*p.VmRSSKiB)/1024, float64(*p.VmHWMKiB)/1024)
}

// controlPlane is kube-apiserver's and etcd's memory and etcd's database
// size in a sample.
func controlPlane(s sample) string {
	etcd := s.Processes[procEtcd]
	db := "?"
	if v, ok := etcd.Metrics[metricEtcdDBBytes]; ok {
		db = fmt.Sprintf("%.0f", v/(1<<20))
	}
	return fmt.Sprintf("kube-apiserver %s; etcd %s, database %s MiB",
		memory(s.Processes[procAPIServer]), memory(etcd), db)
}

// findSample is the last sample of tag in phase.
func findSample(samples []sample, phase, tag string) (sample, bool) {
	for i := len(samples) - 1; i >= 0; i-- {
		if samples[i].Phase == phase && samples[i].Tag == tag {
			return samples[i], true
		}
	}
	return sample{}, false
}

// writeRun prints what the samples of a four-mode run say: the webhook's
// memory, the control plane's, the load after each round and, with
// writeDecisions after the bursts' summary, the webhook's own decision time.
func writeRun(w io.Writer, samples []sample) {
	if s, ok := findSample(samples, "", sampleFilled); ok && s.ReadyNodes != nil {
		fmt.Fprintf(w, "nodes Ready after the fill: %d\n", *s.ReadyNodes)
	}
	idle, okIdle := findSample(samples, "", sampleIdle)
	after, okAfter := findSample(samples, "", sampleAfter)
	if okIdle || okAfter {
		fmt.Fprintf(w, "webhook memory: idle after sync: %s; after the bursts: %s\n",
			memory(idle.Processes[procWebhook]), memory(after.Processes[procWebhook]))
	}
	if s, ok := findSample(samples, "", sampleFilled); ok {
		fmt.Fprintf(w, "control plane after the fill: %s\n", controlPlane(s))
	}
	if okAfter {
		fmt.Fprintf(w, "control plane after the bursts: %s\n", controlPlane(after))
	}
	var loads []string
	for _, s := range samples {
		if s.Phase == "" && s.Tag == sampleRound {
			loads = append(loads, strconv.FormatFloat(s.Load1, 'f', -1, 64))
		}
	}
	if len(loads) > 0 {
		fmt.Fprintf(w, "1-minute load average after each round: %s\n", strings.Join(loads, " "))
	}
}

// writeDecisions prints the mean of the webhook's own decision-time
// histogram over the run, by webhook, as the sample after the rounds read
// it.
func writeDecisions(w io.Writer, samples []sample) {
	after, ok := findSample(samples, "", sampleAfter)
	if !ok {
		return
	}
	d := after.Processes[procWebhook].Decisions
	fmt.Fprintf(w, "webhook's own decision time (%s):\n", metricDecisionTimes)
	for _, name := range slices.Sorted(maps.Keys(d)) {
		if h := d[name]; h.Count > 0 {
			fmt.Fprintf(w, "  %s: %.0f decisions, mean %.3f ms\n", name, h.Count, 1000*h.Sum/h.Count)
		}
	}
}

// replicaPhases are the numbers of replicas of the phases the samples
// have, in order: the n of each "replicas=n".
func replicaPhases(samples []sample) []int {
	var ns []int
	for _, s := range samples {
		n, ok := strings.CutPrefix(s.Phase, "replicas=")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(n); err == nil && !slices.Contains(ns, i) {
			ns = append(ns, i)
		}
	}
	slices.Sort(ns)
	return ns
}

// writeReplicas prints what the samples of `bench-scale.sh replicas` say:
// kube-apiserver's watches before and after each replica started, then for
// each phase each replica's memory once ready, its CPU without reviews, and
// its share of the bursts' reviews with their CPU, handshakes, memory and
// CFS throttling. bursts are the bursts' lines, by tag.
func writeReplicas(w io.Writer, samples []sample, bursts map[string][]burstResult) {
	phases := replicaPhases(samples)
	if len(phases) == 0 {
		return
	}
	fmt.Fprintf(w, "kube-apiserver WATCH requests (%s{verb=\"WATCH\"}), just before and after each replica started:\n", metricWatches)
	for _, i := range phases {
		phase := "replicas=" + strconv.Itoa(i)
		before, ok1 := findSample(samples, phase, sampleWatchesBefore)
		after, ok2 := findSample(samples, phase, sampleWatches)
		if !ok1 || !ok2 {
			continue
		}
		b, a := watchTotal(before.Watches), watchTotal(after.Watches)
		fmt.Fprintf(w, "  %d replicas: %d -> %d replicas: %d (%+d):%s\n", i-1, b, i, a, a-b, watchDelta(before.Watches, after.Watches))
	}
	for _, n := range phases {
		phase := "replicas=" + strconv.Itoa(n)
		if s, ok := findSample(samples, phase, sampleReady); ok {
			fmt.Fprintf(w, "  replica %d ready (caches synced): %s\n", n, memory(s.Processes[replicaProcess(n)]))
		}
		if start, ok := findSample(samples, phase, sampleIdleStart); ok {
			if end, ok := findSample(samples, phase, sampleIdleEnd); ok {
				writeIdle(w, n, start, end)
			}
		}
		start, ok1 := findSample(samples, phase, sampleBurstsStart)
		end, ok2 := findSample(samples, phase, sampleBurstsEnd)
		if ok1 && ok2 {
			writeReplicaBursts(w, n, start, end, bursts[phase])
		}
	}
}

// watchDelta lists the resources whose watches changed from before to
// after, " group/resource +n" each, sorted.
func watchDelta(before, after map[string]int) string {
	var b strings.Builder
	for _, r := range slices.Sorted(maps.Keys(mapsUnion(before, after))) {
		if d := after[r] - before[r]; d != 0 {
			fmt.Fprintf(&b, " %s %+d", r, d)
		}
	}
	return b.String()
}

func mapsUnion(a, b map[string]int) map[string]int {
	u := maps.Clone(a)
	if u == nil {
		u = map[string]int{}
	}
	maps.Copy(u, b)
	return u
}

// seconds is the time from sample a to sample b.
func seconds(a, b sample) float64 { return b.Time.Sub(a.Time).Seconds() }

// cpuBetween is the CPU seconds process name used from sample a to b, and
// whether both read it.
func cpuBetween(a, b sample, name string) (float64, bool) {
	x, y := a.Processes[name].CPUSeconds, b.Processes[name].CPUSeconds
	if x == nil || y == nil {
		return 0, false
	}
	return *y - *x, true
}

// writeIdle prints the CPU each of n replicas used per second from start to
// end, while no review came: what its informers cost, which a replica pays
// whatever its share of the reviews.
func writeIdle(w io.Writer, n int, start, end sample) {
	s := seconds(start, end)
	if s <= 0 {
		return
	}
	for i := 1; i <= n; i++ {
		if cpu, ok := cpuBetween(start, end, replicaProcess(i)); ok {
			fmt.Fprintf(w, "  replica %d of %d, idle: %.1f ms of CPU per second over %.0fs without a review\n", i, n, 1000*cpu/s, s)
		}
	}
}

// writeReplicaBursts prints, for a phase of n replicas, the bursts' total
// of reviews against the two a create takes, then per replica the reviews
// it answered from start to end, its rate, the TLS handshakes it began, its
// CPU per review, its memory and, under a CPU limit, in how many CFS periods
// it was throttled.
func writeReplicaBursts(w io.Writer, n int, start, end sample, bursts []burstResult) {
	counter := func(s sample, i int, name string) float64 { return s.Processes[replicaProcess(i)].Metrics[name] }
	reviews := make([]float64, n+1)
	var total float64
	for i := 1; i <= n; i++ {
		reviews[i] = counter(end, i, metricReviews) - counter(start, i, metricReviews)
		total += reviews[i]
	}
	creates := 0
	for _, b := range bursts {
		creates += b.Pods
	}
	s := seconds(start, end)
	fmt.Fprintf(w, "replicas=%d: %d bursts, %d creates, %.0f ms in all; %.0f reviews answered (%d expected: a mutating and a validating review per create)\n",
		n, len(bursts), creates, 1000*s, total, 2*creates)
	for i := 1; i <= n; i++ {
		d := reviews[i]
		name := replicaProcess(i)
		cpu, _ := cpuBetween(start, end, name)
		var share, rate, perReview float64
		if total > 0 {
			share = 100 * d / total
		}
		if s > 0 {
			rate = d / s
		}
		if d > 0 {
			perReview = 1000 * cpu / d
		}
		fmt.Fprintf(w, "  replica %d: %.0f reviews (%.1f%%), %.0f reviews/s over the bursts, %.0f TLS handshakes, CPU %.0f ms = %.3f ms per review, %s",
			i, d, share, rate, counter(end, i, metricHandshakes)-counter(start, i, metricHandshakes), 1000*cpu, perReview, memory(end.Processes[name]))
		if a, b := start.Processes[name].CFS, end.Processes[name].CFS; a != nil && b != nil {
			fmt.Fprintf(w, ", throttled in %d of %d CFS periods", b.Throttled-a.Throttled, b.Periods-a.Periods)
		}
		fmt.Fprintln(w)
	}
}

// summarizeRun prints the summary of a run: the machine, what its samples
// say (none when samplesPath is empty) and the bursts' figures.
func summarizeRun(w io.Writer, burstsPath, samplesPath string) error {
	results, err := readJSONLines[burstResult](burstsPath)
	if err != nil {
		return err
	}
	var samples []sample
	if samplesPath != "" {
		if samples, err = readJSONLines[sample](samplesPath); err != nil {
			return err
		}
		fmt.Fprintln(w, machine())
	}
	writeRun(w, samples)
	byTag := map[string][]burstResult{}
	for _, r := range results {
		byTag[r.Tag] = append(byTag[r.Tag], r)
	}
	writeReplicas(w, samples, byTag)
	writeSummary(w, results)
	writeDecisions(w, samples)
	return nil
}
