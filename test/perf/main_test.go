package perf

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// The benchmark binary re-executes itself as a child process for the
// HTTPS client and for the memory measurements; this variable says which.
const (
	envChild       = "SPREADGUARD_PERF_CHILD"
	envChildConfig = "SPREADGUARD_PERF_CONFIG"
	childLoad      = "load"
	childMemory    = "memory"
)

// benchSizes are the cluster sizes, by node count: the baseline and the
// target.
var benchSizes = []int{50, 5000}

func TestMain(m *testing.M) {
	// The servers get a discarding logger of their own; these are the
	// process-wide ones client-go and controller-runtime fall back to.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	switch os.Getenv(envChild) {
	case childLoad:
		os.Exit(runLoadChild())
	case childMemory:
		os.Exit(runMemoryChild())
	}
	code := m.Run()
	stopServers()
	os.Exit(code)
}

// prepared is a running server with its review bodies on disk, shared by
// every benchmark of one size: at 150,000 pods it takes a while to fill.
type prepared struct {
	srv            *server
	dir            string
	mutateBodies   string
	validateBodies string
}

var shared struct {
	sync.Mutex
	bySize map[int]*prepared
	failed map[int]error
}

// prepare returns the shared server of nodes, starting it on first use.
func prepare(b *testing.B, nodes int) *prepared {
	b.Helper()
	shared.Lock()
	defer shared.Unlock()
	if p := shared.bySize[nodes]; p != nil {
		return p
	}
	if err := shared.failed[nodes]; err != nil {
		b.Fatal(err)
	}
	p, err := startPrepared(fixture.New(nodes))
	if err != nil {
		if shared.failed == nil {
			shared.failed = map[int]error{}
		}
		shared.failed[nodes] = err
		b.Fatal(err)
	}
	if shared.bySize == nil {
		shared.bySize = map[int]*prepared{}
	}
	shared.bySize[nodes] = p
	return p
}

func startPrepared(c fixture.Cluster) (*prepared, error) {
	dir, err := os.MkdirTemp("", "spreadguard-perf-")
	if err != nil {
		return nil, err
	}
	p := &prepared{dir: dir}
	if p.srv, err = startServer(context.Background(), c, dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the server at %s: %w", c, err)
	}
	r, err := buildReviews(p.srv)
	if err == nil {
		p.mutateBodies, err = writeBodies(dir, "mutate.jsonl", r.mutate)
	}
	if err == nil {
		p.validateBodies, err = writeBodies(dir, "validate.jsonl", r.validate)
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("preparing the reviews at %s: %w", c, err)
	}
	return p, nil
}

func (p *prepared) stop() {
	if p.srv != nil {
		if err := p.srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the server at %s: %v\n", p.srv.cluster, err)
		}
	}
	os.RemoveAll(p.dir)
}

func stopServers() {
	shared.Lock()
	defer shared.Unlock()
	for _, p := range shared.bySize {
		p.stop()
	}
	shared.bySize = nil
}
