package cache

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unique"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// compactPodEqual lets cmp compare Pods field by field.
var compactPodEqual = cmp.Options{
	cmp.AllowUnexported(Pod{}),
	cmp.Comparer(func(a, b unique.Handle[string]) bool { return a == b }),
	cmp.Comparer(func(a, b spread.LabelSet) bool { return a == b }),
	cmp.Comparer(func(a, b spread.ConstraintSet) bool { return a == b }),
}

func TestCompactPodKeepsWhatCountingReads(t *testing.T) {
	now := metav1.Unix(100, 0)
	tests := []struct {
		name string
		in   *v1.Pod
		want spread.PodRecord
	}{
		{
			name: "running pod bound to n1 with two labels -> the same namespace, name, labels, node and phase",
			in: spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Label("tier", "fe").
				Node("n1").Phase(v1.PodRunning).Obj(),
			want: spread.PodRecord{
				Namespace: "shop", Name: "web-1", NodeName: "n1", Phase: v1.PodRunning,
				Labels: spread.LabelSetOf(map[string]string{"app": "web", "tier": "fe"}),
			},
		},
		{
			name: "pod carrying the zone constraint the webhook injected, no phase yet -> its constraints, interned, and unready",
			in: spreadtest.MakePod().Namespace("shop").Name("web-3").Label("app", "web").Node("n1").
				SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()).Obj(),
			want: spread.PodRecord{
				Namespace: "shop", Name: "web-3", NodeName: "n1", Labels: spread.LabelSetOf(map[string]string{"app": "web"}),
				Constraints: spread.ConstraintSetOf([]v1.TopologySpreadConstraint{
					spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()}),
				Unready: true,
			},
		},
		{
			name: "running pod whose Ready condition is False -> unready, as the ReplicaSet controller ranks it",
			in:   spreadtest.MakePod().Namespace("shop").Name("web-4").Node("n1").NotReady().Obj(),
			want: spread.PodRecord{Namespace: "shop", Name: "web-4", NodeName: "n1", Phase: v1.PodRunning, Unready: true},
		},
		{
			name: "running pod whose Ready condition is True -> ready",
			in:   spreadtest.MakePod().Namespace("shop").Name("web-5").Node("n1").Ready(now.Time).Obj(),
			want: spread.PodRecord{Namespace: "shop", Name: "web-5", NodeName: "n1", Phase: v1.PodRunning},
		},
		{
			name: "terminating pod -> terminating",
			in: func() *v1.Pod {
				p := spreadtest.MakePod().Namespace("shop").Name("web-2").Node("n1").Obj()
				p.DeletionTimestamp = &now
				return p
			}(),
			want: spread.PodRecord{Namespace: "shop", Name: "web-2", NodeName: "n1", Terminating: true, Unready: true},
		},
		{
			name: "unbound pod without labels, phase unknown to this version -> kept as it is",
			in:   spreadtest.MakePod().Namespace("shop").Name("new").Phase("Hibernating").Obj(),
			want: spread.PodRecord{Namespace: "shop", Name: "new", Phase: "Hibernating", Unready: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compact := CompactPod(tt.in)
			if diff := cmp.Diff(tt.want, compact.Record(), compactPodEqual); diff != "" {
				t.Errorf("record of the compact pod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(spread.PodRecordOf(tt.in), compact.Record(), compactPodEqual); diff != "" {
				t.Errorf("record of the compact pod differs from the record of the pod (-full +compact):\n%s", diff)
			}
		})
	}
}

func TestCompactPodKeepsItsDeletionCost(t *testing.T) {
	tests := []struct {
		name     string
		value    *string
		wantCost int32
		wantOK   bool
	}{
		{name: "no annotation -> none", value: nil},
		{name: "-8 -> -8", value: ptr.To("-8"), wantCost: -8, wantOK: true},
		{name: "int32's lowest, -2147483648 -> kept", value: ptr.To("-2147483648"), wantCost: -2147483648, wantOK: true},
		{name: "beyond an int32, 2147483648 -> none: the ReplicaSet controller ranks it at 0", value: ptr.To("2147483648")},
		{name: "not a number, high -> none", value: ptr.To("high")},
		{name: "empty -> none", value: ptr.To("")},
		{name: "a plus sign, +5 -> none: the ReplicaSet controller does not read it", value: ptr.To("+5")},
		{name: "a leading zero, 007 -> none: the ReplicaSet controller does not read it", value: ptr.To("007")},
		{name: "-0 -> 0, kept", value: ptr.To("-0"), wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := spreadtest.MakePod().Namespace("shop").Name("web-1")
			if tt.value != nil {
				w = w.Annotation(spread.DeletionCostAnnotation, *tt.value)
			}
			cost, ok := CompactPod(w.Obj()).DeletionCost()
			if cost != tt.wantCost || ok != tt.wantOK {
				t.Errorf("DeletionCost() = %d, %v; want %d, %v", cost, ok, tt.wantCost, tt.wantOK)
			}
		})
	}
}

