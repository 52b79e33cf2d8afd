package fallback

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseFitError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		msg    string
		want   Diagnosis
		wantOK bool
	}{
		{
			name:   "the issue's message: zone c full, zones a and b refused by the spread",
			msg:    "0/6 nodes are available: 2 Insufficient cpu, 4 node(s) didn't match pod topology spread constraints. preemption: 0/6 nodes are available: 2 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.",
			want:   Diagnosis{Nodes: 6, Spread: 4, Other: 2},
			wantOK: true,
		},
		{
			name:   "several other reasons add up, the missing-label variant is not the skew",
			msg:    "0/9 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), 2 Insufficient memory, 3 Insufficient cpu, 3 node(s) didn't match pod topology spread constraints.",
			want:   Diagnosis{Nodes: 9, Spread: 3, Other: 6},
			wantOK: true,
		},
		{
			name:   "a reason holding a comma stays one reason",
			msg:    "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: a, b}, 2 node(s) didn't match pod topology spread constraints.",
			want:   Diagnosis{Nodes: 3, Spread: 2, Other: 1},
			wantOK: true,
		},
		{
			name:   "only the spread refused",
			msg:    "0/4 nodes are available: 4 node(s) didn't match pod topology spread constraints.",
			want:   Diagnosis{Nodes: 4, Spread: 4},
			wantOK: true,
		},
		{
			name:   "a PreFilter message has no histogram",
			msg:    "0/4 nodes are available: persistentvolumeclaim \"data\" not found.",
			want:   Diagnosis{Nodes: 4},
			wantOK: false,
		},
		{name: "no nodes at all", msg: "no nodes available to schedule pods"},
		{name: "empty", msg: ""},
		{name: "a count that is not a number", msg: "0/x nodes are available: 1 Insufficient cpu."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseFitError(tc.msg)
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !tc.wantOK {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseFitError (-want,+got):\n%s", diff)
			}
		})
	}
}

func pendingPod(status v1.ConditionStatus, reason, msg string, since time.Time) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1"},
		Status: v1.PodStatus{
			Phase: v1.PodPending,
			Conditions: []v1.PodCondition{{
				Type: v1.PodScheduled, Status: status, Reason: reason, Message: msg,
				LastTransitionTime: metav1.NewTime(since),
			}},
		},
	}
}

const fullZone = "0/6 nodes are available: 2 Insufficient cpu, 4 node(s) didn't match pod topology spread constraints."

func TestStrandedPod(t *testing.T) {
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	bound := pendingPod(v1.ConditionFalse, v1.PodReasonUnschedulable, fullZone, since)
	bound.Spec.NodeName = "node-a"
	nominated := pendingPod(v1.ConditionFalse, v1.PodReasonUnschedulable, fullZone, since)
	nominated.Status.NominatedNodeName = "node-c"
	deleting := pendingPod(v1.ConditionFalse, v1.PodReasonUnschedulable, fullZone, since)
	deleting.DeletionTimestamp = &metav1.Time{Time: since}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "unschedulable, the spread refused some nodes and capacity the rest: stranded", pod: pendingPod(v1.ConditionFalse, v1.PodReasonUnschedulable, fullZone, since), want: true},
		{name: "unschedulable for resources alone: not the spread", pod: pendingPod(v1.ConditionFalse, v1.PodReasonUnschedulable, "0/6 nodes are available: 6 Insufficient cpu.", since)},
		{name: "only the spread refused: nodes would fit elsewhere, not stranded by capacity", pod: pendingPod(v1.ConditionFalse, v1.PodReasonUnschedulable, "0/6 nodes are available: 6 node(s) didn't match pod topology spread constraints.", since)},
		{name: "scheduling gated: not judged", pod: pendingPod(v1.ConditionFalse, v1.PodReasonSchedulingGated, fullZone, since)},
		{name: "scheduled: not stranded", pod: pendingPod(v1.ConditionTrue, "", "", since)},
		{name: "bound to a node: never stranded", pod: bound},
		{name: "preemption is making room: wait", pod: nominated},
		{name: "being deleted: not stranded", pod: deleting},
		{name: "no PodScheduled condition yet", pod: &v1.Pod{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := StrandedPod(tc.pod)
			if ok != tc.want {
				t.Fatalf("stranded = %v, want %v", ok, tc.want)
			}
			if ok && !got.Since.Equal(since) {
				t.Errorf("since %v, want the condition's transition %v", got.Since, since)
			}
		})
	}
}

func TestDue(t *testing.T) {
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		since time.Time
		now   time.Time
		want  bool
	}{
		{name: "stranded for less than after: wait", since: since, now: since.Add(9*time.Minute + 59*time.Second)},
		{name: "stranded for exactly after: due", since: since, now: since.Add(10 * time.Minute), want: true},
		{name: "stranded for longer: due", since: since, now: since.Add(time.Hour), want: true},
		{name: "no transition time: never due", now: since.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Due(tc.since, tc.now, 10*time.Minute); got != tc.want {
				t.Errorf("Due = %v, want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkStrandedPod is the fallback's bookkeeping of one pod event: the
// check a pod update goes through, on the costliest pod (an unschedulable
// one whose message is parsed).
func BenchmarkStrandedPod(b *testing.B) {
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	pod := pendingPod(v1.ConditionFalse, v1.PodReasonUnschedulable, fullZone+" preemption: 0/6 nodes are available: 2 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.", since)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := StrandedPod(pod); !ok {
			b.Fatal("not stranded")
		}
	}
}
