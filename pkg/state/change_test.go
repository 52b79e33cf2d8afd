package state

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// told is a change as a test compares it.
type told struct {
	Kind Kind
	Op   Op
	What Aspect
}

func TestChangeSaysWhatItTouched(t *testing.T) {
	pod := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("a1").Phase(v1.PodRunning)
	running := pod.Obj()
	ready := running.DeepCopy()
	ready.ResourceVersion = "2"
	ready.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	unready := ready.DeepCopy()
	unready.ResourceVersion = "3"
	unready.Status.Conditions[0].Status = v1.ConditionFalse
	costed := running.DeepCopy()
	costed.Annotations = map[string]string{spread.DeletionCostAnnotation: "-3"}
	moved := running.DeepCopy()
	moved.Spec.NodeName = "b1"
	moved.Annotations = costed.Annotations

	rs := spreadtest.MakeReplicaSet().Namespace("shop").Name("web-h1").MatchLabel("app", "web").Obj()
	rs.Spec.Template.Labels = map[string]string{"app": "web"}
	scaled := rs.DeepCopy()
	scaled.Spec.Replicas = new(int32(5))
	retemplated := rs.DeepCopy()
	retemplated.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	adopted := rs.DeepCopy()
	adopted.OwnerReferences = []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: new(true)}}
	counted := rs.DeepCopy()
	counted.Status.ReadyReplicas = 2

	ns := policytest.MakeNamespace("shop").Obj()
	relabelled := policytest.MakeNamespace("shop").Label("team", "b").Obj()
	terminating := ns.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{}

	node := spreadtest.MakeNode().Name("a1").Zone("a").Obj()
	tainted := spreadtest.MakeNode().Name("a1").Zone("a").Taint("dedicated", "db", v1.TaintEffectNoSchedule).Obj()
	retainted := tainted.DeepCopy()
	retainted.Spec.Taints[0].TimeAdded = &metav1.Time{}

	pool := &karpenterv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", ResourceVersion: "1"}}
	poolStatus := pool.DeepCopy()
	poolStatus.ResourceVersion = "2"

	tests := []struct {
		name   string
		events func(c *Cluster)
		want   []told
	}{
		{
			name:   "a pod turning ready -> a pod update that touches nothing",
			events: func(c *Cluster) { c.Update(cache.CompactPod(running), cache.CompactPod(ready)) },
			want:   []told{{Pod, Updated, 0}},
		},
		{
			name:   "a Ready pod turning not Ready -> its placement: the ReplicaSet controller deletes it before comparing costs",
			events: func(c *Cluster) { c.Update(cache.CompactPod(ready), cache.CompactPod(unready)) },
			want:   []told{{Pod, Updated, Placement}},
		},
		{
			name:   "a pod given a deletion cost -> its cost only",
			events: func(c *Cluster) { c.Update(cache.CompactPod(running), cache.CompactPod(costed)) },
			want:   []told{{Pod, Updated, Cost}},
		},
		{
			name:   "a pod on another node with a new cost -> its placement and its cost",
			events: func(c *Cluster) { c.Update(cache.CompactPod(running), cache.CompactPod(moved)) },
			want:   []told{{Pod, Updated, Placement | Cost}},
		},
		{
			name: "a pod added, then deleted through a tombstone -> every aspect, each time",
			events: func(c *Cluster) {
				c.Add(running)
				c.Delete(toolscache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: running})
			},
			want: []told{{Pod, Added, All}, {Pod, Deleted, All}},
		},
		{
			name: "a ReplicaSet's status, replicas, template, owner -> nothing, its spec, its selection and spec, its metadata",
			events: func(c *Cluster) {
				c.Update(rs, counted)
				c.Update(rs, scaled)
				c.Update(rs, retemplated)
				c.Update(rs, adopted)
			},
			want: []told{{ReplicaSet, Updated, 0}, {ReplicaSet, Updated, Spec}, {ReplicaSet, Updated, Selection | Spec}, {ReplicaSet, Updated, Meta}},
		},
		{
			name: "a namespace relabelled, then being deleted -> its labels, then its metadata",
			events: func(c *Cluster) {
				c.Update(ns, relabelled)
				c.Update(ns, terminating)
			},
			want: []told{{Namespace, Updated, Labels}, {Namespace, Updated, Meta}},
		},
		{
			name: "a node tainted, then the taint's time set -> its spec, then nothing",
			events: func(c *Cluster) {
				c.Update(node, tainted)
				c.Update(tainted, retainted)
			},
			want: []told{{Node, Updated, Spec}, {Node, Updated, 0}},
		},
		{
			name: "a policy's status written, then its spec edited -> nothing, then its spec",
			events: func(c *Cluster) {
				p := policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Generation(1).Obj()
				audited := p.DeepCopy()
				audited.Status.Workloads = 3
				edited := p.DeepCopy()
				edited.Generation = 2
				c.Update(p, audited)
				c.Update(p, edited)
			},
			want: []told{{SpreadPolicy, Updated, 0}, {SpreadPolicy, Updated, Spec}},
		},
		{
			name:   "a NodePool updated in any way -> every aspect: its templates are derived again",
			events: func(c *Cluster) { c.Update(pool, poolStatus) },
			want:   []told{{NodePool, Updated, All}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCluster(spread.NewIndex(), cache.NewServiceIndex())
			var got []told
			c.Subscribe(SubscriberFunc(func(ch Change) { got = append(got, told{ch.Kind, ch.Op, ch.What}) }))
			tt.events(c)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes told (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodChangeIsWhatTheClusterTells(t *testing.T) {
	pod := spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("a1").Phase(v1.PodRunning)
	running := cache.CompactPod(pod.Obj())
	notReady := pod.Obj()
	notReady.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	costed := pod.Obj()
	costed.Annotations = map[string]string{spread.DeletionCostAnnotation: "5"}
	tests := []struct {
		name     string
		old, new *cache.Pod
		tell     func(c *Cluster)
	}{
		{name: "a pod added -> every aspect", new: running, tell: func(c *Cluster) { c.Add(running) }},
		{name: "a pod deleted -> every aspect", old: running, tell: func(c *Cluster) { c.Delete(running) }},
		{
			name: "a pod turning not Ready -> its placement", old: running, new: cache.CompactPod(notReady),
			tell: func(c *Cluster) { c.Update(running, cache.CompactPod(notReady)) },
		},
		{
			name: "a pod given a cost -> its cost", old: running, new: cache.CompactPod(costed),
			tell: func(c *Cluster) { c.Update(running, cache.CompactPod(costed)) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCluster(spread.NewIndex(), nil)
			var got []told
			c.Subscribe(SubscriberFunc(func(ch Change) { got = append(got, told{ch.Kind, ch.Op, ch.What}) }), Pod)
			tt.tell(c)
			ch := PodChange(tt.old, tt.new)
			if diff := cmp.Diff(got, []told{{ch.Kind, ch.Op, ch.What}}); diff != "" {
				t.Errorf("PodChange() against the change the Cluster tells (-told +PodChange):\n%s", diff)
			}
			old, cur := ch.Pods()
			if old != tt.old || cur != tt.new {
				t.Errorf("PodChange().Pods() = %p, %p; want %p, %p", old, cur, tt.old, tt.new)
			}
		})
	}
	if got := PodChange(nil, nil); got != (Change{}) {
		t.Errorf("PodChange(nil, nil) = %+v; want no change", got)
	}
}
