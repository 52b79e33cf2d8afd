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
