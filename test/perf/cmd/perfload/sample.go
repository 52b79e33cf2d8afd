package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A sample is what `perfload sample` reads at one moment of a run: the
// processes it is given (CPU time, memory, CFS throttling, counters of their
// /metrics), kube-apiserver's watches, the Ready nodes and the load average.
// hack/bench-scale.sh appends one per moment it reports on to samples.jsonl,
// and summarize turns them into figures: so every number of the summary is
// read and computed here, and the script only starts processes.
type sample struct {
	// Tag names the moment (sampleFilled, sampleIdle, ...); Phase, when
	// set, is the tag of the bursts it goes with ("replicas=2").
	Tag   string    `json:"tag"`
	Phase string    `json:"phase,omitempty"`
	Time  time.Time `json:"time"`
	// Load1 is the 1-minute load average.
	Load1      float64                  `json:"loadAverage1m"`
	Processes  map[string]processSample `json:"processes,omitempty"`
	Watches    map[string]int           `json:"watches,omitempty"`
	ReadyNodes *int                     `json:"readyNodes,omitempty"`
}

// processSample is one process at one moment; a field is nil when it was
// not asked for.
type processSample struct {
	// CPUSeconds is its user and system time, from /proc/PID/stat.
	CPUSeconds *float64 `json:"cpuSeconds,omitempty"`
	// VmRSSKiB and VmHWMKiB are its resident set and the set's high-water
	// mark, from /proc/PID/status.
	VmRSSKiB *int64 `json:"vmRSSKiB,omitempty"`
	VmHWMKiB *int64 `json:"vmHWMKiB,omitempty"`
	// CFS is its cgroup's CPU quota accounting, for a process under a
	// CPU limit.
	CFS *cfsStat `json:"cfs,omitempty"`
	// Metrics are the counters of sampledMetrics its /metrics has, each
	// summed over its series.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Decisions are the sum and count of spreadguard's decision-time
	// histogram, by its webhook label.
	Decisions map[string]histogramTotals `json:"decisions,omitempty"`
}

// cfsStat is a cgroup's count of CFS periods and of those in which it was
// throttled (cpu.stat's nr_periods and nr_throttled, in cgroup v1 and v2
// alike).
type cfsStat struct {
	Periods   int64 `json:"periods"`
	Throttled int64 `json:"throttled"`
}

// histogramTotals are a Prometheus histogram's _sum and _count.
type histogramTotals struct {
	Sum   float64 `json:"sum"`
	Count float64 `json:"count"`
}

// The counters a sample keeps of a process's /metrics.
const (
	metricReviews       = "spreadguard_admission_requests_total"
	metricHandshakes    = "spreadguard_webhook_tls_handshakes_total"
	metricNoopReviews   = "noopwebhook_admission_requests_total"
	metricEtcdDBBytes   = "etcd_mvcc_db_total_size_in_bytes"
	metricDecisionTimes = "spreadguard_admission_decision_duration_seconds"
	metricWatches       = "apiserver_longrunning_requests"
)

var sampledMetrics = []string{metricReviews, metricHandshakes, metricNoopReviews, metricEtcdDBBytes}

// The tags of the samples hack/bench-scale.sh takes, which summarize
// knows.
const (
	sampleFilled        = "filled"         // the cluster filled and settled: the control plane
	sampleReady         = "ready"          // a webhook's caches have synced
	sampleIdle          = "idle"           // the webhook idle, 30 s after it was ready
	sampleRound         = "round"          // after each round of the four modes
	sampleAfter         = "after"          // after the rounds: the webhook and the control plane
	sampleWatchesBefore = "watches-before" // kube-apiserver's watches just before a replica starts
	sampleWatches       = "watches"        // and once it has started
	sampleIdleStart     = "idle-start"     // the replicas before and after a time without reviews
	sampleIdleEnd       = "idle-end"
	sampleBurstsStart   = "bursts-start" // the replicas before and after a phase's bursts
	sampleBurstsEnd     = "bursts-end"
)

// sampleOptions are the flags of `perfload sample`.
type sampleOptions struct {
	tag, phase, out string
	// pids, metrics and cgroups name each process's PID, /metrics URL and
	// cgroup directory.
	pids, metrics, cgroups namedValues
	watches, settle        bool
	readyNodes             bool
}

