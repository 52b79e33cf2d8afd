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

	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// compactPodEqual lets cmp compare Pods field by field.
var compactPodEqual = cmp.Options{
	cmp.AllowUnexported(Pod{}),
	cmp.Comparer(func(a, b unique.Handle[string]) bool { return a == b }),
}

func TestCompactPodKeepsWhatCountingReads(t *testing.T) {
	now := metav1.Unix(100, 0)
	tests := []struct {
		name string
		in   *v1.Pod
		want *v1.Pod
	}{
		{
			name: "running pod bound to n1 with two labels -> the same namespace, name, labels, node and phase",
			in: spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Label("tier", "fe").
				Node("n1").Phase(v1.PodRunning).Obj(),
			want: &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Labels: map[string]string{"app": "web", "tier": "fe"}},
				Spec:       v1.PodSpec{NodeName: "n1"},
				Status:     v1.PodStatus{Phase: v1.PodRunning},
			},
		},
		{
			name: "terminating pod -> a deletion timestamp (counting only asks whether there is one)",
			in: func() *v1.Pod {
				p := spreadtest.MakePod().Namespace("shop").Name("web-2").Node("n1").Obj()
				p.DeletionTimestamp = &now
				p.ResourceVersion = "7"
				return p
			}(),
			want: &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-2", ResourceVersion: "7", DeletionTimestamp: &deletedAt},
				Spec:       v1.PodSpec{NodeName: "n1"},
			},
		},
		{
			name: "unbound pod without labels, phase unknown to this version -> kept as it is",
			in:   spreadtest.MakePod().Namespace("shop").Name("new").Phase("Hibernating").Obj(),
			want: &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "new"},
				Status:     v1.PodStatus{Phase: "Hibernating"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, CompactPod(tt.in).V1()); diff != "" {
				t.Errorf("pod as the index reads it (-want +got):\n%s", diff)
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

func TestLabelEncodingRoundTrips(t *testing.T) {
	long := strings.Repeat("v", 300) // a length that takes two varint bytes
	tests := []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{name: "no labels -> none", in: nil, want: nil},
		{name: "empty map -> none", in: map[string]string{}, want: nil},
		{name: "one label -> the same", in: map[string]string{"app": "web"}, want: map[string]string{"app": "web"}},
		{name: "empty value -> kept empty", in: map[string]string{"canary": ""}, want: map[string]string{"canary": ""}},
		{
			name: "prefixed keys, a 300-byte value, bytes a label cannot hold -> the same",
			in:   map[string]string{"app.kubernetes.io/name": long, "k\x00=": "v,\xff", "z": "1"},
			want: map[string]string{"app.kubernetes.io/name": long, "k\x00=": "v,\xff", "z": "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, decodeLabels(encodeLabels(tt.in))); diff != "" {
				t.Errorf("decoded labels (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzLabelEncoding checks the two properties interning relies on: the
// encoding decodes back to the same set, and two sets encode alike exactly
// when they are equal.
func FuzzLabelEncoding(f *testing.F) {
	f.Add("app=web,tier=fe", "tier=fe,app=web")
	f.Add("a=,b=1", "a=1,b=")
	f.Add("a=b=c", "a=b,=c")
	f.Add("", "=")
	f.Fuzz(func(t *testing.T, x, y string) {
		a, b := parsePairs(x), parsePairs(y)
		ea, eb := encodeLabels(a), encodeLabels(b)
		if got := decodeLabels(ea); !maps.Equal(got, a) {
			t.Fatalf("decode(encode(%q)) = %q", a, got)
		}
		if (ea == eb) != maps.Equal(a, b) {
			t.Fatalf("sets %q and %q: encodings equal = %v, sets equal = %v", a, b, ea == eb, maps.Equal(a, b))
		}
	})
}

// parsePairs reads "k=v,k=v" loosely: any string gives some label set.
func parsePairs(s string) map[string]string {
	m := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(pair, "=")
		m[k] = v
	}
	if s == "" {
		return nil
	}
	return m
}

// syncRecorder is an IndexSink for informer tests: it records each call
// with what the index would read, from the informer's goroutine.
type syncRecorder struct {
	mu    sync.Mutex
	calls []string
}

func describe(p *v1.Pod) string {
	keys := slices.Sorted(maps.Keys(p.Labels))
	var ls []string
	for _, k := range keys {
		ls = append(ls, k+"="+p.Labels[k])
	}
	return fmt.Sprintf("%s/%s node=%s labels=%s phase=%s terminating=%v",
		p.Namespace, p.Name, p.Spec.NodeName, strings.Join(ls, ","), p.Status.Phase, p.DeletionTimestamp != nil)
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

func (r *syncRecorder) AddNode(*v1.Node)         {}
func (r *syncRecorder) UpdateNode(_, _ *v1.Node) {}
func (r *syncRecorder) DeleteNode(*v1.Node)      {}
func (r *syncRecorder) AddPod(p *v1.Pod)         { r.record("add " + describe(p)) }
func (r *syncRecorder) UpdatePod(_, p *v1.Pod)   { r.record("update " + describe(p)) }
func (r *syncRecorder) DeletePod(p *v1.Pod)      { r.record("delete " + describe(p)) }

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
	if _, err := inf.AddEventHandler(PodHandler(rec)); err != nil {
		t.Fatal(err)
	}
	source.Add(spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("n1").Phase(v1.PodRunning).Obj())
	source.Add(spreadtest.MakePod().Namespace("other").Name("db-0").Label("app", "db").Obj())
	go inf.RunWithContext(t.Context())
	if !toolscache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	moved := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("n2").Phase(v1.PodRunning).Obj()
	source.Modify(moved)
	source.Delete(moved)

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
