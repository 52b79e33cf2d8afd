package deletioncost

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Patcher writes one pod's deletion cost.
type Patcher interface {
	// ApplyCost sets the pod's controller.kubernetes.io/pod-deletion-cost
	// to cost by server-side apply under FieldManager, without force: a
	// cost another manager owns is a conflict (409), never overwritten.
	ApplyCost(ctx context.Context, namespace, name string, cost int32) error
}

// SSAPatcher is the Patcher of a live cluster.
type SSAPatcher struct {
	Client client.Client
}

// ApplyCost applies a pod that holds the annotation and nothing else: the
// keeper owns that one field, and owns none of the others.
func (p SSAPatcher) ApplyCost(ctx context.Context, namespace, name string, cost int32) error {
	pod := corev1ac.Pod(name, namespace).
		WithAnnotations(map[string]string{spread.DeletionCostAnnotation: strconv.FormatInt(int64(cost), 10)})
	return p.Client.Apply(ctx, pod, client.FieldOwner(FieldManager))
}

// The backoff of a pod whose patch failed (the API server unavailable,
// throttling, a timeout): client-go's per-item exponential backoff.
// Variables for the tests.
var (
	backoffBase = time.Second
	backoffMax  = 5 * time.Minute
)

type podKey struct{ namespace, name string }

// writes is the queue of the costs to write. A pod is queued once however
// many times its cost changes before it is written: the latest cost is
// written. The lowest cost goes first (then the pod queued first): what is
// written of a queue at any moment is, of each workload, the pods a
// scale-down deletes first, so that a scale-down by no more pods than that
// takes the ones the order puts first, even while the rest of the queue
// waits for the cluster-wide limiter.
type writes struct {
	limiter *rate.Limiter
	queue   workqueue.TypedRateLimitingInterface[podKey]

	mu sync.Mutex
	// wanted holds the cost to write of each queued pod.
	wanted map[podKey]int32
	// foreign holds the pods whose cost another manager owns: left alone
	// until they are deleted.
	foreign map[podKey]struct{}
}

func newWrites(qps float64, burst int) *writes {
	w := &writes{
		limiter: rate.NewLimiter(rate.Limit(qps), burst),
		wanted:  map[podKey]int32{},
		foreign: map[podKey]struct{}{},
	}
	order := newCheapestFirst(w.cost)
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[podKey](backoffBase, backoffMax),
		workqueue.TypedRateLimitingQueueConfig[podKey]{DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(
			workqueue.TypedDelayingQueueConfig[podKey]{Queue: workqueue.NewTypedWithConfig(
				workqueue.TypedQueueConfig[podKey]{Queue: order})})})
	return w
}

// cost is the cost wanted for key, the highest when none is.
func (w *writes) cost(key podKey) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.wanted[key]; ok {
		return c
	}
	return math.MaxInt32
}

// cheapestFirst is the storage of the write queue (workqueue.Queue): a
// heap of the pods by the cost wanted when they were queued, the lowest
// first, then by when they were queued. A pod's place does not follow a
// cost changed while it waits (rare: a pod's cost is written once, see
// docs/deletion-cost.md); its latest cost is written. The workqueue calls
// it under its own lock.
type cheapestFirst struct {
	cost  func(podKey) int32
	items []queued
	seq   uint64
}

type queued struct {
	key  podKey
	cost int32
	seq  uint64
}

var _ workqueue.Queue[podKey] = (*cheapestFirst)(nil)

func newCheapestFirst(cost func(podKey) int32) *cheapestFirst {
	return &cheapestFirst{cost: cost}
}

func (q *cheapestFirst) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.cost < b.cost || (a.cost == b.cost && a.seq < b.seq)
}