// namedValues is a repeated NAME=VALUE flag.
type namedValues map[string]string

func (v *namedValues) String() string { return fmt.Sprint(map[string]string(*v)) }

func (v *namedValues) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" || value == "" {
		return fmt.Errorf("%q: want NAME=VALUE", s)
	}
	if *v == nil {
		*v = namedValues{}
	}
	(*v)[name] = value
	return nil
}

func (s *sampleOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&s.tag, "tag", "", "the moment this sample is of (filled, ready, idle, round, after, watches-before, watches, idle-start, idle-end, bursts-start, bursts-end)")
	fs.StringVar(&s.phase, "phase", "", "the tag of the bursts the sample goes with, e.g. replicas=2")
	fs.StringVar(&s.out, "out", "", "append the sample's JSON line to this file (default: standard output)")
	fs.Var(&s.pids, "process", "NAME=PID: read the CPU time and memory of a process (repeated)")
	fs.Var(&s.metrics, "metrics", "NAME=URL: read the counters of a process's Prometheus /metrics (repeated)")
	fs.Var(&s.cgroups, "cgroup", "NAME=DIR: read the CFS throttling of a process's cgroup (repeated)")
	fs.BoolVar(&s.watches, "apiserver-watches", false, "read the WATCH requests kube-apiserver serves, by resource")
	fs.BoolVar(&s.settle, "settle", false, "with --apiserver-watches: wait until the count has not changed for 5s (at most 2 minutes)")
	fs.BoolVar(&s.readyNodes, "ready-nodes", false, "count the cluster's Ready nodes")
}

// takeSample reads what s asks for. The processes are read first and
// together, so that a sample of several replicas is of one moment.
func takeSample(ctx context.Context, o *options, s *sampleOptions) (*sample, error) {
	if s.tag == "" {
		return nil, errors.New("--tag is required")
	}
	out := &sample{Tag: s.tag, Phase: s.phase, Time: time.Now().UTC()}
	var err error
	if out.Load1, err = loadAverage("/proc/loadavg"); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(s.pids))
	for n := range s.metrics {
		if _, ok := s.pids[n]; !ok {
			names = append(names, n)
		}
	}
	for n := range s.cgroups {
		if _, ok := s.pids[n]; !ok {
			return nil, fmt.Errorf("--cgroup %s: no --process %s", n, n)
		}
	}
	for _, name := range names {
		var p processSample
		if pid, ok := s.pids[name]; ok {
			if p, err = readProcess(os.DirFS("/proc"), pid); err != nil {
				return nil, fmt.Errorf("process %s: %w", name, err)
			}
		}
		if dir, ok := s.cgroups[name]; ok {
			st, err := readCFS(filepath.Join(dir, "cpu.stat"))
			if err != nil {
				return nil, fmt.Errorf("process %s: %w", name, err)
			}
			p.CFS = &st
		}
		if url, ok := s.metrics[name]; ok {
			text, err := getText(ctx, http.DefaultClient, url)
			if err != nil {
				return nil, fmt.Errorf("process %s: %w", name, err)
			}
			if p.Metrics, p.Decisions, err = metricsOf(text); err != nil {
				return nil, fmt.Errorf("process %s, %s: %w", name, url, err)
			}
		}
		if out.Processes == nil {
			out.Processes = map[string]processSample{}
		}
		out.Processes[name] = p
	}
	if s.watches {
		m, err := o.apiserverMetrics()
		if err != nil {
			return nil, err
		}
		if out.Watches, err = m.watches(ctx, s.settle); err != nil {
			return nil, err
		}
	}
	if s.readyNodes {
		cl, err := o.client()
		if err != nil {
			return nil, err
		}
		n, err := readyNodes(ctx, cl)
		if err != nil {
			return nil, err
		}
		out.ReadyNodes = &n
	}
	return out, nil
}

