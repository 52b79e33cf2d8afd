package forecast

import (
	"fmt"
	"math"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// Order ranks the active pods of a ReplicaSet or ReplicationController in
// the order its controller deletes them when scaled down, the first
// deleted first. A forecast takes the first pods of the order.
type Order interface {
	// Rank sorts pods, the first deleted first. related are the pods the
	// controller counts per node when it ranks them: those of every
	// ReplicaSet of the same Deployment, or of the ReplicaSet alone.
	Rank(pods, related []*v1.Pod)
	// String says which order is assumed, in the forecast's output.
	String() string
}

// ControllerOrder is what Forecast.Order says of ControllerRanking.
const ControllerOrder = "the ReplicaSet controller's order (not running or not Ready first, then the lower pod-deletion-cost, " +
	"then more pods on the same node, then the newer)"

// OrdinalOrder is what Forecast.Order says of a StatefulSet's scale-down,
// which no annotation changes.
const OrdinalOrder = "the StatefulSet controller's order (the highest ordinal first)"

// ControllerRanking is the order in which the ReplicaSet controller of
// Kubernetes v1.37.1 deletes pods (it also runs ReplicationControllers):
// getPodsToDelete and getPodsRankedByRelatedPodsOnSameNode in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/replicaset/replica_set.go
// sort the pods by ActivePodsWithRanks.Less in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go:
// unassigned before assigned; Pending, then Unknown, then Running; not
// Ready before Ready; the lower controller.kubernetes.io/pod-deletion-cost;
// more active related pods on the same node; Ready for less time; more
// container restarts; created later. Times are compared on the base-2
// logarithm of their age at Now, equal logarithms by UID, as the
// controller does to spread deletions among pods of about the same age.
//
// A keeper of pod-deletion-cost acts on the fourth rule: the costs it
// writes are read here from the pods, or given by Cost for pods it has not
// written yet.
type ControllerRanking struct {
	// Now is the controller's clock; the zero time compares times as they
	// are, without the logarithm.
	Now time.Time
	// Cost returns a pod's deletion cost; nil reads the annotation as the
	// controller does (0 when absent or not a valid int32).
	Cost func(*v1.Pod) int32
}

var _ Order = ControllerRanking{}

func (ControllerRanking) String() string { return ControllerOrder }

// Rank sorts pods as the ReplicaSet controller does. Pods the controller
// would leave in any order (no rule tells them apart) keep theirs.
func (r ControllerRanking) Rank(pods, related []*v1.Pod) {
	onNode := map[string]int{}
	for _, p := range related {
		if active(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	cost := r.Cost
	if cost == nil {
		cost = DeletionCost
	}
	ranked := make([]rankedPod, len(pods))
	for i, p := range pods {
		ranked[i] = rankedPod{pod: p, rank: onNode[p.Spec.NodeName], cost: cost(p)}
	}
	now := metav1.NewTime(r.Now)
	slices.SortStableFunc(ranked, func(a, b rankedPod) int {
		switch {
		case deletedBefore(a, b, now):
			return -1
		case deletedBefore(b, a, now):
			return 1
		}
		return 0
	})
	for i := range ranked {
		pods[i] = ranked[i].pod
	}
}

// DeletionCost is a pod's controller.kubernetes.io/pod-deletion-cost as the
// ReplicaSet controller reads it (workload.DeletionCost): 0 when it has
// none or one the controller does not read.
func DeletionCost(p *v1.Pod) int32 {
	n, _ := workload.DeletionCost(p.Annotations)
	return n
}

// active is IsPodActive of controller_utils.go: not Succeeded, not Failed,
// not terminating.
func active(p *v1.Pod) bool {
	return p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed && p.DeletionTimestamp == nil
}

type rankedPod struct {
	pod  *v1.Pod
	rank int
	cost int32
}

// phaseOrdinal is podPhaseToOrdinal of controller_utils.go; a phase it does
// not list ranks with Pending.
func phaseOrdinal(p v1.PodPhase) int {
	switch p {
	case v1.PodUnknown:
		return 1
	case v1.PodRunning:
		return 2
	}
	return 0
}

// deletedBefore is ActivePodsWithRanks.Less: whether the controller deletes
// a before b.
func deletedBefore(a, b rankedPod, now metav1.Time) bool {
	pa, pb := a.pod, b.pod
	if pa.Spec.NodeName != pb.Spec.NodeName && (pa.Spec.NodeName == "" || pb.Spec.NodeName == "") {
		return pa.Spec.NodeName == ""
	}
	if oa, ob := phaseOrdinal(pa.Status.Phase), phaseOrdinal(pb.Status.Phase); oa != ob {
		return oa < ob
	}
	readyA, readyB := readySince(pa), readySince(pb)
	if (readyA != nil) != (readyB != nil) {
		return readyA == nil
	}
	if a.cost != b.cost {
		return a.cost < b.cost
	}
	if a.rank != b.rank {
		return a.rank > b.rank
	}
	if readyA != nil && !readyA.Equal(readyB) {
		return newer(readyA, readyB, pa, pb, now)
	}
	if ra, rb := maxRestarts(pa), maxRestarts(pb); ra != rb {
		return ra.more(rb)
	}
	if !pa.CreationTimestamp.Equal(&pb.CreationTimestamp) {
		return newer(&pa.CreationTimestamp, &pb.CreationTimestamp, pa, pb, now)
	}
	return false
}

// newer reports whether time ta (of pod pa) ranks as more recent than tb
// (of pb): a zero time is the most recent; with a clock, times whose ages
// have the same base-2 logarithm rank by UID.
func newer(ta, tb *metav1.Time, pa, pb *v1.Pod, now metav1.Time) bool {
	if now.IsZero() || ta.IsZero() || tb.IsZero() {
		return afterOrZero(ta, tb)
	}
	if d := logAge(ta, now) - logAge(tb, now); d != 0 {
		return d < 0
	}
	return pa.UID < pb.UID
}

func afterOrZero(ta, tb *metav1.Time) bool {
	if ta.IsZero() || tb.IsZero() {
		return ta.IsZero()
	}
	return ta.After(tb.Time)
}

// logAge is the base-2 logarithm of t's age in nanoseconds at now, -1 for
// a time not in the past.
func logAge(t *metav1.Time, now metav1.Time) int64 {
	if d := now.Sub(t.Time); d > 0 {
		return int64(math.Log2(float64(d)))
	}
	return -1
}

// readySince returns when p became Ready, nil when it is not Ready
// (podReadyTime and IsPodReady).
func readySince(p *v1.Pod) *metav1.Time {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == v1.PodReady {
			if c.Status == v1.ConditionTrue {
				return &c.LastTransitionTime
			}
			return nil
		}
	}
	return nil
}

// restarts are a pod's most restarted regular container's and sidecar's
// restarts.
type restarts struct{ regular, sidecar int32 }

func (r restarts) more(o restarts) bool {
	if r.regular != o.regular {
		return r.regular > o.regular
	}
	return r.sidecar > o.sidecar
}

// maxRestarts is maxContainerRestarts of controller_utils.go: sidecars are
// the init containers that restart always.
func maxRestarts(p *v1.Pod) restarts {
	var r restarts
	for _, c := range p.Status.ContainerStatuses {
		r.regular = max(r.regular, c.RestartCount)
	}
	for _, s := range p.Status.InitContainerStatuses {
		for _, c := range p.Spec.InitContainers {
			if c.Name == s.Name && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
				r.sidecar = max(r.sidecar, s.RestartCount)
			}
		}
	}
	return r
}

// KeeperOrder is what Forecast.Order says of KeeperRanking.
const KeeperOrder = "the ReplicaSet controller's order with the pod-deletion-costs spreadguard's keeper keeps " +
	"(the pods of the fullest domains first)"

// KeeperRanking is the ReplicaSet controller's order once the keeper has
// written the deletion costs of spread.DeletionOrder, read from the index
// as the keeper reads it: ControllerRanking with those costs in place of
// the ones the pods carry now. A pod the order does not hold (not bound,
// or not counted) keeps the cost it carries; it is not Running and Ready,
// which goes first anyway.
type KeeperRanking struct {
	ControllerRanking
}

var _ Order = KeeperRanking{}

func (KeeperRanking) String() string { return KeeperOrder }

// NewKeeperRanking returns the KeeperRanking of pods, a ReplicaSet's or a
// ReplicationController's, at now, with the costs the keeper computes from
// ix. The keeper reads the constraints from the pods, which share one
// template: the first pod carrying one is the template. When none does,
// the keeper leaves the workload alone, and the error wraps
// spread.ErrNoConstraints.
func NewKeeperRanking(now time.Time, ix *spread.Index, pods []*v1.Pod) (KeeperRanking, error) {
	i := slices.IndexFunc(pods, func(p *v1.Pod) bool { return len(p.Spec.TopologySpreadConstraints) > 0 })
	if i < 0 {
		return KeeperRanking{}, fmt.Errorf("the keeper's order: %w", spread.ErrNoConstraints)
	}
	order, err := spread.NewDeletionOrder(pods[i])
	if err != nil {
		return KeeperRanking{}, fmt.Errorf("the keeper's order: %w", err)
	}
	names := make([]string, len(pods))
	for k, p := range pods {
		names[k] = p.Name
	}
	order.Update(ix, names...)
	cost := func(p *v1.Pod) int32 {
		if c, ok := order.Cost(p.Name); ok {
			return c
		}
		return DeletionCost(p)
	}
	return KeeperRanking{ControllerRanking{Now: now, Cost: cost}}, nil
}
