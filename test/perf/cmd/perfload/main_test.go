package main

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// TestLeanPodKeepsWhatTheCheckersRead holds a lean pod to the promise of
// --pod-size lean: spreadguard's index records it as it records the full
// pod, the scheduler's inputs (node, owner, labels, scheduling fields and
// requests) are unchanged, and it is a fraction of the size.
func TestLeanPodKeepsWhatTheCheckersRead(t *testing.T) {
	c := fixture.New(50)
	for _, w := range []int{0, 1, c.Workloads() - 1} {
		full := fillPod(c, w, 0, "uid", false)
		lean := fillPod(c, w, 0, "uid", true)

		if diff := cmp.Diff(spread.PodRecordOf(full), spread.PodRecordOf(lean), cmpopts.EquateComparable(spread.LabelSet{}, spread.ConstraintSet{})); diff != "" {
			t.Errorf("workload %d: the index's record of the lean pod differs (-full +lean):\n%s", w, diff)
		}
		if diff := cmp.Diff(scheduling(full), scheduling(lean)); diff != "" {
			t.Errorf("workload %d: what the scheduler reads differs (-full +lean):\n%s", w, diff)
		}
		fullSize, leanSize := jsonSize(t, full), jsonSize(t, lean)
		if leanSize*2 > fullSize {
			t.Errorf("workload %d: the lean pod is %d bytes of JSON, the full one %d: want less than half", w, leanSize, fullSize)
		}
	}
}

// scheduling is what kube-scheduler's filters and scores read of a pod.
func scheduling(p *v1.Pod) any {
	type container struct {
		Name      string
		Resources v1.ResourceRequirements
	}
	var containers []container
	for _, c := range p.Spec.Containers {
		containers = append(containers, container{c.Name, c.Resources})
	}
	return struct {
		Labels      map[string]string
		Owners      any
		NodeName    string
		Selector    map[string]string
		Affinity    *v1.Affinity
		Tolerations []v1.Toleration
		Spread      []v1.TopologySpreadConstraint
		Containers  []container
	}{p.Labels, p.OwnerReferences, p.Spec.NodeName, p.Spec.NodeSelector, p.Spec.Affinity, p.Spec.Tolerations,
		p.Spec.TopologySpreadConstraints, containers}
}

func jsonSize(t *testing.T, p *v1.Pod) int {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func TestPacedStartsEachCreateOnTimeWithoutWaitingForTheOthers(t *testing.T) {
	const n, rate = 20, 1000.0
	var started atomic.Int64
	allStarted := make(chan struct{})
	starts := make([]time.Time, n)
	begin := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		paced(t.Context(), rate, n, func(ctx context.Context, i int) error {
			starts[i] = time.Now()
			if started.Add(1) == n {
				close(allStarted)
			}
			// Each create answers only once every create has started: paced
			// that waited for one before starting the next would never end.
			select {
			case <-allStarted:
			case <-time.After(10 * time.Second):
				t.Errorf("create %d: not every create started within 10s of it", i)
			}
			return nil
		})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("paced did not return within 20s")
	}
	for i, s := range starts {
		if due := begin.Add(time.Duration(float64(i) / rate * float64(time.Second))); s.Before(due) {
			t.Errorf("create %d started %v before its time", i, due.Sub(s))
		}
	}
}
