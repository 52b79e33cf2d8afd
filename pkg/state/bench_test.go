package state

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/test/perf/fixture"
)

// eventCluster is an index filled the way the server's informers fill it:
// every node and pod of the fixture cluster through its transform and its
// handler. The full objects are dropped once transformed, as the informer
// drops them.
type eventCluster struct {
	ix   *spread.Index
	pods toolscache.ResourceEventHandler
	// pod is a replica in the middle of the cluster as the watch decodes
	// it: labels, ownerReferences, containers, status.
	pod *v1.Pod
	// incoming is a new replica of pod's workload with a zone constraint,
	// whose counts tell whether the index holds the cluster.
	incoming *v1.Pod
}

// checkCounts fails unless the index counts 10 replicas of the workload in
// each zone, as the fixture places them.
func (ec *eventCluster) checkCounts(b *testing.B) {
	b.Helper()
	res, err := ec.ix.Check(ec.incoming, spread.Options{})
	if err != nil || len(res.Constraints) != 1 {
		b.Fatalf("Check() = %+v, %v; want one constraint", res, err)
	}
	want := map[string]int{}
	for _, z := range fixture.Zones {
		want[z] = 10
	}
	if diff := cmp.Diff(want, res.Constraints[0].Domains); diff != "" {
		b.Fatalf("replicas per zone (-want +got):\n%s", diff)
	}
}

var (
	eventMu       sync.Mutex
	eventClusters = map[int]*eventCluster{}
)

func eventClusterOf(b *testing.B, nodes int) *eventCluster {
	b.Helper()
	eventMu.Lock()
	defer eventMu.Unlock()
	if ec := eventClusters[nodes]; ec != nil {
		return ec
	}
	c := fixture.New(nodes)
	ix := spread.NewIndex()
	// The webhook's handler (Inform's), and the subscribers the webhook
	// has on a replica that leads neither the keeper nor the health
	// controller: each drops a pod event after the check it makes.
	cl := NewCluster(ix, cache.NewServiceIndex())
	cl.Subscribe(notLeading{}, Pod, Node, ReplicaSet, ReplicationController, SpreadPolicy, ClusterSpreadPolicy, Namespace)
	subscribe(cl)
	h := toolscache.ResourceEventHandlerFuncs{AddFunc: cl.Add, UpdateFunc: cl.Update, DeleteFunc: cl.Delete}
	ec := &eventCluster{ix: ix, pods: h}
	for i := range c.Nodes {
		h.OnAdd(transformed(b, cache.StripNode, c.Node(i)), true)
	}
	for w := range c.Workloads() {
		for r := range c.Replicas {
			ec.pods.OnAdd(transformed(b, cache.StripPod, injectedPod(c, w, r)), true)
		}
	}
	w := c.Workloads() / 2
	ec.pod = injectedPod(c, w, c.Replicas/2)
	ec.incoming = c.IncomingPod(w)
	ec.incoming.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": c.App(w)}},
	}}
	ec.checkCounts(b)
	eventClusters[nodes] = ec
	return ec
}

// injectedPod is replica r of workload w carrying the constraint the
// webhook injects at its creation: the policy's zone constraint, over the
// selector of the pod's Service and ReplicaSet, leaving tainted nodes out.
func injectedPod(c fixture.Cluster, w, r int) *v1.Pod {
	p := c.Pod(w, r)
	honor := v1.NodeInclusionPolicyHonor
	p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
			"app": c.App(w), appsv1.DefaultDeploymentUniqueLabelKey: c.TemplateHash(w)}},
		NodeTaintsPolicy: &honor,
	}}
	return p
}

// notLeading is a subscriber that keeps nothing, at the cost of the check
// a subscriber that does not lead makes: the keeper's.
type notLeading struct{}

var leading atomic.Bool

func (notLeading) Changed(Change) {
	if !leading.Load() {
		return
	}
}

// subscribe adds the other subscribers of the webhook to c, at the cost
// of their checks of a change: the health controller's (a wake-up for its
// next pass, not waited for), the template and policy watchers' (which
// hear of no pod).
func subscribe(c *Cluster) {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	c.Subscribe(SubscriberFunc(func(ch Change) {
		if leading.Load() && ch.Changed(All&^Cost) {
			poke()
		}
	}), Pod, Node, SpreadPolicy, ClusterSpreadPolicy, ReplicaSet, StatefulSet, ReplicationController, Service, Namespace)
	c.Subscribe(SubscriberFunc(func(ch Change) {
		if ch.What != 0 {
			poke()
		}
	}), Node, NodeTemplate, NodePool, NodeClass, SpreadPolicy, ClusterSpreadPolicy, AutoscalerStatus)
	c.Subscribe(SubscriberFunc(func(Change) { poke() }), SpreadPolicy, ClusterSpreadPolicy)
}

func transformed(b *testing.B, transform toolscache.TransformFunc, obj any) any {
	b.Helper()
	out, err := transform(obj)
	if err != nil {
		b.Fatalf("transform(%T) error = %v", obj, err)
	}
	return out
}

