package perf

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// loadConfig tells the load generator what to send.
type loadConfig struct {
	URL     string      `json:"url"`
	CAFile  string      `json:"caFile"`
	Bodies  string      `json:"bodies"`
	Workers int         `json:"workers"`
	Expect  expectation `json:"expect"`
}

// loadResult is one run of the load generator.
type loadResult struct {
	Requests   int    `json:"requests"`
	Errors     int    `json:"errors"`
	FirstError string `json:"firstError,omitempty"`
	// Elapsed is from the first request sent to the last answer read.
	Elapsed time.Duration `json:"elapsed"`
	P50     time.Duration `json:"p50"`
	P99     time.Duration `json:"p99"`
	P999    time.Duration `json:"p999"`
	// ClientCPU is the load generator's own CPU time during the run.
	ClientCPU time.Duration `json:"clientCPU"`
}

// runLoad measures b.N reviews sent by a child process over keep-alive
// HTTPS connections, one per worker, and reports throughput, latency
// percentiles and the CPU time this process (the server) spent per review.
func runLoad(b *testing.B, cfg loadConfig) {
	b.Helper()
	child, err := startLoadChild(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer child.close()
	stopProfile, err := startCPUProfile(b)
	if err != nil {
		b.Fatal(err)
	}
	stopTrace, err := startTrace(b)
	if err != nil {
		stopProfile()
		b.Fatal(err)
	}
	b.ResetTimer()
	rt0 := readRuntime()
	cpu0 := cpuTime()
	res, err := child.run(b.N)
	cpu := cpuTime() - cpu0
	rt := runtimeSince(rt0, readRuntime())
	b.StopTimer()
	stopTrace()
	stopProfile()
	if err != nil {
		b.Fatal(err)
	}
	if res.Errors > 0 {
		b.Fatalf("%d of %d reviews failed; the first: %s", res.Errors, res.Requests, res.FirstError)
	}
	n := float64(res.Requests)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(n/res.Elapsed.Seconds(), "reviews/s")
	b.ReportMetric(ms(res.P50), "p50-ms")
	b.ReportMetric(ms(res.P99), "p99-ms")
	b.ReportMetric(ms(res.P999), "p99.9-ms")
	serverCPU := float64(cpu.Microseconds()) / n
	b.ReportMetric(serverCPU, "server-cpu-us/review")
	b.ReportMetric(float64(res.ClientCPU.Microseconds())/n, "client-cpu-us/review")
	// What 2 CPUs of the server's own would sustain, CPU-bound: the
	// client shares this machine's 2 cores with the server, so reviews/s
	// alone understates a replica.
	if serverCPU > 0 {
		b.ReportMetric(2e6/serverCPU, "cpu-bound-reviews/s@2cpu")
	}
	rt.report(b, n)
}

// envCPUProfile names a directory; when set, each admission benchmark
// writes a CPU profile of the server (this process) covering its timed
// run only, without the fill and the set-up that `go test -cpuprofile`
// would mix in: cpu-<benchmark name>-N<reviews>.pprof.
const envCPUProfile = "SPREADGUARD_PERF_CPUPROFILE"

func startCPUProfile(b *testing.B) (stop func(), err error) {
	return startRecording(b, envCPUProfile, "cpu-%s-N%d.pprof", pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startRecording starts, when the variable env names a directory, a
// recording of the server into a file of it named by pattern from the
// benchmark's name and b.N; stop ends it and closes the file.
func startRecording(b *testing.B, env, pattern string, start func(io.Writer) error, end func()) (stop func(), err error) {
	dir := os.Getenv(env)
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf(pattern, fileName(b), b.N)))
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s (not with go test's own flag for it): %w", f.Name(), err)
	}
	return func() {
		end()
		f.Close()
	}, nil
}

// loadChild is a running load generator.
type loadChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startLoadChild(cfg loadConfig) (*loadChild, error) {
	conf, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+childLoad, envChildConfig+"="+string(conf))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the load generator: %w", err)
	}
	c := &loadChild{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	c.out.Buffer(make([]byte, 64<<10), 1<<20)
	if !c.out.Scan() || !strings.HasPrefix(c.out.Text(), "ready") {
		c.close()
		return nil, fmt.Errorf("the load generator did not get ready: %q %v", c.out.Text(), c.out.Err())
	}
	return c, nil
}