func TestReplicasShareTheirLabelSetAndNode(t *testing.T) {
	a := CompactPod(spreadtest.MakePod().Namespace("shop").Name("a").Label("app", "web").Label("hash", "x1").Node("n1").Obj())
	b := CompactPod(spreadtest.MakePod().Namespace("shop").Name("b").Label("hash", "x1").Label("app", "web").Node("n1").Obj())
	c := CompactPod(spreadtest.MakePod().Namespace("shop").Name("c").Label("app", "web").Label("hash", "x2").Node("n2").Obj())
	if a.labels != b.labels || a.nodeName != b.nodeName {
		t.Error("two pods with equal labels on one node do not share their label set and node name")
	}
	if a.labels == c.labels || a.nodeName == c.nodeName {
		t.Error("pods with different labels or nodes share a label set or node name")
	}
}

func TestReplicasShareTheirConstraintSet(t *testing.T) {
	zone := spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web")
	pod := func(name string, cs ...v1.TopologySpreadConstraint) *v1.Pod {
		p := spreadtest.MakePod().Namespace("shop").Name(name).Label("app", "web").Node("n1")
		for _, c := range cs {
			p.SpreadConstraint(c)
		}
		return p.Obj()
	}
	tests := []struct {
		name string
		pods []*v1.Pod
		// same says which pods share the first's set.
		same []bool
	}{
		{
			name: "three replicas carrying the injected constraint -> one set",
			pods: []*v1.Pod{pod("a", zone.Obj()), pod("b", zone.Obj()), pod("c", zone.Obj())},
			same: []bool{true, true, true},
		},
		{
			name: "the same labels with another maxSkew, then none, then the first again -> each its own",
			pods: []*v1.Pod{pod("a", zone.Obj()), pod("b", spreadtest.Constraint(2, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()),
				pod("c"), pod("d", zone.Obj())},
			same: []bool{true, false, false, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := CompactPod(tt.pods[0]).constraints
			for i, p := range tt.pods {
				got := CompactPod(p).constraints
				if want := spread.ConstraintSetOf(p.Spec.TopologySpreadConstraints); got != want {
					t.Errorf("pod %s: the compact pod's set is not ConstraintSetOf its constraints", p.Name)
				}
				if (got == first) != tt.same[i] {
					t.Errorf("pod %s shares the first pod's set: %v, want %v", p.Name, got == first, tt.same[i])
				}
			}
		})
	}
}

func TestCompactPodOfAKnownWorkloadAllocatesOnlyThePod(t *testing.T) {
	p := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Label("pod-template-hash", "h1").Node("n1").
		SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MatchLabel("pod-template-hash", "h1").
			NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()).Obj()
	CompactPod(p)
	if got := testing.AllocsPerRun(100, func() { CompactPod(p) }); got != 1 {
		t.Errorf("CompactPod of a replica whose labels and constraints are known: %v allocations, want 1 (the Pod)", got)
	}
}

// syncRecorder records, from the informer's goroutine, each pod event with
// the record the index would read.
type syncRecorder struct {
	mu    sync.Mutex
	calls []string
}

func describe(p spread.PodRecord) string {
	labels := p.Labels.Map()
	var ls []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		ls = append(ls, k+"="+labels[k])
	}
	return fmt.Sprintf("%s/%s node=%s labels=%s phase=%s terminating=%v",
		p.Namespace, p.Name, p.NodeName, strings.Join(ls, ","), p.Phase, p.Terminating)
}

func (r *syncRecorder) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *syncRecorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// handler records the events of an informer of Pods.
func (r *syncRecorder) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.record("add " + describe(obj.(*Pod).Record())) },
		UpdateFunc: func(_, obj any) { r.record("update " + describe(obj.(*Pod).Record())) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			r.record("delete " + describe(obj.(*Pod).Record()))
		},
	}
}

// TestInformerRunsOnCompactPods runs a client-go informer with StripPod, as
// the server does: keys, the namespace index and the resourceVersion check
// that tells updates from resyncs all work on a Pod.
func TestInformerRunsOnCompactPods(t *testing.T) {
	source := fcache.NewFakeControllerSource()
	inf := toolscache.NewSharedIndexInformer(source, &v1.Pod{}, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(StripPod); err != nil {
		t.Fatal(err)
	}
	rec := &syncRecorder{}
	if _, err := inf.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	source.Add(spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("n1").Phase(v1.PodRunning).Obj())
	source.Add(spreadtest.MakePod().Namespace("other").Name("db-0").Label("app", "db").Obj())
	go inf.RunWithContext(t.Context())
	if !toolscache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	moved := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("n2").Phase(v1.PodRunning).Obj()
	// The fake source sets each object's resourceVersion while the
	// informer may still read the last one: one object per event.
	source.Modify(moved)
	source.Delete(moved.DeepCopy())

	want := []string{
		"add other/db-0 node= labels=app=db phase= terminating=false",
		"add shop/web-1 node=n1 labels=app=web phase=Running terminating=false",
		"update shop/web-1 node=n2 labels=app=web phase=Running terminating=false",
		"delete shop/web-1 node=n2 labels=app=web phase=Running terminating=false",
	}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = rec.snapshot(); len(got) >= len(want) {
			break
		}
	}
	slices.Sort(got[:min(2, len(got))]) // the initial list arrives in no set order
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("index calls (-want +got):\n%s", diff)
	}

	inShop, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, "other")
	if err != nil {
		t.Fatal(err)
	}
	if len(inShop) != 1 {
		t.Fatalf("namespace index of other: %d objects, want 1", len(inShop))
	}
	if p, ok := inShop[0].(*Pod); !ok || p.name != "db-0" {
		t.Errorf("stored object = %#v, want the compact Pod other/db-0", inShop[0])
	}
}