// Push queues key at the cost wanted for it now.
func (q *cheapestFirst) Push(key podKey) {
	q.seq++
	q.items = append(q.items, queued{key: key, cost: q.cost(key), seq: q.seq})
	for i := len(q.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

// Touch leaves a queued pod where it is.
func (q *cheapestFirst) Touch(podKey) {}

// Len is the number of pods queued.
func (q *cheapestFirst) Len() int { return len(q.items) }

// Pop takes the pod of the lowest cost.
func (q *cheapestFirst) Pop() podKey {
	top := q.items[0].key
	n := len(q.items) - 1
	q.items[0] = q.items[n]
	q.items = q.items[:n]
	for i := 0; ; {
		least := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < n && q.less(c, least) {
				least = c
			}
		}
		if least == i {
			break
		}
		q.items[i], q.items[least] = q.items[least], q.items[i]
		i = least
	}
	return top
}

// want queues cost for the pod key, unless another manager owns its cost.
func (w *writes) want(key podKey, cost int32) {
	w.mu.Lock()
	if _, ok := w.foreign[key]; ok {
		w.mu.Unlock()
		return
	}
	w.wanted[key] = cost
	w.mu.Unlock()
	w.queue.Add(key)
}

// forget drops what is known of a pod that is gone.
func (w *writes) forget(key podKey) {
	w.mu.Lock()
	delete(w.wanted, key)
	delete(w.foreign, key)
	w.mu.Unlock()
}

func (w *writes) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.wanted)
}

func (w *writes) foreignPods() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.foreign)
}

// done drops key's wanted cost if it is still cost: a cost wanted since
// stays queued.
func (w *writes) done(key podKey, cost int32, foreign bool) {
	w.mu.Lock()
	if c, ok := w.wanted[key]; ok && c == cost {
		delete(w.wanted, key)
	}
	if foreign {
		delete(w.wanted, key)
		w.foreign[key] = struct{}{}
	}
	w.mu.Unlock()
}

// The results of a patch, as spreadguard_deletion_cost_patches_total
// counts them.
const (
	resultApplied = "applied"
	resultForeign = "foreign"
	resultGone    = "gone"
	resultError   = "error"
)

// run writes queued costs until the queue shuts down.
func (w *writes) run(ctx context.Context, pods Pods, patcher Patcher, m *metrics, log logr.Logger) {
	for {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.write(ctx, key, pods, patcher, m, log)
		w.queue.Done(key)
		m.pending.Set(float64(w.pending()))
	}
}

// write writes the cost wanted for key, when the pod does not carry it
// already.
func (w *writes) write(ctx context.Context, key podKey, pods Pods, patcher Patcher, m *metrics, log logr.Logger) {
	w.mu.Lock()
	cost, ok := w.wanted[key]
	w.mu.Unlock()
	if !ok {
		w.queue.Forget(key)
		return
	}
	p := pods.Pod(key.namespace, key.name)
	if p == nil {
		w.done(key, cost, false)
		w.queue.Forget(key)
		return
	}
	if c, has := p.DeletionCost(); has && c == cost {
		w.done(key, cost, false)
		w.queue.Forget(key)
		return
	}
	if err := w.limiter.Wait(ctx); err != nil {
		return // the Lease is lost or the server stops
	}
	err := patcher.ApplyCost(ctx, key.namespace, key.name, cost)
	log = log.WithValues("pod", key.namespace+"/"+key.name, "cost", cost)
	switch {
	case err == nil:
		m.patches.WithLabelValues(resultApplied).Inc()
		log.V(4).Info("deletion cost written")
		w.done(key, cost, false)
		w.queue.Forget(key)
	case apierrors.IsConflict(err):
		// Another field manager owns the annotation: its value stands.
		m.patches.WithLabelValues(resultForeign).Inc()
		log.V(2).Info("another manager owns the deletion cost; the pod is left alone", "error", err.Error())
		w.done(key, cost, true)
		m.foreign.Set(float64(w.foreignPods()))
		w.queue.Forget(key)
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err):
		// Deleted since the cache saw it (an apply of a pod that is gone
		// would create one, which validation refuses).
		m.patches.WithLabelValues(resultGone).Inc()
		w.done(key, cost, false)
		w.queue.Forget(key)
	default:
		m.patches.WithLabelValues(resultError).Inc()
		if ctx.Err() == nil {
			log.V(1).Info("writing a deletion cost failed; it is tried again later", "error", err.Error())
			w.queue.AddRateLimited(key)
		}
	}
}
