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

// Owners are the objects that own pods, of any namespaces. Deployments are
// known through their ReplicaSets.
type Owners struct {
	ReplicaSets            []*appsv1.ReplicaSet
	StatefulSets           []*appsv1.StatefulSet
	ReplicationControllers []*v1.ReplicationController
	Services               []*v1.Service
}

// PodView is the read-only side of spread.Index that finds which owners
// have pods, and which constraints they carry.
type PodView interface {
	PodsMatching(namespace string, sel labels.Selector) int
	LabelSets(namespace string, f func(labels map[string]string, pods int))
	Carried(namespace string, sel labels.Selector, except []labels.Selector) spread.ConstraintSet
}

// Workloads returns the workloads of o that have a counted pod: each
// Deployment through its current ReplicaSet (the highest revision), each
// StatefulSet, ReplicaSet without a controller and ReplicationController,
// and each Service whose selected pods no controller selects. A workload's
// Pod is built from its pod template, with the constraints the template
// declares or, when it declares none, those its pods carry (the webhook
// injected them at creation; pods counts them, see spread.Index.Carried).
// A workload whose selector does not parse is returned with Err set,
// unless it is scaled to zero with no pod left (its template is not kept).
func Workloads(o Owners, pods PodView) []Workload {
	var out []Workload
	add := func(kind workload.Kind, meta *metav1.ObjectMeta, sel labels.Selector, tmpl *v1.PodTemplateSpec, owner metav1.OwnerReference) {
		if pods.PodsMatching(meta.Namespace, sel) == 0 {
			return
		}
		w := Workload{Ref: workload.RefTo(kind, meta), Selector: sel, Pod: podOf(meta.Namespace, tmpl, owner)}
		if len(tmpl.Spec.TopologySpreadConstraints) == 0 {
			w = w.carrying(pods.Carried(meta.Namespace, sel, nil))
		}
		out = append(out, w)
	}
	broken := func(kind workload.Kind, meta *metav1.ObjectMeta, tmpl *v1.PodTemplateSpec, owner metav1.OwnerReference, err error) {
		if len(tmpl.Labels) == 0 {
			return
		}
		out = append(out, Workload{Ref: workload.RefTo(kind, meta), Pod: podOf(meta.Namespace, tmpl, owner),
			Err: fmt.Errorf("spec.selector: %w", err)})
	}
	// controllers holds every controller selector per namespace, to find
	// the pods that only a Service stands for.
	controllers := map[string][]labels.Selector{}

	// A Deployment is known by its ReplicaSets' controller reference: the
	// current one is the highest revision. Reading the Deployments
	// themselves would add nothing the audit uses.
	current := map[types.UID]*appsv1.ReplicaSet{}
	var deployments []types.UID
	for _, rs := range o.ReplicaSets {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err == nil {
			controllers[rs.Namespace] = append(controllers[rs.Namespace], sel)
		}
		ref := metav1.GetControllerOf(rs)
		switch {
		case ref == nil && err != nil:
			broken(workload.ReplicaSet, &rs.ObjectMeta, &rs.Spec.Template, controllerRef(workload.ReplicaSet, rs.Name), err)
		case ref == nil:
			add(workload.ReplicaSet, &rs.ObjectMeta, sel, &rs.Spec.Template, controllerRef(workload.ReplicaSet, rs.Name))
		case ref.Kind == workload.Deployment.GVK.Kind:
			c, seen := current[ref.UID]
			if !seen {
				deployments = append(deployments, ref.UID)
			}
			if !seen || workload.Revision(rs) > workload.Revision(c) {
				current[ref.UID] = rs
			}
		}
	}
	for _, uid := range deployments {
		rs := current[uid]
		d := metav1.ObjectMeta{Namespace: rs.Namespace, Name: metav1.GetControllerOf(rs).Name}
		if sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector); err == nil {
			add(workload.Deployment, &d, sel, &rs.Spec.Template, controllerRef(workload.ReplicaSet, rs.Name))
		} else {
			broken(workload.Deployment, &d, &rs.Spec.Template, controllerRef(workload.ReplicaSet, rs.Name), err)
		}
	}
	for _, ss := range o.StatefulSets {
		sel, err := metav1.LabelSelectorAsSelector(ss.Spec.Selector)
		if err != nil {
			broken(workload.StatefulSet, &ss.ObjectMeta, &ss.Spec.Template, controllerRef(workload.StatefulSet, ss.Name), err)
			continue
		}
		controllers[ss.Namespace] = append(controllers[ss.Namespace], sel)
		add(workload.StatefulSet, &ss.ObjectMeta, sel, &ss.Spec.Template, controllerRef(workload.StatefulSet, ss.Name))
	}
	for _, rc := range o.ReplicationControllers {
		if len(rc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(rc.Spec.Selector)
		controllers[rc.Namespace] = append(controllers[rc.Namespace], sel)
		tmpl := rc.Spec.Template
		if tmpl == nil {
			tmpl = &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rc.Spec.Selector}}
		}
		add(workload.ReplicationController, &rc.ObjectMeta, sel, tmpl, controllerRef(workload.ReplicationController, rc.Name))
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

func controllerRef(k workload.Kind, name string) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{Kind: k.GVK.Kind, APIVersion: k.GVK.GroupVersion().String(), Name: name, Controller: &yes}
}

// podOf builds the pod a template stands for, in namespace, controlled by
// owner. The template is shared, not copied: the audit only reads it.
func podOf(namespace string, tmpl *v1.PodTemplateSpec, owner metav1.OwnerReference) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       namespace,
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: tmpl.Spec,
	}
}

// carrying returns w with its Pod carrying the constraints of cs, its
// template left as it is.
func (w Workload) carrying(cs spread.ConstraintSet) Workload {
	p := *w.Pod
	p.Spec.TopologySpreadConstraints = cs.Constraints()
	w.Pod = &p
	return w
}
