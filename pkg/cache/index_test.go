package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// recorder is an IndexSink that records the calls it gets.
type recorder struct{ calls []string }

func (r *recorder) AddNode(n *v1.Node) { r.calls = append(r.calls, "AddNode "+n.Name) }
func (r *recorder) UpdateNode(o, n *v1.Node) {
	r.calls = append(r.calls, "UpdateNode "+o.Name+" "+n.Name)
}
func (r *recorder) DeleteNode(n *v1.Node) { r.calls = append(r.calls, "DeleteNode "+n.Name) }
func (r *recorder) AddPodRecord(p spread.PodRecord) {
	r.calls = append(r.calls, "AddPodRecord "+p.Name)
}
func (r *recorder) UpdatePodRecord(o, n spread.PodRecord) {
	r.calls = append(r.calls, "UpdatePodRecord "+o.Name+" "+n.Name)
}
func (r *recorder) DeletePodRecord(p spread.PodRecord) {
	r.calls = append(r.calls, "DeletePodRecord "+p.Name)
}

func TestHandlersFeedTheIndex(t *testing.T) {
	pod := spreadtest.MakePod().Namespace("shop").Name("p").Obj()
	pod2 := spreadtest.MakePod().Namespace("shop").Name("p2").Obj()
	node := spreadtest.MakeNode().Name("n").Obj()
	node2 := spreadtest.MakeNode().Name("n2").Obj()
	tests := []struct {
		name  string
		event func(pods, nodes toolscache.ResourceEventHandler)
		want  []string
	}{
		{
			name:  "pod added -> AddPodRecord",
			event: func(p, _ toolscache.ResourceEventHandler) { p.OnAdd(pod, true) },
			want:  []string{"AddPodRecord p"},
		},
		{
			name:  "pod updated -> UpdatePodRecord with old and new",
			event: func(p, _ toolscache.ResourceEventHandler) { p.OnUpdate(pod, pod2) },
			want:  []string{"UpdatePodRecord p p2"},
		},
		{
			name:  "compact pods as the informer holds them updated -> UpdatePodRecord with old and new",
			event: func(p, _ toolscache.ResourceEventHandler) { p.OnUpdate(CompactPod(pod), CompactPod(pod2)) },
			want:  []string{"UpdatePodRecord p p2"},
		},
		{
			name:  "pod deleted -> DeletePodRecord",
			event: func(p, _ toolscache.ResourceEventHandler) { p.OnDelete(pod) },
			want:  []string{"DeletePodRecord p"},
		},
		{
			name: "a pod's and a node's deletions missed by the watch (tombstones) -> DeletePodRecord and DeleteNode with their last state",
			event: func(p, n toolscache.ResourceEventHandler) {
				p.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop/p", Obj: pod})
				n.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "n", Obj: node})
			},
			want: []string{"DeletePodRecord p", "DeleteNode n"},
		},
		{
			name: "node added, updated, deleted -> AddNode, UpdateNode, DeleteNode",
			event: func(_, n toolscache.ResourceEventHandler) {
				n.OnAdd(node, false)
				n.OnUpdate(node, node2)
				n.OnDelete(node2)
			},
			want: []string{"AddNode n", "UpdateNode n n2", "DeleteNode n2"},
		},
		{
			name: "objects of the wrong type or empty tombstones -> ignored",
			event: func(p, n toolscache.ResourceEventHandler) {
				p.OnAdd(node, false)
				n.OnAdd(pod, false)
				p.OnUpdate(pod, node)
				p.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop/p"})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			tt.event(PodHandler(r), NodeHandler(r))
			if diff := cmp.Diff(tt.want, r.calls); diff != "" {
				t.Errorf("index calls (-want +got):\n%s", diff)
			}
		})
	}
}

// listening records the listener calls it gets in the recorder the index
// handlers feed, so that their order shows.
type listening struct{ r *recorder }

func (l listening) PodChanged(old, new *Pod) {
	name := func(p *Pod) string {
		if p == nil {
			return "nil"
		}
		return p.Record().Name
	}
	l.r.calls = append(l.r.calls, "PodChanged "+name(old)+" "+name(new))
}
func (l listening) NodesChanged() { l.r.calls = append(l.r.calls, "NodesChanged") }

func TestTrackerTellsItsListenersAfterTheIndex(t *testing.T) {
	pod := spreadtest.MakePod().Namespace("shop").Name("p").Obj()
	pod2 := spreadtest.MakePod().Namespace("shop").Name("p2").Obj()
	node := spreadtest.MakeNode().Name("n").Obj()
	tests := []struct {
		name      string
		listeners int
		event     func(pods, nodes toolscache.ResourceEventHandler)
		want      []string
	}{
		{
			name:      "no listener -> the index alone",
			event:     func(p, _ toolscache.ResourceEventHandler) { p.OnAdd(CompactPod(pod), false) },
			want:      []string{"AddPodRecord p"},
			listeners: 0,
		},
		{
			name:      "compact pod added, updated, deleted, one listener -> each after the index, nil for the missing side",
			listeners: 1,
			event: func(p, _ toolscache.ResourceEventHandler) {
				p.OnAdd(CompactPod(pod), false)
				p.OnUpdate(CompactPod(pod), CompactPod(pod2))
				p.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop/p2", Obj: CompactPod(pod2)})
			},
			want: []string{"AddPodRecord p", "PodChanged nil p", "UpdatePodRecord p p2", "PodChanged p p2",
				"DeletePodRecord p2", "PodChanged p2 nil"},
		},
		{
			name:      "a full pod added, two listeners -> both, after the index, with the pod compacted",
			listeners: 2,
			event:     func(p, _ toolscache.ResourceEventHandler) { p.OnAdd(pod, false) },
			want:      []string{"AddPodRecord p", "PodChanged nil p", "PodChanged nil p"},
		},
		{
			name:      "node added and deleted -> NodesChanged after each",
			listeners: 1,
			event: func(_, n toolscache.ResourceEventHandler) {
				n.OnAdd(node, false)
				n.OnDelete(node)
			},
			want: []string{"AddNode n", "NodesChanged", "DeleteNode n", "NodesChanged"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			tr := &Tracker{}
			for range tt.listeners {
				tr.Listen(listening{r})
			}
			tt.event(tr.podHandler(PodHandler(r)), tr.nodeHandler(NodeHandler(r)))
			if diff := cmp.Diff(tt.want, r.calls); diff != "" {
				t.Errorf("index and listener calls (-want +got):\n%s", diff)
			}
		})
	}
}