func (c *loadChild) run(n int) (*loadResult, error) {
	if _, err := fmt.Fprintf(c.stdin, "run %d\n", n); err != nil {
		return nil, fmt.Errorf("starting a run: %w", err)
	}
	if !c.out.Scan() {
		return nil, fmt.Errorf("the load generator exited: %v", c.out.Err())
	}
	var res loadResult
	if err := json.Unmarshal(c.out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("reading the load generator's result %q: %w", c.out.Text(), err)
	}
	return &res, nil
}

func (c *loadChild) close() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// runLoadChild is the load generator's main: it opens its connections,
// says "ready", then answers every "run N" line on stdin with a loadResult
// line on stdout.
func runLoadChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "load generator:", err)
		return 1
	}
	var cfg loadConfig
	if err := json.Unmarshal([]byte(os.Getenv(envChildConfig)), &cfg); err != nil {
		return fail(fmt.Errorf("reading %s: %w", envChildConfig, err))
	}
	data, err := os.ReadFile(cfg.Bodies)
	if err != nil {
		return fail(err)
	}
	var bodies [][]byte
	var uids []string
	for line := range bytes.Lines(data) {
		body := bytes.TrimSuffix(line, []byte("\n"))
		uid, err := uidOf(body)
		if err != nil {
			return fail(fmt.Errorf("reading a body of %s: %w", cfg.Bodies, err))
		}
		bodies = append(bodies, body)
		uids = append(uids, uid)
	}
	if len(bodies) == 0 {
		return fail(fmt.Errorf("no bodies in %s", cfg.Bodies))
	}
	client, err := newClient(cfg.CAFile, cfg.Workers)
	if err != nil {
		return fail(err)
	}
	g := &generator{cfg: cfg, client: client, bodies: bodies, uids: uids}
	// Open every connection and warm both ends up before the clock runs.
	if res := g.run(20 * cfg.Workers); res.Errors > 0 {
		return fail(fmt.Errorf("warming up: %d errors; the first: %s", res.Errors, res.FirstError))
	}
	fmt.Printf("ready %s\n", tls.VersionName(g.tlsVersion.Load().(uint16)))
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var n int
		if _, err := fmt.Sscanf(in.Text(), "run %d", &n); err != nil || n < 1 {
			return fail(fmt.Errorf("unexpected command %q", in.Text()))
		}
		if err := enc.Encode(g.run(n)); err != nil {
			return fail(err)
		}
	}
	return 0
}

// generator sends reviews from several workers over one client.
type generator struct {
	cfg        loadConfig
	client     *http.Client
	bodies     [][]byte
	uids       []string
	tlsVersion atomic.Value
}

func (g *generator) run(n int) loadResult {
	latencies := make([]time.Duration, n)
	var next, errs atomic.Int64
	var firstErr atomic.Value
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for range g.cfg.Workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				k := i % len(g.bodies)
				t0 := time.Now()
				err := g.send(k)
				latencies[i] = time.Since(t0)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	res := loadResult{Requests: n, Errors: int(errs.Load()), Elapsed: time.Since(start), ClientCPU: cpuTime() - cpu0}
	if e, ok := firstErr.Load().(string); ok {
		res.FirstError = e
	}
	slices.Sort(latencies)
	res.P50, res.P99, res.P999 = percentile(latencies, 0.50), percentile(latencies, 0.99), percentile(latencies, 0.999)
	return res
}

// send posts review k and checks the answer.
func (g *generator) send(k int) error {
	req, err := http.NewRequest(http.MethodPost, g.cfg.URL, bytes.NewReader(g.bodies[k]))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.TLS != nil {
		g.tlsVersion.Store(resp.TLS.Version)
	}
	_, err = g.cfg.Expect.check(resp.StatusCode, body, g.uids[k])
	return err
}

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