// podEvent is a pair of watch events that leaves the index as it found
// it, so that a benchmark can repeat it. states[0] is the pod as the index
// holds it before the pair; event i brings the pod to states[(i+1)%2].
type podEvent struct {
	name   string
	states [2]*v1.Pod
	// deleteAdd makes the pair DELETED then ADDED; otherwise both are
	// MODIFIED, each replacing the other.
	deleteAdd bool
}

// step returns what event i of a pair brings, and what it replaces.
func step[T any](pair [2]T, i int) (next, prev T) { return pair[(i+1)%2], pair[i%2] }

// podEvents are the pod watch events of the benchmark, on a replica p that
// is bound and Running.
func podEvents(p *v1.Pod) []podEvent {
	bound := p.DeepCopy()
	bound.Status = v1.PodStatus{Phase: v1.PodPending, QOSClass: p.Status.QOSClass,
		Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}
	pending := bound.DeepCopy()
	pending.Spec.NodeName = ""
	pending.Status.Conditions = nil
	done := p.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	ready := p.DeepCopy()
	ready.ResourceVersion += "1"
	ready.Status.Conditions = append(ready.Status.Conditions, v1.PodCondition{Type: "example.com/ready-gate", Status: v1.ConditionTrue})
	return []podEvent{
		// Deleted and created again: the mean of the two.
		{name: "delete-add", states: [2]*v1.Pod{p, p}, deleteAdd: true},
		// The scheduler's binding sets spec.nodeName: the pod starts
		// counting. Its inverse (which the API server never sends) stops
		// it again.
		{name: "bind", states: [2]*v1.Pod{bound, pending}},
		// Running to Succeeded and back: the pod stops and starts counting.
		{name: "phase", states: [2]*v1.Pod{p, done}},
		// A status update that changes nothing counted, the kubelet's
		// most frequent write.
		{name: "status", states: [2]*v1.Pod{p, ready}},
	}
}

// BenchmarkPodEvent measures what a pod watch event costs the server once
// decoded, on an index holding the whole cluster, in steady state: the
// informer's transform (StripPod), then the event handler and the index
// update (stage=handler), and both (stage=path). client-go's own work
// between the two (the DeltaFIFO and the store) is not included. The
// baseline, stage=index, is the index update alone, given what the handler
// hands it.
func BenchmarkPodEvent(b *testing.B) {
	for _, nodes := range []int{50, 5000} {
		ec := eventClusterOf(b, nodes)
		size := fmt.Sprintf("nodes=%d,pods=%d", nodes, fixture.New(nodes).Pods())
		for _, ev := range podEvents(ec.pod) {
			var compact [2]any
			var records [2]spread.PodRecord
			for i, p := range ev.states {
				compact[i] = transformed(b, cache.StripPod, p)
				records[i] = compact[i].(*cache.Pod).Record()
			}
			stages := []struct {
				name string
				run  func(i int)
				// allocFree: the stage must not allocate.
				allocFree bool
			}{
				{name: "transform", run: func(i int) {
					next, _ := step(ev.states, i)
					_, _ = cache.StripPod(next)
				}},
				{name: "handler", run: func(i int) { deliver(ec.pods, ev, compact, i) }, allocFree: true},
				{name: "path", run: func(i int) {
					next, _ := step(ev.states, i)
					objs := compact
					objs[(i+1)%2], _ = cache.StripPod(next)
					deliver(ec.pods, ev, objs, i)
				}},
				{name: "index", run: func(i int) { feed(ec.ix, ev, records, i) }, allocFree: true},
			}
			for _, stage := range stages {
				b.Run(size+"/event="+ev.name+"/stage="+stage.name, func(b *testing.B) {
					if stage.allocFree {
						// 10 events (one to warm up): the pod ends where
						// it started.
						i := 0
						if got := testing.AllocsPerRun(9, func() { stage.run(i); i++ }); got != 0 {
							b.Fatalf("%v allocations per event, want none", got)
						}
					}
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						stage.run(i)
						i++
					}
					if i%2 == 1 {
						stage.run(i) // back to states[0]
					}
					ec.checkCounts(b)
				})
			}
		}
	}
}

// deliver hands event i of ev to h as the informer does: the object the
// informer stored for the pod is the old one of an update.
func deliver(h toolscache.ResourceEventHandler, ev podEvent, objs [2]any, i int) {
	next, prev := step(objs, i)
	switch {
	case ev.deleteAdd && i%2 == 0:
		h.OnDelete(next)
	case ev.deleteAdd:
		h.OnAdd(next, false)
	default:
		h.OnUpdate(prev, next)
	}
}

// feed is deliver without the handler: the index alone, given the records
// the handler hands it.
func feed(ix *spread.Index, ev podEvent, records [2]spread.PodRecord, i int) {
	next, prev := step(records, i)
	switch {
	case ev.deleteAdd && i%2 == 0:
		ix.DeletePodRecord(next)
	case ev.deleteAdd:
		ix.AddPodRecord(next)
	default:
		ix.UpdatePodRecord(prev, next)
	}
}
