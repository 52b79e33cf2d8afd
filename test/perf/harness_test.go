package perf

import (
	"testing"

	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// TestServerAnswersReviews runs the benchmarks' whole set-up at the small
// size: the server fills from the stream, every mutate review comes back
// patched, every validate review counted and allowed, and the pod that
// must be refused is.
func TestServerAnswersReviews(t *testing.T) {
	c := fixture.New(50)
	p, err := startPrepared(c)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	for kind, want := range map[string]int64{"Pod": int64(c.Pods()), "Node": int64(c.Nodes), "ReplicaSet": int64(c.Workloads())} {
		if got := p.srv.source.Sent(kind); got != want {
			t.Errorf("%s objects streamed = %d, want %d", kind, got, want)
		}
	}
}
