package forecast

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestControllerRankingDeletesAsTheReplicaSetControllerDoes(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	// pod is a Running, Ready pod of web on node, created and Ready a day
	// ago.
	pod := func(name, node string) *spreadtest.PodWrapper {
		return spreadtest.MakePod().Namespace(shop).Name(name).UID("uid-"+name).Label("app", "web").Node(node).
			Created(ago(24 * time.Hour))
	}
	tests := []struct {
		name    string
		pods    []*v1.Pod
		related []*v1.Pod
		now     time.Time
		want    []string
	}{
		{
			name: "an unscheduled pod, a Pending one, an Unknown one and a Running one -> in that order",
			pods: []*v1.Pod{
				pod("running", "n1").Ready(ago(time.Hour)).Obj(),
				pod("unknown", "n1").Phase(v1.PodUnknown).Obj(),
				pod("pending", "n1").Phase(v1.PodPending).Obj(),
				pod("unscheduled", "").Phase(v1.PodPending).Obj(),
			},
			want: []string{"unscheduled", "pending", "unknown", "running"},
		},
		{
			name: "a Running pod not Ready before a Ready one, whatever their costs",
			pods: []*v1.Pod{
				pod("ready", "n1").Ready(ago(time.Hour)).Annotation(v1.PodDeletionCost, "-100").Obj(),
				pod("not-ready", "n1").NotReady().Annotation(v1.PodDeletionCost, "100").Obj(),
			},
			want: []string{"not-ready", "ready"},
		},
		{
			name: "Ready pods costing 10, -5 and none -> the lower cost first: -5, none (0), 10",
			pods: []*v1.Pod{
				pod("ten", "n1").Ready(ago(time.Hour)).Annotation(v1.PodDeletionCost, "10").Obj(),
				pod("none", "n2").Ready(ago(time.Hour)).Obj(),
				pod("minus-five", "n3").Ready(ago(time.Hour)).Annotation(v1.PodDeletionCost, "-5").Obj(),
			},
			want: []string{"minus-five", "none", "ten"},
		},
		{
			name: "costs the controller cannot read (+5, 007, 3e9) count as 0, so a pod on a fuller node goes before them",
			pods: []*v1.Pod{
				pod("plus", "n1").Ready(ago(time.Hour)).Annotation(v1.PodDeletionCost, "+5").Obj(),
				pod("zeros", "n2").Ready(ago(time.Hour)).Annotation(v1.PodDeletionCost, "007").Obj(),
				pod("huge", "n3").Ready(ago(time.Hour)).Annotation(v1.PodDeletionCost, "3000000000").Obj(),
				pod("doubled", "n4").Ready(ago(time.Hour)).Obj(),
				pod("doubled-too", "n4").Ready(ago(time.Hour)).Obj(),
			},
			want: []string{"doubled", "doubled-too", "plus", "zeros", "huge"},
		},
		{
			name: "equal costs, n1 holding 3 related pods (one of another revision) and n2 one -> the pods of n1 first",
			pods: []*v1.Pod{
				pod("alone", "n2").Ready(ago(time.Hour)).Obj(),
				pod("crowded-1", "n1").Ready(ago(time.Hour)).Obj(),
				pod("crowded-2", "n1").Ready(ago(time.Hour)).Obj(),
			},
			related: []*v1.Pod{
				pod("alone", "n2").Obj(), pod("crowded-1", "n1").Obj(), pod("crowded-2", "n1").Obj(),
				pod("old-revision", "n1").Obj(),
				// Neither a finished nor a terminating pod counts.
				pod("done", "n2").Phase(v1.PodSucceeded).Obj(), pod("going", "n2").Terminating().Obj(),
			},
			want: []string{"crowded-1", "crowded-2", "alone"},
		},
		{
			name: "Ready for 1 minute and for 10 days, no clock -> the one Ready for less time first",
			pods: []*v1.Pod{
				pod("old", "n1").Ready(ago(240 * time.Hour)).Obj(),
				pod("fresh", "n2").Ready(ago(time.Minute)).Obj(),
			},
			want: []string{"fresh", "old"},
		},
		{
			name: "Ready 61 and 62 minutes ago at a clock, one logarithmic bucket -> by UID, not by time",
			pods: []*v1.Pod{
				pod("b-newer", "n1").Ready(ago(61 * time.Minute)).Obj(),
				pod("a-older", "n2").Ready(ago(62 * time.Minute)).Obj(),
			},
			now:  now,
			want: []string{"a-older", "b-newer"},
		},
		{
			name: "Ready 1 minute and 10 days ago at a clock, buckets apart -> the fresh one first",
			pods: []*v1.Pod{
				pod("a-old", "n1").Ready(ago(240 * time.Hour)).Obj(),
				pod("b-fresh", "n2").Ready(ago(time.Minute)).Obj(),
			},
			now:  now,
			want: []string{"b-fresh", "a-old"},
		},
		{
			name: "Ready at the same time, 3 restarts against none -> the restarted one first",
			pods: []*v1.Pod{
				pod("steady", "n1").Ready(ago(time.Hour)).Restarts(0).Obj(),
				pod("flaky", "n2").Ready(ago(time.Hour)).Restarts(3).Obj(),
			},
			want: []string{"flaky", "steady"},
		},
		{
			name: "all else equal, created a day and an hour ago -> the newer first",
			pods: []*v1.Pod{
				pod("day", "n1").Ready(ago(time.Hour)).Obj(),
				pod("hour", "n2").Ready(ago(time.Hour)).Created(ago(time.Hour)).Obj(),
			},
			want: []string{"hour", "day"},
		},
		{
			name: "nothing tells two pods apart -> they keep their order",
			pods: []*v1.Pod{pod("first", "n1").Ready(ago(time.Hour)).Obj(), pod("second", "n2").Ready(ago(time.Hour)).Obj()},
			want: []string{"first", "second"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			related := tt.related
			if related == nil {
				related = tt.pods
			}
			ControllerRanking{Now: tt.now}.Rank(tt.pods, related)
			var got []string
			for _, p := range tt.pods {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("deletion order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestControllerRankingTakesTheKeepersCostsWhenGiven(t *testing.T) {
	ready := time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)
	a := spreadtest.MakePod().Name("a").Node("n1").Ready(ready).Annotation(v1.PodDeletionCost, "1").Obj()
	b := spreadtest.MakePod().Name("b").Node("n2").Ready(ready).Annotation(v1.PodDeletionCost, "2").Obj()
	pods := []*v1.Pod{a, b}
	costs := map[string]int32{"a": 7, "b": 3}
	ControllerRanking{Cost: func(p *v1.Pod) int32 { return costs[p.Name] }}.Rank(pods, pods)
	if diff := cmp.Diff([]string{"b", "a"}, []string{pods[0].Name, pods[1].Name}); diff != "" {
		t.Errorf("deletion order with costs 7 and 3 given over annotated 1 and 2 (-want +got):\n%s", diff)
	}
}
