package deletioncost

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// The benchmark cluster is pkg/spread's: 30 pods per node in 3 zones, in
// Deployments of 30 replicas, every other one in namespace "big" and the
// others over 200 team namespaces; each Deployment's ReplicaSet declares
// the zone and hostname constraints the webhook would inject.
const (
	podsPerNode = 30
	replicas    = 30
	// defaultRate is the chart's deletionCost.qps.
	defaultRate = DefaultQPS
)

var benchSizes = []int{50, 5000}

func sizeName(nodes int) string {
	return fmt.Sprintf("nodes=%d,pods=%d", nodes, nodes*podsPerNode)
}

// benchCluster is the index, its compact pods and the ReplicaSets, in a
// lookup.Store, which copies what it lists as the cache's reads do not.
type benchCluster struct {
	ix     *spread.Index
	pods   *benchPods
	owners client.Reader
	// target is a ReplicaSet of namespace big, and one of its pods.
	target *v1.Pod
}

// benchPods is the pod cache of the benchmarks: compact pods only, as the
// informer keeps them.
type benchPods struct {
	compact map[string]*cache.Pod
}

// Subscribe subscribes no one: the benchmarks tell the keeper themselves.
func (f *benchPods) Subscribe(state.Subscriber, ...state.Kind) func() { return func() {} }
func (f *benchPods) EachPod(fn func(*cache.Pod)) error {
	for _, p := range f.compact {
		fn(p)
	}
	return nil
}
func (f *benchPods) Pod(namespace, name string) *cache.Pod { return f.compact[namespace+"/"+name] }

var (
	benchMu       sync.Mutex
	benchClusters = map[int]*benchCluster{}
)

func clusterOf(nodes int) *benchCluster {
	benchMu.Lock()
	defer benchMu.Unlock()
	if c := benchClusters[nodes]; c != nil {
		return c
	}
	zones := []string{"zone-a", "zone-b", "zone-c"}
	c := &benchCluster{ix: spread.NewIndex(), pods: &benchPods{compact: map[string]*cache.Pod{}}}
	var nodeNames []string
	for i := range nodes {
		n := st.MakeNode().Name(fmt.Sprintf("node-%05d", i)).Zone(zones[i%len(zones)]).Obj()
		c.ix.AddNode(n)
		nodeNames = append(nodeNames, n.Name)
	}
	var owners []runtime.Object
	slot := 0
	for d := range nodes * podsPerNode / replicas {
		ns := "big"
		if d%2 == 1 {
			ns = fmt.Sprintf("team-%03d", d%200)
		}
		name := fmt.Sprintf("deploy-%05d", d)
		labels := map[string]string{"app": name, "pod-template-hash": "5d8f7c6b9", "team": fmt.Sprintf("t%d", d%20)}
		rs := st.MakeReplicaSet().Namespace(ns).Name(name+"-5d8f7c6b9").MatchLabel("app", name).MatchLabel("pod-template-hash", "5d8f7c6b9").Obj()
		rs.Spec.Template.Labels = labels
		rs.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
			st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", name).MatchLabelKeys("pod-template-hash").Obj(),
			st.Constraint(1, v1.LabelHostname).MatchLabel("app", name).MatchLabelKeys("pod-template-hash").Obj(),
		}
		owners = append(owners, rs)
		for r := range replicas {
			// Consecutive nodes cycle through the zones: 10 replicas in
			// each zone.
			p := st.MakePod().Name(fmt.Sprintf("%s-%d", name, r)).Namespace(ns).Labels(labels).
				ControlledBy("ReplicaSet", "apps/v1", rs.Name).Node(nodeNames[slot%nodes]).Phase(v1.PodRunning).Obj()
			slot++
			cp := cache.CompactPod(p)
			c.pods.compact[ns+"/"+p.Name] = cp
			c.ix.AddPodRecord(cp.Record())
			if c.target == nil && ns == "big" && d >= nodes*podsPerNode/replicas/2 {
				c.target = p
			}
		}
	}
	store, err := lookup.NewStore(owners...)
	if err != nil {
		panic(err)
	}
	c.owners = store
	benchClusters[nodes] = c
	return c
}

