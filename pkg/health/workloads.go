package health

import (
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// KindService is Result.Kind of the pods a Service stands for, which no
// controller owns; a controller's is its kind in workload.Kinds.
const KindService = "Service"

// Workload is a set of pods one controller, or a Service, stands for.
type Workload struct {
	workload.Ref
	// Selector selects the workload's pods in its namespace.
	Selector labels.Selector
	// Pod stands for the workload's pods: their namespace, labels,
	// nodeSelector, affinity, tolerations and topology spread constraints
	// as the pods carry them, and a controller reference to the object
	// that owns them (a Deployment's current ReplicaSet), from which the
	// policy's selector is derived when they carry none.
	Pod *v1.Pod
	// Err is why the workload's pods cannot be found: its selector does
	// not parse (stored before the API server validated label values in
	// selectors). Run records it as the workload's result.
	Err error
}

// Owners are the objects that own pods, of any namespaces.
type Owners struct {
	// Workloads are objects of any of workload.Kinds, a Deployment's
	// ReplicaSets among them: a Deployment's pods are its current
	// ReplicaSet's.
	Workloads []workload.Object
	Services  []*v1.Service
}

// PodView is the read-only side of spread.Index that finds which owners
// have pods, and which constraints they carry.
type PodView interface {
	PodsMatching(namespace string, sel labels.Selector) int
	LabelSets(namespace string, f func(labels map[string]string, pods int))
	Carried(namespace string, sel labels.Selector, except []labels.Selector) spread.ConstraintSet
}

// Workloads returns the workloads of o that have a counted pod: each
// Deployment through its current ReplicaSet (workload.CurrentReplicaSet),
// each object of another kind but a ReplicaSet with a controller, and each
// Service whose selected pods no controller selects. A workload's Pod is
// the pod its controller stamps out of its template (workload.Kind.Pod),
// with the constraints the template declares or, when it declares none,
// those its pods carry (the webhook injected them at creation; pods counts
// them, see spread.Index.Carried). A workload whose selector does not parse
// is returned with Err set, unless it is scaled to zero with no pod left
// (its template is not kept).
func Workloads(o Owners, pods PodView) []Workload {
	var out []Workload
	add := func(ref workload.Ref, sel labels.Selector, pod *v1.Pod) {
		if pods.PodsMatching(ref.Namespace, sel) == 0 {
			return
		}
		w := Workload{Ref: ref, Selector: sel, Pod: pod}
		if len(pod.Spec.TopologySpreadConstraints) == 0 {
			w = w.carrying(pods.Carried(ref.Namespace, sel, nil))
		}
		out = append(out, w)
	}
	broken := func(ref workload.Ref, pod *v1.Pod, err error) {
		if len(pod.Labels) == 0 {
			return
		}
		out = append(out, Workload{Ref: ref, Pod: pod, Err: fmt.Errorf("spec.selector: %w", err)})
	}
	// controllers holds every controller selector per namespace, to find
	// the pods that only a Service stands for.
	controllers := map[string][]labels.Selector{}
	// A Deployment's pods are those of its current ReplicaSet, found among
	// the ReplicaSets it controls.
	replicaSetsOf := map[types.UID][]*appsv1.ReplicaSet{}
	for _, obj := range o.Workloads {
		if rs, ok := obj.(*appsv1.ReplicaSet); ok {
			if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.Kind == workload.Deployment.GVK.Kind {
				replicaSetsOf[ref.UID] = append(replicaSetsOf[ref.UID], rs)
			}
		}
	}
	for _, obj := range o.Workloads {
		k, ok := workload.For(obj)
		if !ok {
			continue
		}
		ref, owner := workload.RefTo(k, obj), obj
		if d, ok := obj.(*appsv1.Deployment); ok {
			// Its ReplicaSets' selectors stand for its own among the
			// controllers'.
			rs := workload.CurrentReplicaSet(d, replicaSetsOf[d.UID])
			if rs == nil {
				// The deployment controller has not created it yet.
				continue
			}
			k, owner = workload.ReplicaSet, rs
		}
		sel, err := k.Selector(owner)
		if owner == obj && err == nil && !sel.Empty() {
			controllers[obj.GetNamespace()] = append(controllers[obj.GetNamespace()], sel)
		}
		if rs, ok := obj.(*appsv1.ReplicaSet); ok && metav1.GetControllerOfNoCopy(rs) != nil {
			// A revision of its controller: a Deployment's is audited
			// through the Deployment.
			continue
		}
		if err == nil && sel.Empty() {
			// An empty selector (a ReplicationController's empty map) is
			// one the API server would not take: it selects every pod.
			continue
		}
		pod := k.Pod(owner)
		if pod == nil {
			// A ReplicationController without a template: its pods carry
			// its selector's labels.
			pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Labels: k.LabelSelector(owner).MatchLabels,
				OwnerReferences: []metav1.OwnerReference{k.ControllerRef(owner)}}}
		}
		if err != nil {
			broken(ref, pod, err)
			continue
		}
		add(ref, sel, pod)
	}
	for _, svc := range o.Services {
		if w, ok := serviceWorkload(svc, controllers[svc.Namespace], pods); ok {
			out = append(out, w)
		}
	}
	return out
}

// serviceWorkload is the workload of the pods svc selects that no
// controller selects, if there are any. Its Pod carries the labels of one
// of them (the smallest label set, so that the choice is stable) and the
// constraints they carry.
func serviceWorkload(svc *v1.Service, controllers []labels.Selector, pods PodView) (Workload, bool) {
	if len(svc.Spec.Selector) == 0 {
		// An empty selector selects nothing for a Service's endpoints.
		return Workload{}, false
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var chosen labels.Set
	pods.LabelSets(svc.Namespace, func(ls map[string]string, _ int) {
		set := labels.Set(ls)
		if !sel.Matches(set) || slices.ContainsFunc(controllers, func(c labels.Selector) bool { return c.Matches(set) }) {
			return
		}
		if chosen == nil || set.String() < chosen.String() {
			chosen = labels.Set(maps.Clone(ls))
		}
	})
	if chosen == nil {
		return Workload{}, false
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Labels: chosen}}
	w := Workload{Ref: workload.Ref{Kind: KindService, Namespace: svc.Namespace, Name: svc.Name}, Selector: sel, Pod: pod}
	return w.carrying(pods.Carried(svc.Namespace, sel, controllers)), true
}

// carrying returns w with its Pod carrying the constraints of cs, its
// template left as it is.
func (w Workload) carrying(cs spread.ConstraintSet) Workload {
	p := *w.Pod
	p.Spec.TopologySpreadConstraints = cs.Constraints()
	w.Pod = &p
	return w
}
