package cache

import (
	"hash/maphash"
	"slices"
	"sync"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// Pod is a pod as the webhook's pod informer keeps it: what counting reads,
// the topology spread constraints the pod carries, which the audit reads
// (pkg/health), and the deletion cost the keeper compares before it writes
// one (pkg/controller/deletioncost), and nothing else. Even stripped of
// every other field a *v1.Pod is a 1.2 KiB struct, which at 150,000 pods is
// most of the server's heap; a Pod is under 100 bytes plus its name, and
// the replicas of one workload share their namespace, node name, label set
// and constraints.
//
// Only the informer stores Pods: nothing reads pods back from the cache
// (spread.Index keeps the counts), and the event handlers hand
// spread.Index each Pod's Record, which allocates nothing.
type Pod struct {
	namespace       string
	name            string
	resourceVersion string // tells an update from a resync
	phase           v1.PodPhase
	nodeName        unique.Handle[string]
	labels          spread.LabelSet
	constraints     spread.ConstraintSet
	deleting        bool
	// unready: see spread.PodRecord.Unready; the keeper orders such a pod
	// apart. It fits in the padding after deleting too.
	unready bool
	// hasCost: the pod's controller.kubernetes.io/pod-deletion-cost is an
	// int32, cost. It fits in the padding after deleting.
	hasCost bool
	cost    int32
}

var (
	_ runtime.Object            = (*Pod)(nil)
	_ metav1.ObjectMetaAccessor = (*Pod)(nil)
)

var knownPhases = []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown}

// CompactPod returns the cached form of p.
func CompactPod(p *v1.Pod) *Pod {
	labels := spread.LabelSetOf(p.Labels)
	c := &Pod{
		namespace:       unique.Make(p.Namespace).Value(),
		name:            p.Name,
		resourceVersion: p.ResourceVersion,
		phase:           canonicalPhase(p.Status.Phase),
		nodeName:        unique.Make(p.Spec.NodeName),
		labels:          labels,
		constraints:     constraintSetOf(labels, p.Spec.TopologySpreadConstraints),
		deleting:        p.DeletionTimestamp != nil,
		unready:         spread.Unready(p),
	}
	if _, ok := p.Annotations[spread.DeletionCostAnnotation]; ok {
		// A cost the ReplicaSet controller does not read ("+5", "007") is
		// no cost: it ranks such a pod at 0, and the keeper writes one.
		if n, err := workload.DeletionCost(p.Annotations); err == nil {
			c.hasCost, c.cost = true, n
		}
	}
	return c
}

// carried remembers, for each of 1,024 slots a label set hashes to, the
// constraint set a pod with those labels last carried. The replicas of a
// workload share their labels and carry the same constraints, so an event's
// pod is recognized by comparison (ConstraintSet.Matches), which costs
// less than interning the constraints again; a pod the slot does not match
// interns its own set and takes the slot. Every pod event goes through
// here: the budget is a microsecond for the whole event.
var carried struct {
	seed maphash.Seed
	mu   sync.Mutex
	sets [1024]spread.ConstraintSet
}

func init() { carried.seed = maphash.MakeSeed() }

// constraintSetOf returns spread.ConstraintSetOf(cs) for a pod labelled
// labels.
func constraintSetOf(labels spread.LabelSet, cs []v1.TopologySpreadConstraint) spread.ConstraintSet {
	if len(cs) == 0 {
		return spread.ConstraintSet{}
	}
	slot := maphash.Comparable(carried.seed, labels) % uint64(len(carried.sets))
	carried.mu.Lock()
	set := carried.sets[slot]
	carried.mu.Unlock()
	if set.Matches(cs) {
		return set
	}
	set = spread.ConstraintSetOf(cs)
	carried.mu.Lock()
	carried.sets[slot] = set
	carried.mu.Unlock()
	return set
}

// canonicalPhase returns the package constant for a known phase, so that
// the decoded string is not kept once per pod.
func canonicalPhase(ph v1.PodPhase) v1.PodPhase {
	if i := slices.Index(knownPhases, ph); i >= 0 {
		return knownPhases[i]
	}
	return ph
}

// Record returns the pod as spread.Index counts it, without allocating:
// the event handlers feed it to the index.
func (p *Pod) Record() spread.PodRecord {
	r := spread.PodRecord{
		Namespace:   p.namespace,
		Name:        p.name,
		Labels:      p.labels,
		Phase:       p.phase,
		Terminating: p.deleting,
		Constraints: p.constraints,
		Unready:     p.unready,
	}
	if p.nodeName != (unique.Handle[string]{}) {
		r.NodeName = p.nodeName.Value()
	}
	return r
}

// DeletionCost returns the pod's controller.kubernetes.io/pod-deletion-cost,
// and whether it has one that is a decimal int32.
func (p *Pod) DeletionCost() (cost int32, ok bool) { return p.cost, p.hasCost }

// GetObjectMeta lets client-go's informer machinery (keys, indexes, the
// resourceVersion check that tells updates from resyncs) read the pod's
// identity through meta.Accessor. The copy it returns is not the pod:
// setting a field on it changes nothing.
func (p *Pod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, ResourceVersion: p.resourceVersion}
}

// GetObjectKind reports no kind: a cached Pod is never encoded.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a copy of p.
func (p *Pod) DeepCopyObject() runtime.Object {
	c := *p
	return &c
}
