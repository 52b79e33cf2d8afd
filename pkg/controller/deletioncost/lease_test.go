package deletioncost

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// stallingPods is the pod cache, whose first EachPod (the first sync of the
// first lead) blocks until release is closed, once it said so on inside.
type stallingPods struct {
	*fakePods
	once            sync.Once
	inside, release chan struct{}
}

func (s *stallingPods) EachPod(fn func(*cache.Pod)) error {
	s.once.Do(func() {
		close(s.inside)
		<-s.release
	})
	return s.fakePods.EachPod(fn)
}

// TestKeeperWritesAfterTheLeaseIsLostInsideASync loses the Lease while the
// first lead is inside a sync and retakes it at once, as client-go does:
// the election returns without waiting for the lead it started. The old
// lead leaves its sync only after the new election began; the keeper must
// still write the cost of a pod created after that.
func TestKeeperWritesAfterTheLeaseIsLostInsideASync(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ix := spread.NewIndex()
	for _, n := range zones() {
		ix.AddNode(n)
	}
	fp := &fakePods{ix: ix, full: map[string]*v1.Pod{}, compact: map[string]*cache.Pod{}}
	pods := &stallingPods{fakePods: fp, inside: make(chan struct{}), release: make(chan struct{})}
	patcher := &fakePatcher{pods: fp, fail: map[string]error{}, fails: map[string]int{}}
	k, err := New(Config{
		Log: logr.Discard(), Index: ix, Pods: pods, Changes: pods,
		Reader:   fake.NewClientBuilder().WithScheme(scheme).WithObjects(replicaSet(zoneConstraint())).Build(),
		Policies: policy.SliceLister{}, Patcher: patcher, QPS: 1000, Burst: 1000,
		Synced: func() bool { return true }, Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range spreadOver(zones(), 2, zoneConstraint()) {
		fp.set(p)
	}
	lose := make(chan struct{})
	elections := 0
	k.elect = func(ctx context.Context, cb leaderelection.LeaderCallbacks) error {
		elections++
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go cb.OnStartedLeading(lctx)
		if elections == 1 {
			select {
			case <-lose:
			case <-ctx.Done():
			}
			return nil // lost: the lead's context ends, its goroutine runs on
		}
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- k.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start() = %v", err)
		}
	}()
	<-pods.inside
	close(lose)
	time.Sleep(100 * time.Millisecond) // the second election begins
	close(pods.release)

	applied := func(want string) bool {
		patcher.mu.Lock()
		defer patcher.mu.Unlock()
		return slices.Contains(patcher.applied, want)
	}
	// The start writes the 12 pods' costs; then a 13th pod, created once
	// the second lead runs, gets its own.
	deadline := time.Now().Add(10 * time.Second)
	for !applied("web-0=-2") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	fp.set(webPod("web-12", "a-0", zoneConstraint()))
	for !applied("web-12=-10") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !applied("web-12=-10") {
		patcher.mu.Lock()
		defer patcher.mu.Unlock()
		t.Fatalf("the pod created after the Lease was retaken got no cost; the keeper applied %v", patcher.applied)
	}
}