// newBenchKeeper returns a keeper over c, leading, its writes queued but
// never sent.
func newBenchKeeper(b *testing.B, c *benchCluster) *Keeper {
	b.Helper()
	k, err := New(Config{
		Log: logr.Discard(), Index: c.ix, Pods: c.pods, Changes: c.pods, Reader: c.owners,
		Policies: policy.SliceLister{}, Patcher: nil, QPS: defaultRate, Burst: 2 * defaultRate,
		Synced: func() bool { return true }, Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// start runs what a new leader runs before its first write: every
// workload read, every pod named, every order's first update, every cost
// queued. It returns the costs queued.
func start(b *testing.B, k *Keeper) int {
	b.Helper()
	k.reset()
	k.leading.Store(true)
	if err := k.loadWorkloads(b.Context()); err != nil {
		b.Fatal(err)
	}
	if err := k.sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	return k.writes.pending()
}

// drain takes every queued write off the queue as a writer would, without
// sending it, and returns how many there were.
func drain(k *Keeper) int {
	n := 0
	for k.writes.queue.Len() > 0 {
		key, _ := k.writes.queue.Get()
		k.writes.mu.Lock()
		delete(k.writes.wanted, key)
		k.writes.mu.Unlock()
		k.writes.queue.Done(key)
		n++
	}
	return n
}

// BenchmarkKeeperStart is the computation of a new leader's start: the
// ReplicaSets read from the cache, the names of all pods, 5,000 orders and
// a cost queued for each pod. writes is the patches it queues; wall-s the
// time they take at the chart's rate cap (deletionCost.qps), which paces
// the start, not its computation. Its baseline, BenchmarkKeeperStartIndex,
// is the index filled with the same pods, what the informers' first list
// costs every replica.
func BenchmarkKeeperStart(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(sizeName(nodes), func(b *testing.B) {
			c := clusterOf(nodes)
			k := newBenchKeeper(b, c)
			writes := 0
			b.ResetTimer()
			for b.Loop() {
				writes = start(b, k)
			}
			b.StopTimer()
			b.ReportMetric(float64(writes), "writes")
			b.ReportMetric(float64(writes)/defaultRate, "wall-s")
		})
	}
}

// BenchmarkKeeperStartIndex is BenchmarkKeeperStart's baseline: a fresh
// index fed every node and pod of the cluster.
func BenchmarkKeeperStartIndex(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(sizeName(nodes), func(b *testing.B) {
			c := clusterOf(nodes)
			pods := slices.Collect(maps.Values(c.pods.compact))
			zones := []string{"zone-a", "zone-b", "zone-c"}
			var ns []*v1.Node
			for i := range nodes {
				ns = append(ns, st.MakeNode().Name(fmt.Sprintf("node-%05d", i)).Zone(zones[i%len(zones)]).Obj())
			}
			b.ResetTimer()
			for b.Loop() {
				ix := spread.NewIndex()
				for _, n := range ns {
					ix.AddNode(n)
				}
				for _, p := range pods {
					ix.AddPodRecord(p.Record())
				}
			}
		})
	}
}

// BenchmarkKeeperPodEvent is one pod event of a kept workload (a
// Deployment of 30 in namespace big, zone and hostname constraints), the
// whole of the leader's path: the index counts it, the listener files it,
// the syncer routes it to its workload and updates its order, and the
// costs that changed are queued. An event is half a pair: a pod created
// and deleted as the ReplicaSet controller deletes (the cheapest).
// writes/pod-created is the patches queued per pod created. Its baseline,
// BenchmarkKeeperPodEventIndex, is the index's update alone.
func BenchmarkKeeperPodEvent(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(sizeName(nodes), func(b *testing.B) {
			c := clusterOf(nodes)
			k := newBenchKeeper(b, c)
			start(b, k)
			drain(k)
			created := c.target.DeepCopy()
			created.Name += "-new"
			cp := cache.CompactPod(created)
			key := created.Namespace + "/" + created.Name
			writes, i := 0, 0
			b.ResetTimer()
			for b.Loop() {
				if i%2 == 0 {
					c.ix.AddPodRecord(cp.Record())
					c.pods.compact[key] = cp
					k.Changed(state.PodChange(nil, cp))
				} else {
					c.ix.DeletePodRecord(cp.Record())
					delete(c.pods.compact, key)
					k.Changed(state.PodChange(cp, nil))
				}
				i++
				if err := k.sync(b.Context()); err != nil {
					b.Fatal(err)
				}
				writes += drain(k)
			}
			b.StopTimer()
			if i%2 == 1 {
				c.ix.DeletePodRecord(cp.Record())
				delete(c.pods.compact, key)
			}
			b.ReportMetric(float64(writes)/float64((i+1)/2), "writes/pod-created")
		})
	}
}

// BenchmarkKeeperPodEventIndex is BenchmarkKeeperPodEvent's baseline: the
// same events counted by the index alone, as every replica counts them.
func BenchmarkKeeperPodEventIndex(b *testing.B) {
	for _, nodes := range benchSizes {
		b.Run(sizeName(nodes), func(b *testing.B) {
			c := clusterOf(nodes)
			created := c.target.DeepCopy()
			created.Name += "-new"
			rec := cache.CompactPod(created).Record()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					c.ix.AddPodRecord(rec)
				} else {
					c.ix.DeletePodRecord(rec)
				}
				i++
			}
			if i%2 == 1 {
				c.ix.DeletePodRecord(rec)
			}
		})
	}
}