// runSample takes a sample, writes its JSON line to --out (or standard
// output) and a line of it for people to standard error.
func runSample(ctx context.Context, o *options, s *sampleOptions) error {
	smp, err := takeSample(ctx, o, s)
	if err != nil {
		return err
	}
	line, err := json.Marshal(smp)
	if err != nil {
		return err
	}
	w := io.Writer(os.Stdout)
	if s.out != "" {
		f, err := os.OpenFile(s.out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if _, err := fmt.Fprintf(w, "%s\n", line); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "[perfload] %s\n", describeSample(smp))
	return nil
}

// describeSample is a sample in one line: each process's memory, and the
// watches' total.
func describeSample(s *sample) string {
	parts := []string{s.Tag}
	for _, name := range slices.Sorted(maps.Keys(s.Processes)) {
		if m := memory(s.Processes[name]); m != "" {
			parts = append(parts, name+" "+m)
		}
	}
	if s.Watches != nil {
		parts = append(parts, fmt.Sprintf("kube-apiserver serves %d watches", watchTotal(s.Watches)))
	}
	if s.ReadyNodes != nil {
		parts = append(parts, fmt.Sprintf("%d nodes Ready", *s.ReadyNodes))
	}
	return strings.Join(parts, "; ")
}

// userHZ is the unit of the CPU times of /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 on every architecture Go runs on (what `getconf
// CLK_TCK` prints).
const userHZ = 100

// readProcess reads the CPU time of process pid from proc's PID/stat and its
// memory from PID/status.
func readProcess(proc fs.FS, pid string) (processSample, error) {
	stat, err := fs.ReadFile(proc, pid+"/stat")
	if err != nil {
		return processSample{}, err
	}
	cpu, err := parseProcStat(string(stat))
	if err != nil {
		return processSample{}, fmt.Errorf("/proc/%s/stat: %w", pid, err)
	}
	status, err := fs.ReadFile(proc, pid+"/status")
	if err != nil {
		return processSample{}, err
	}
	rss, hwm, err := parseProcStatus(string(status))
	if err != nil {
		return processSample{}, fmt.Errorf("/proc/%s/status: %w", pid, err)
	}
	return processSample{CPUSeconds: &cpu, VmRSSKiB: &rss, VmHWMKiB: &hwm}, nil
}

// parseProcStat is the user plus system CPU time of a /proc/PID/stat line,
// in seconds: fields 14 and 15 (utime, stime), counted after the command
// name, which is in parentheses and may hold spaces and parentheses itself.
func parseProcStat(line string) (float64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("no command name in parentheses")
	}
	// After the name: state (field 3), ..., utime (14), stime (15).
	f := strings.Fields(line[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime or stime: %w", err)
		}
		ticks += float64(n)
	}
	return ticks / userHZ, nil
}

// parseProcStatus reads VmRSS and VmHWM, in KiB, from /proc/PID/status.
func parseProcStatus(text string) (rss, hwm int64, err error) {
	found := 0
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("%s: %q, want a number of kB", name, strings.TrimSpace(value))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("no VmRSS and VmHWM: a kernel thread, or a process that has exited")
	}
	return rss, hwm, nil
}

// readCFS reads a cgroup's cpu.stat.
func readCFS(path string) (cfsStat, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return cfsStat{}, err
	}
	return parseCFS(string(data))
}

// parseCFS reads nr_periods and nr_throttled from a cgroup's cpu.stat.
func parseCFS(text string) (cfsStat, error) {
	var st cfsStat
	found := 0
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != "nr_periods" && f[0] != "nr_throttled") {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return st, fmt.Errorf("cpu.stat %s: %w", f[0], err)
		}
		if f[0] == "nr_periods" {
			st.Periods = n
		} else {
			st.Throttled = n
		}
		found++
	}
	if found != 2 {
		return st, errors.New("cpu.stat has no nr_periods and nr_throttled: the cgroup has no CPU quota accounting")
	}
	return st, nil
}

// loadAverage reads the 1-minute load average from /proc/loadavg.
func loadAverage(path string) (float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s is empty", path)
	}
	return strconv.ParseFloat(f[0], 64)
}

// A series of Prometheus text: a metric's name, its labels as written
// between the braces, and its value.
type series struct {
	name, labels string
	value        float64
}

// eachSeries calls fn with every sample of Prometheus text, comments
// skipped. A sample without a number for its value is an error.
func eachSeries(text string, fn func(series)) error {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var s series
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return fmt.Errorf("a sample whose labels do not end: %q", line)
			}
			s.name, s.labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else {
			s.name, rest, _ = strings.Cut(line, " ")
		}
		// The value, and a timestamp after it where there is one.
		f := strings.Fields(rest)
		if len(f) == 0 {
			return fmt.Errorf("a sample of %s without a value: %q", s.name, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return fmt.Errorf("a sample of %s: %w", s.name, err)
		}
		s.value = v
		fn(s)
	}
	return nil
}

