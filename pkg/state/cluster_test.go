package state

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// seen records each change a subscriber hears of with what the Cluster
// held then: the pods of shop labelled app=web it counts, and its node
// generation.
type seen struct {
	c     *Cluster
	calls []string
}

func (s *seen) Changed(ch Change) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	s.calls = append(s.calls, fmt.Sprintf("%s %s pods=%d nodeGen=%d", ch.Kind, opNames[ch.Op],
		s.c.Index().PodsMatching("shop", web), s.c.Index().NodeGeneration()))
}

var opNames = map[Op]string{Added: "added", Updated: "updated", Deleted: "deleted"}

func TestClusterTellsItsSubscribersAfterItHoldsTheChange(t *testing.T) {
	pod := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("n").Phase(v1.PodRunning).Obj()
	done := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("n").Phase(v1.PodSucceeded).Obj()
	node := spreadtest.MakeNode().Name("n").Zone("a").Obj()
	tests := []struct {
		name   string
		events func(c *Cluster)
		want   []string
	}{
		{
			name: "a compact pod added, succeeded, deleted through a tombstone -> each told with the index already counting it",
			events: func(c *Cluster) {
				c.Add(cache.CompactPod(pod))
				c.Update(cache.CompactPod(pod), cache.CompactPod(done))
				c.Update(cache.CompactPod(done), cache.CompactPod(pod))
				c.Delete(toolscache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: cache.CompactPod(pod)})
			},
			want: []string{"Pod added pods=1 nodeGen=0", "Pod updated pods=0 nodeGen=0", "Pod updated pods=1 nodeGen=0",
				"Pod deleted pods=0 nodeGen=0"},
		},
		{
			name:   "a full pod added -> compacted, told after the index counts it",
			events: func(c *Cluster) { c.Add(pod) },
			want:   []string{"Pod added pods=1 nodeGen=0"},
		},
		{
			name: "a node added and deleted -> each told with the node generation moved on",
			events: func(c *Cluster) {
				c.Add(node)
				c.Delete(node)
			},
			want: []string{"Node added pods=0 nodeGen=1", "Node deleted pods=0 nodeGen=2"},
		},
		{
			name: "a ReplicaSet and a policy added -> told, the counts unchanged",
			events: func(c *Cluster) {
				c.Add(spreadtest.MakeReplicaSet().Namespace("shop").Name("web").Obj())
				c.Add(&v1alpha1.SpreadPolicy{})
			},
			want: []string{"ReplicaSet added pods=0 nodeGen=0", "SpreadPolicy added pods=0 nodeGen=0"},
		},
		{
			name: "objects of kinds the state does not follow, an update across kinds, an empty tombstone -> ignored",
			events: func(c *Cluster) {
				c.Add(&v1.Secret{})
				c.Update(pod, node)
				c.Update(node, pod)
				c.Delete(toolscache.DeletedFinalStateUnknown{Key: "shop/web-1"})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCluster(spread.NewIndex(), cache.NewServiceIndex())
			s := &seen{c: c}
			c.Subscribe(s)
			tt.events(c)
			if diff := cmp.Diff(tt.want, s.calls); diff != "" {
				t.Errorf("changes told (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDerivedHoldsTheFactsThenTellsThem(t *testing.T) {
	c := NewCluster(spread.NewIndex(), nil)
	var got []string
	c.Subscribe(SubscriberFunc(func(ch Change) {
		got = append(got, fmt.Sprintf("%s what=%d templates=%d unserved=%d", ch.Kind, ch.What, len(c.Templates()), len(c.UnservedZones())))
	}))
	c.SetDerived(autoscale.Derived{Templates: []spread.Template{{Name: "b"}, {Name: "a"}},
		UnservedZones: []autoscale.UnservedZones{{NodePool: "default", Zones: []string{"c"}}}})
	if diff := cmp.Diff([]string{fmt.Sprintf("Derived what=%d templates=2 unserved=1", Spec)}, got); diff != "" {
		t.Errorf("changes told (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]spread.Template{{Name: "a"}, {Name: "b"}}, c.Templates()); diff != "" {
		t.Errorf("Templates() (-want +got):\n%s", diff)
	}
}

func TestInformFollowsEveryKindTheWebhookWatches(t *testing.T) {
	scheme, err := cache.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	informers := &informertest.FakeInformers{Scheme: scheme}
	watched := append(cache.Watched(func(cache.InformedKind) bool { return true }), &v1.ConfigMap{})
	for _, k := range cache.InformedKinds {
		if _, ok := KindOf(k.New()); !ok {
			t.Errorf("cache.InformedKinds has %s, which the cluster state does not follow", k.GVK.Kind)
		}
	}
	c := NewCluster(spread.NewIndex(), nil)
	var kinds []string
	c.Subscribe(SubscriberFunc(func(ch Change) { kinds = append(kinds, ch.Kind.String()) }))
	if _, err := c.Inform(t.Context(), informers, watched, nil); err != nil {
		t.Fatal(err)
	}
	pods, err := informers.FakeInformerFor(t.Context(), &v1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := informers.FakeInformerFor(t.Context(), &v1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	policies, err := informers.FakeInformerFor(t.Context(), &v1alpha1.ClusterSpreadPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	pods.Add(spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("n").Phase(v1.PodRunning).Obj())
	nodes.Add(spreadtest.MakeNode().Name("n").Obj())
	policies.Add(&v1alpha1.ClusterSpreadPolicy{})
	if diff := cmp.Diff([]string{"Pod", "Node", "ClusterSpreadPolicy"}, kinds); diff != "" {
		t.Errorf("changes told (-want +got):\n%s", diff)
	}
	if got := c.Index().PodsMatching("shop", labels.Everything()); got != 1 {
		t.Errorf("pods counted in shop = %d, want 1", got)
	}
}

func TestLoadCountsWhatASnapshotCounts(t *testing.T) {
	var objs []runtime.Object
	var snap spread.Snapshot
	for i, zone := range []string{"a", "b", "c"} {
		n := spreadtest.MakeNode().Name("node-" + zone).Zone(zone).Obj()
		objs = append(objs, n)
		snap.Nodes = append(snap.Nodes, n)
		for r := range i + 1 {
			p := spreadtest.MakePod().Namespace("shop").Name(fmt.Sprintf("web-%s-%d", zone, r)).Label("app", "web").
				Node(n.Name).Phase(v1.PodRunning).Obj()
			objs = append(objs, p)
			snap.Pods = append(snap.Pods, p)
		}
	}
	objs = append(objs, spreadtest.MakeService().Namespace("shop").Name("web").Selector("app", "web").Obj())
	incoming := spreadtest.MakePod().Namespace("shop").Name("web-new").Label("app", "web").
		SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()).Obj()

	c := Load(objs)
	want, err := spread.IndexFromSnapshot(snap).Check(incoming, spread.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Index().Check(incoming, spread.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check() on the loaded state (-snapshot +loaded):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"shop/web"}, names(c.Services().Selecting("shop", map[string]string{"app": "web"}))); diff != "" {
		t.Errorf("Services selecting app=web (-want +got):\n%s", diff)
	}
}

func TestChangesFromManyGoroutinesAreOneOrder(t *testing.T) {
	c := NewCluster(spread.NewIndex(), nil)
	// Each subscriber records the changes it hears of and, with each pod
	// change, how many pods the index counts then: as many as the pod
	// changes it has heard of, when each is told after the index holds
	// it and before the next is applied.
	type record struct {
		name string
		pods int
	}
	var heard [2][]record
	for i := range heard {
		c.Subscribe(SubscriberFunc(func(ch Change) {
			if ch.Kind == Pod {
				_, p := ch.Pods()
				heard[i] = append(heard[i], record{p.Record().Name, c.Index().PodsMatching("shop", labels.Everything())})
				return
			}
			heard[i] = append(heard[i], record{ch.Object().GetName(), 0})
		}))
	}
	done := make(chan struct{})
	for g := range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 100 {
				name := fmt.Sprintf("web-%d-%d", g, i)
				c.Add(spreadtest.MakePod().Namespace("shop").Name(name).Label("app", "web").Node("n").Phase(v1.PodRunning).Obj())
				c.Add(spreadtest.MakeNode().Name(name).Obj())
			}
		}()
	}
	<-done
	<-done
	if diff := cmp.Diff(heard[0], heard[1], cmp.AllowUnexported(record{})); diff != "" {
		t.Errorf("the two subscribers heard different orders (-first +second):\n%s", diff)
	}
	pods := 0
	for _, r := range heard[0] {
		if r.pods == 0 {
			continue // a node
		}
		pods++
		if r.pods != pods {
			t.Fatalf("told of pod %s with %d pods counted, want %d: the index holds every pod told of before it, and no later one", r.name, r.pods, pods)
		}
	}
	if pods != 200 {
		t.Errorf("pod changes told = %d, want 200", pods)
	}
}
