package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// envHeapProfile names a directory; when set, each memory measurement
// writes the heap profile of its process there after the fill
// (heap-<cache>-<nodes>.pprof).
const envHeapProfile = "SPREADGUARD_PERF_HEAPPROFILE"

// What a memory measurement holds.
const (
	// cacheServer: the whole webhook server (app.Run): informer caches
	// with pkg/cache's transforms, the index, the manager and the HTTPS
	// server.
	cacheServer = "server"
	// cacheIndex: spread.Index alone, fed the transformed nodes and pods.
	cacheIndex = "index"
	// cacheBaseline: client-go's plain indexer holding every object as
	// the apiserver sent it, the way an informer without transforms
	// would.
	cacheBaseline = "untransformed-indexer"
)

// memoryConfig tells the memory child what to fill.
type memoryConfig struct {
	Cache string `json:"cache"`
	Nodes int    `json:"nodes"`
}

// memoryResult is what the memory child measured, in bytes.
type memoryResult struct {
	// Heap is the live heap after the fill and a forced GC.
	Heap uint64 `json:"heap"`
	// PeakHeap is the largest heap (live and not yet collected objects)
	// sampled every millisecond during the fill.
	PeakHeap uint64 `json:"peakHeap"`
	// RSS is the resident set (VmRSS) once it has settled after that GC:
	// the runtime returns freed memory to the OS gradually.
	RSS uint64 `json:"rss"`
	// PeakRSS is the resident set's high-water mark (VmHWM).
	PeakRSS uint64 `json:"peakRSS"`
	// Fill is how long the fill took.
	Fill time.Duration `json:"fill"`
	// Error is why the measurement is void.
	Error string `json:"error,omitempty"`
}

// BenchmarkServerMemory measures the memory the webhook needs to hold a
// cluster, each fill in a fresh process: the heap after the initial fill
// and a GC, the peak heap during the fill, and the process's resident set
// (settled, and its high-water mark). The baseline is client-go's plain
// indexer holding the same objects untransformed. Each op is one fill.
func BenchmarkServerMemory(b *testing.B) {
	for _, nodes := range benchSizes {
		c := fixture.New(nodes)
		for _, what := range []string{cacheServer, cacheIndex, cacheBaseline} {
			b.Run(fmt.Sprintf("%s/cache=%s", c, what), func(b *testing.B) {
				var res *memoryResult
				for range b.N {
					var err error
					if res, err = runMemory(memoryConfig{Cache: what, Nodes: nodes}); err != nil {
						b.Fatal(err)
					}
				}
				mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
				b.ReportMetric(mib(res.Heap), "heap-MiB")
				b.ReportMetric(mib(res.PeakHeap), "peak-heap-MiB")
				b.ReportMetric(mib(res.RSS), "rss-MiB")
				b.ReportMetric(mib(res.PeakRSS), "peak-rss-MiB")
				b.ReportMetric(res.Fill.Seconds(), "fill-s")
				if what == cacheBaseline {
					pod, _ := json.Marshal(c.Pod(0, 0))
					node, _ := json.Marshal(c.Node(0))
					b.ReportMetric(float64(len(pod)), "pod-json-B")
					b.ReportMetric(float64(len(node)), "node-json-B")
				}
			})
		}
	}
}

// runMemory runs one measurement in a child process.
func runMemory(cfg memoryConfig) (*memoryResult, error) {
	conf, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+childMemory, envChildConfig+"="+string(conf))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	runErr := cmd.Run()
	var res memoryResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("memory child (%v): reading its result %q: %w", runErr, stdout.String(), err)
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	return &res, runErr
}