// label is the value of the label name in a series' labels, "" when it has
// none.
func label(labels, name string) string {
	_, v, ok := strings.Cut(","+labels, ","+name+`="`)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, `"`)
	return v
}

// sumSeries is the sum of every series of the metric name in Prometheus
// text, 0 when it has none.
func sumSeries(text, name string) (float64, error) {
	var sum float64
	err := eachSeries(text, func(s series) {
		if s.name == name {
			sum += s.value
		}
	})
	return sum, err
}

// metricsOf keeps the counters of sampledMetrics that text has, summed over
// their series, and the decision-time histogram's totals by webhook.
func metricsOf(text string) (map[string]float64, map[string]histogramTotals, error) {
	var counters map[string]float64
	var decisions map[string]histogramTotals
	err := eachSeries(text, func(s series) {
		if slices.Contains(sampledMetrics, s.name) {
			if counters == nil {
				counters = map[string]float64{}
			}
			counters[s.name] += s.value
			return
		}
		name, total := "", 0
		switch s.name {
		case metricDecisionTimes + "_sum":
			name, total = label(s.labels, "webhook"), 1
		case metricDecisionTimes + "_count":
			name, total = label(s.labels, "webhook"), 2
		default:
			return
		}
		if decisions == nil {
			decisions = map[string]histogramTotals{}
		}
		h := decisions[name]
		if total == 1 {
			h.Sum += s.value
		} else {
			h.Count += s.value
		}
		decisions[name] = h
	})
	return counters, decisions, err
}

// parseWatches is the WATCH requests kube-apiserver serves, by
// "group/resource" ("core" for the empty group), from its
// apiserver_longrunning_requests.
func parseWatches(text string) (map[string]int, error) {
	w := map[string]int{}
	err := eachSeries(text, func(s series) {
		if s.name != metricWatches || label(s.labels, "verb") != "WATCH" || s.value <= 0 {
			return
		}
		g := label(s.labels, "group")
		if g == "" {
			g = "core"
		}
		w[g+"/"+label(s.labels, "resource")] += int(s.value)
	})
	return w, err
}

// watches reads kube-apiserver's watches. With settle it reads them every 5
// seconds until two readings agree, at most 24 times: an informer that was
// just started may still be opening its watches.
func (m *apiserverMetrics) watches(ctx context.Context, settle bool) (map[string]int, error) {
	var prev map[string]int
	for range 24 {
		text, err := m.text(ctx)
		if err != nil {
			return nil, err
		}
		cur, err := parseWatches(text)
		if err != nil {
			return nil, fmt.Errorf("kube-apiserver's /metrics: %w", err)
		}
		if !settle || (prev != nil && maps.Equal(prev, cur)) {
			return cur, nil
		}
		prev = cur
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	return prev, nil
}

// watchTotal is the number of watches of every resource.
func watchTotal(w map[string]int) int {
	n := 0
	for _, c := range w {
		n += c
	}
	return n
}

// readyNodes counts the nodes whose Ready condition is True.
func readyNodes(ctx context.Context, cl client.Client) (int, error) {
	var nodes v1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		return 0, fmt.Errorf("listing the nodes: %w", err)
	}
	n := 0
	for _, node := range nodes.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// getText reads url, which must answer 200 OK.
func getText(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", url, err)
	}
	body, err := do(hc, req)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", url, err)
	}
	return string(body), nil
}

// runMetric prints the sum of every series of the metric name at url, 0
// when it has none yet (a counter with labels has no series before its
// first increment).
func runMetric(ctx context.Context, url, name string) error {
	text, err := getText(ctx, http.DefaultClient, url)
	if err != nil {
		return err
	}
	v, err := sumSeries(text, name)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	fmt.Println(strconv.FormatFloat(v, 'f', -1, 64))
	return nil
}

// runWatches prints kube-apiserver's watches, one "group/resource count"
// line each, sorted.
func runWatches(ctx context.Context, o *options) error {
	m, err := o.apiserverMetrics()
	if err != nil {
		return err
	}
	w, err := m.watches(ctx, false)
	if err != nil {
		return err
	}
	for _, r := range slices.Sorted(maps.Keys(w)) {
		fmt.Println(r, w[r])
	}
	return nil
}