// runMemoryChild is the memory child's main: one fill, one result line.
func runMemoryChild() int {
	var cfg memoryConfig
	res := &memoryResult{}
	err := json.Unmarshal([]byte(os.Getenv(envChildConfig)), &cfg)
	if err == nil {
		res, err = measure(cfg)
	}
	if err != nil {
		res = &memoryResult{Error: fmt.Sprintf("%s at %d nodes: %v", cfg.Cache, cfg.Nodes, err)}
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

func measure(cfg memoryConfig) (*memoryResult, error) {
	c := fixture.New(cfg.Nodes)
	sampler := startPeakSampler()
	start := time.Now()
	var check func() error
	switch cfg.Cache {
	case cacheServer:
		dir, err := os.MkdirTemp("", "spreadguard-perf-mem-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		s, err := startServer(context.Background(), c, dir)
		if err != nil {
			return nil, err
		}
		defer s.Stop()
		check = func() error {
			client, err := newClient(s.caFile, 1)
			if err != nil {
				return err
			}
			defer client.CloseIdleConnections()
			return checkCounted(client, s)
		}
	case cacheIndex:
		ix := fillIndex(c)
		check = func() error {
			res, err := ix.Check(refusedPod(c), spread.Options{})
			if err != nil {
				return err
			}
			if res.Verdict != spread.VerdictUnsatisfiable {
				return fmt.Errorf("the index found the pod that must be refused %s: it did not count every pod", res.Verdict)
			}
			return nil
		}
	case cacheBaseline:
		store, want := fillStore(c)
		check = func() error {
			if got := len(store.ListKeys()); got != want {
				return fmt.Errorf("the store holds %d objects, want %d", got, want)
			}
			return nil
		}
	default:
		return nil, fmt.Errorf("unknown cache %q", cfg.Cache)
	}
	res := &memoryResult{Fill: time.Since(start)}
	res.PeakHeap = sampler.stop()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.Heap = ms.HeapAlloc
	if dir := os.Getenv(envHeapProfile); dir != "" {
		if err := writeHeapProfile(filepath.Join(dir, fmt.Sprintf("heap-%s-%d.pprof", cfg.Cache, cfg.Nodes))); err != nil {
			return nil, err
		}
	}
	var err error
	if res.RSS, err = settledRSS(); err != nil {
		return nil, err
	}
	if res.PeakRSS, err = procStatus("VmHWM"); err != nil {
		return nil, err
	}
	// Checked after measuring, so that the check's own allocations are
	// not in the figures; it keeps the caches alive until then, too.
	if err := check(); err != nil {
		return nil, err
	}
	return res, nil
}

// fillIndex feeds a spread.Index what the server's informers would: every
// node and pod through pkg/cache's transforms.
func fillIndex(c fixture.Cluster) *spread.Index {
	ix := spread.NewIndex()
	objects(c, &v1.Node{}, func(o k8sruntime.Object) bool {
		n, _ := cache.StripNode(o)
		ix.AddNode(n.(*v1.Node))
		return true
	})
	objects(c, &v1.Pod{}, func(o k8sruntime.Object) bool {
		p, _ := cache.StripPod(o)
		ix.AddPodRecord(p.(*cache.Pod).Record())
		return true
	})
	return ix
}

// fillStore is the baseline: every object of every type the webhook
// watches, untransformed, in client-go's indexer (the store behind an
// informer, with its namespace index). It returns the store and how many
// objects it should hold.
func fillStore(c fixture.Cluster) (toolscache.Indexer, int) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	n := 0
	for _, exemplar := range cache.Watched(nil) {
		objects(c, exemplar, func(o k8sruntime.Object) bool {
			n++
			return store.Add(o) == nil
		})
	}
	return store, n
}

// peakSampler records the largest heap seen while it runs.
type peakSampler struct {
	done chan struct{}
	peak chan uint64
}

func startPeakSampler() *peakSampler {
	s := &peakSampler{done: make(chan struct{}), peak: make(chan uint64)}
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-s.done:
				s.peak <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *peakSampler) stop() uint64 {
	close(s.done)
	return <-s.peak
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// settledRSS waits until the resident set stops shrinking (less than 1 MiB
// in a second), at most 30 seconds, and returns it.
func settledRSS() (uint64, error) {
	prev, err := procStatus("VmRSS")
	if err != nil {
		return 0, err
	}
	for range 30 {
		time.Sleep(time.Second)
		rss, err := procStatus("VmRSS")
		if err != nil {
			return 0, err
		}
		if rss+1<<20 > prev {
			return rss, nil
		}
		prev = rss
	}
	return prev, nil
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(field string) (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %s in /proc/self/status: %w", field, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}
