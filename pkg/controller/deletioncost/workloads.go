package deletioncost

import (
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	workloads "github.com/spreadguard/spreadguard/pkg/workload"
)

// The kinds of the workloads kept, from the workload table: the ReplicaSet
// controller's own, which ranks pods by their deletion cost (a
// Deployment's through its ReplicaSets).
var (
	KindReplicaSet            = workloads.ReplicaSet.GVK.Kind
	KindReplicationController = workloads.ReplicationController.GVK.Kind
)

type workloadKey struct{ kind, namespace, name string }

// keeping is what the keeper does with a workload's pods.
type keeping uint8

const (
	// stateWaiting: the template declares no constraint, and none of its
	// pods has been read yet to learn whether the webhook injected some.
	stateWaiting keeping = iota
	stateKept
	// stateUnconstrained: neither the template nor its pods carry one.
	stateUnconstrained
	// stateDisabled: its policy's spec.deletionCost is Disabled.
	stateDisabled
	// stateExcluded: its namespace is one admission leaves alone.
	stateExcluded
	// stateInvalid: constraints the apiserver would refuse, a selector
	// that does not parse, or a policy that cannot be resolved.
	stateInvalid
	// stateShared: its selector selects the pods of another workload of
	// the namespace too: whose pod is whose cannot be told from labels,
	// and two orders would fight over their costs.
	stateShared
)

var stateNames = [...]string{"waiting", "kept", "unconstrained", "disabled", "excluded", "invalid", "shared"}

func (s keeping) String() string { return stateNames[s] }

// workload is one ReplicaSet or ReplicationController and its order.
type workload struct {
	key      workloadKey
	selector labels.Selector
	// template is the owner's pod template, as the cache keeps it.
	template *v1.PodTemplateSpec
	// pod is what the order is built from: the template's, carrying the
	// constraints its pods carry when it declares none (stateWaiting: nil).
	pod   *v1.Pod
	state keeping
	order *spread.DeletionOrder
	// names are the pods with an event since the last update; dirty says
	// the order has to read the index again even if there is none.
	names []string
	dirty bool
	// seen: a pod of a waiting workload had an event since it began to
	// wait, so the index may know the constraints its pods carry.
	seen bool
}

// namespaceWorkloads are a namespace's workloads, and which of them each
// label set of its pods concerns.
type namespaceWorkloads struct {
	all []*workload
	// routes is filled as label sets are met; emptied (nil) whenever a
	// workload of the namespace changes, and owners and counters with it.
	routes map[spread.LabelSet]*route
	// owners and counters narrow the workloads whose selector, and the
	// kept ones whose constraints' selectors, may select a label set: a
	// namespace may hold thousands of workloads.
	owners, counters pairIndex
}

type labelPair struct{ key, value string }

// pairIndex files workloads by one label a selector requires (app=web),
// and those whose selectors require none under always.
type pairIndex struct {
	byPair map[labelPair][]*workload
	always []*workload
}

func (x *pairIndex) add(w *workload, sels []labels.Selector) {
	if x.byPair == nil {
		x.byPair = map[labelPair][]*workload{}
	}
	for _, sel := range sels {
		pair, ok := requiredPair(sel)
		switch {
		case !ok:
			if !slices.Contains(x.always, w) {
				x.always = append(x.always, w)
			}
		case !slices.Contains(x.byPair[pair], w):
			x.byPair[pair] = append(x.byPair[pair], w)
		}
	}
}

// candidates calls f once with each workload filed under a label of set,
// or under always.
func (x *pairIndex) candidates(set labels.Set, f func(*workload)) {
	var seen []*workload
	visit := func(w *workload) {
		if !slices.Contains(seen, w) {
			seen = append(seen, w)
			f(w)
		}
	}
	for k, v := range set {
		for _, w := range x.byPair[labelPair{k, v}] {
			visit(w)
		}
	}
	for _, w := range x.always {
		visit(w)
	}
}

// requiredPair returns a label every object sel selects carries.
func requiredPair(sel labels.Selector) (labelPair, bool) {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vs := r.ValuesUnsorted(); len(vs) == 1 {
				return labelPair{r.Key(), vs[0]}, true
			}
		}
	}
	return labelPair{}, false
}

// index files ns's workloads, once after each change.
func (ns *namespaceWorkloads) index() {
	ns.routes = map[spread.LabelSet]*route{}
	ns.owners, ns.counters = pairIndex{}, pairIndex{}
	for _, w := range ns.all {
		ns.owners.add(w, []labels.Selector{w.selector})
		if w.order == nil {
			continue
		}
		var sels []labels.Selector
		for _, c := range w.pod.Spec.TopologySpreadConstraints {
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				sel = labels.Everything()
			}
			sels = append(sels, sel)
		}
		ns.counters.add(w, sels)
	}
}

// route is what a pod's event concerns: the workload whose selector
// selects it, and the other kept workloads whose constraints count it.
type route struct {
	owner    *workload
	counting []*workload
}

// route returns what a pod of namespace labelled ls concerns, nil when
// nothing.
func (k *Keeper) route(namespace string, ls spread.LabelSet) *route {
	ns := k.namespaces[namespace]
	if ns == nil {
		return nil
	}
	if ns.routes == nil {
		ns.index()
	}
	if r, ok := ns.routes[ls]; ok {
		return r
	}
	set := labels.Set(ls.Map())
	r := &route{}
	owners := 0
	ns.owners.candidates(set, func(w *workload) {
		if w.selector.Matches(set) {
			owners++
			r.owner = w
		}
	})
	if owners > 1 {
		r.owner = nil
	}
	ns.counters.candidates(set, func(w *workload) {
		if w.order != nil && w != r.owner && w.order.Selects(set) {
			r.counting = append(r.counting, w)
		}
	})
	if r.owner == nil && len(r.counting) == 0 {
		r = nil
	}
	ns.routes[ls] = r
	return r
}

// loadWorkloads reads every ReplicaSet and ReplicationController from the
// cache.
func (k *Keeper) loadWorkloads(ctx context.Context) error {
	var rss appsv1.ReplicaSetList
	if err := k.cfg.Reader.List(ctx, &rss); err != nil {
		return fmt.Errorf("listing the ReplicaSets: %w", err)
	}
	var rcs v1.ReplicationControllerList
	if err := k.cfg.Reader.List(ctx, &rcs); err != nil {
		return fmt.Errorf("listing the ReplicationControllers: %w", err)
	}
	for i := range rss.Items {
		k.setOwner(&rss.Items[i])
	}
	for i := range rcs.Items {
		k.setOwner(&rcs.Items[i])
	}
	return nil
}

// refresh reads the workload key from the cache again.
func (k *Keeper) refresh(ctx context.Context, key workloadKey) error {
	var obj client.Object = &appsv1.ReplicaSet{}
	if key.kind == KindReplicationController {
		obj = &v1.ReplicationController{}
	}
	err := k.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: key.namespace, Name: key.name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		k.removeWorkload(key)
		return nil
	case err != nil:
		return fmt.Errorf("reading %s %s/%s from the cache: %w", key.kind, key.namespace, key.name, err)
	}
	k.setOwner(obj)
	return nil
}

// setOwner adds or replaces the workload of a ReplicaSet or
// ReplicationController whose selector or template changed.
func (k *Keeper) setOwner(obj client.Object) {
	key, ok := keyOf(obj)
	if !ok {
		return
	}
	sel, tmpl, err := selectorAndTemplate(obj)
	old := k.workloads[key]
	if old != nil && err == nil && old.template != nil && equality.Semantic.DeepEqual(old.template, tmpl) &&
		old.selector.String() == sel.String() {
		return
	}
	if old != nil {
		k.removeWorkload(key)
	}
	w := &workload{key: key, selector: sel, template: tmpl}
	if err != nil {
		k.log.V(1).Info("a workload whose selector does not parse is left alone", "kind", key.kind, "namespace", key.namespace, "name", key.name, "error", err.Error())
		w.selector, w.state = labels.Nothing(), stateInvalid
	} else {
		k.classify(w)
	}
	k.workloads[key] = w
	ns := k.namespaces[key.namespace]
	if ns == nil {
		ns = &namespaceWorkloads{}
		k.namespaces[key.namespace] = ns
	}
	ns.all = append(ns.all, w)
	k.markShared(ns, w)
	ns.routes = nil
	// Its pods' events may have come before it: read their names.
	if (w.state == stateKept || w.state == stateWaiting) && k.cfg.Index.PodsMatching(key.namespace, w.selector) > 0 {
		k.rescan = true
	}
}

// sharesPods reports whether a and b may select each other's pods: the
// selector of one selects the template of the other.
func sharesPods(a, b *workload) bool {
	return a != b && a.template != nil && b.template != nil &&
		(a.selector.Matches(labels.Set(b.template.Labels)) || b.selector.Matches(labels.Set(a.template.Labels)))
}

// markShared leaves alone w and the workloads of ns it shares pods with.
func (k *Keeper) markShared(ns *namespaceWorkloads, w *workload) {
	for _, o := range ns.all {
		if sharesPods(w, o) {
			w.order, w.state = nil, stateShared
			if o.state != stateShared {
				for _, name := range orderPods(o) {
					k.writes.forget(podKey{o.key.namespace, name})
				}
				o.order, o.state = nil, stateShared
			}
		}
	}
}

// unshare classifies again the workloads of ns left alone for sharing
// pods that no longer share them.
func (k *Keeper) unshare(ns *namespaceWorkloads) {
	for _, w := range ns.all {
		if w.state != stateShared || slices.ContainsFunc(ns.all, func(o *workload) bool { return sharesPods(w, o) }) {
			continue
		}
		k.classify(w)
		if w.state == stateKept || w.state == stateWaiting {
			k.rescan = true
		}
	}
}

func orderPods(w *workload) []string {
	if w.order == nil {
		return nil
	}
	return w.order.Pods()
}

func (k *Keeper) removeWorkload(key workloadKey) {
	w := k.workloads[key]
	if w == nil {
		return
	}
	delete(k.workloads, key)
	ns := k.namespaces[key.namespace]
	ns.all = slices.DeleteFunc(ns.all, func(o *workload) bool { return o == w })
	ns.routes = nil
	k.unshare(ns)
	if len(ns.all) == 0 {
		delete(k.namespaces, key.namespace)
	}
	for _, name := range orderPods(w) {
		k.writes.forget(podKey{key.namespace, name})
	}
}

// classify sets w's state and order from its template (and the constraints
// its pods carry, once known) and its policy.
func (k *Keeper) classify(w *workload) {
	w.order, w.names, w.seen = nil, nil, false
	switch {
	case !k.serves(w.key.namespace):
		w.state = stateExcluded
		return
	case w.template != nil && len(w.template.Spec.TopologySpreadConstraints) > 0:
		w.pod = podOf(w.key.namespace, w.template)
	case w.pod == nil:
		w.state = stateWaiting
		return
	}
	k.build(w)
}

// serves reports whether admission serves namespace, as policy.Scope
// judges it from the cached namespace.
func (k *Keeper) serves(namespace string) bool {
	ns, err := k.cfg.Policies.Namespace(namespace)
	if err != nil {
		ns = nil
	}
	return k.cfg.Namespaces.Serves(namespace, ns)
}

// build makes w's order from w.pod, unless its policy turns the costs off.
func (k *Keeper) build(w *workload) {
	applied, err := policy.Resolve(w.pod, k.cfg.Policies)
	if err != nil {
		k.log.Error(err, "resolving the policy of a workload; its costs are left as they are", "kind", w.key.kind, "namespace", w.key.namespace, "name", w.key.name)
		w.state, w.order = stateInvalid, nil
		return
	}
	if applied != nil && applied.DeletionCost == v1alpha1.DeletionCostDisabled {
		w.state, w.order = stateDisabled, nil
		return
	}
	var opts []spread.OrderOption
	if w.key.kind == KindReplicaSet {
		// A Deployment's other ReplicaSets: their pods carry the same
		// labels but for the hash, and are gone once a rollout ends.
		opts = append(opts, spread.WithRevisionLabel(appsv1.DefaultDeploymentUniqueLabelKey))
	}
	w.order, err = spread.NewDeletionOrder(w.pod, opts...)
	switch {
	case errors.Is(err, spread.ErrNoConstraints):
		w.state = stateUnconstrained
	case err != nil:
		k.log.V(1).Info("a workload whose constraints the order refuses is left alone", "kind", w.key.kind, "namespace", w.key.namespace, "name", w.key.name, "error", err.Error())
		w.state = stateInvalid
	default:
		w.state = stateKept
		k.markDirty(w)
	}
}

// applyPolicies looks again at the policy of every workload with
// constraints after a policy or a namespace changed: one may now be
// turned off, or on again. The others are left as they are: a workload
// whose pods carried no constraint when one was read is read again when
// its template changes, or by the next leader.
func (k *Keeper) applyPolicies() {
	for _, w := range k.workloads {
		if k.applyScope(w) {
			continue
		}
		if w.state != stateKept && w.state != stateDisabled {
			continue
		}
		applied, err := policy.Resolve(w.pod, k.cfg.Policies)
		if err != nil {
			k.log.Error(err, "resolving the policy of a workload; its costs are left as they are", "kind", w.key.kind, "namespace", w.key.namespace, "name", w.key.name)
			continue
		}
		disabled := applied != nil && applied.DeletionCost == v1alpha1.DeletionCostDisabled
		if disabled == (w.state == stateDisabled) {
			continue
		}
		for _, name := range orderPods(w) {
			k.writes.forget(podKey{w.key.namespace, name})
		}
		k.build(w)
		k.namespaces[w.key.namespace].routes = nil
		if w.state == stateKept {
			// Its pods' names are to be read again.
			k.rescan = true
		}
	}
}

// applyScope follows a namespace's labels: a workload whose namespace
// admission no longer serves is left alone from now on, its queued writes
// dropped; one whose namespace it serves again is classified again. It
// reports whether w's state changed.
func (k *Keeper) applyScope(w *workload) bool {
	if w.state == stateInvalid {
		return false
	}
	served := k.serves(w.key.namespace)
	switch {
	case w.state == stateExcluded && served:
		k.classify(w)
		if w.state == stateKept || w.state == stateWaiting {
			k.rescan = true // its pods' names are to be read again
		}
	case w.state != stateExcluded && !served:
		for _, name := range orderPods(w) {
			k.writes.forget(podKey{w.key.namespace, name})
		}
		w.state, w.order, w.names, w.seen = stateExcluded, nil, nil, false
	default:
		return false
	}
	k.namespaces[w.key.namespace].routes = nil
	return true
}

// resolveWaiting builds the order of each waiting workload with a pod
// event since it began to wait, from the constraints its pods carry: the
// index tallies them (Carried), so no pod is read from the API server.
// When its pods carry different sets (some created before a policy, some
// after), the order follows the set most of them carry, as the health
// audit does.
func (k *Keeper) resolveWaiting() {
	for _, w := range k.sampled {
		// Still the workload's, still waiting: neither replaced nor
		// classified again since (nor listed twice).
		if k.workloads[w.key] != w || w.state != stateWaiting || !w.seen {
			continue
		}
		w.seen = false
		if k.cfg.Index.PodsMatching(w.key.namespace, w.selector) == 0 {
			// Its pod is gone or terminating: the next one tells.
			continue
		}
		carried := k.cfg.Index.Carried(w.key.namespace, w.selector, nil)
		if carried == (spread.ConstraintSet{}) {
			w.state, w.names = stateUnconstrained, nil
			continue
		}
		p := podOf(w.key.namespace, w.template)
		// p.Spec is a copy of the template's: setting one field of it
		// leaves the cached template as it is.
		p.Spec.TopologySpreadConstraints = carried.Constraints()
		names := w.names
		w.pod = p
		k.build(w)
		if w.state == stateKept {
			w.names = names
			k.namespaces[w.key.namespace].routes = nil
		}
	}
	k.sampled = k.sampled[:0]
}

// podOf is the pod a template stands for in namespace: what the order
// reads of a pod (labels, nodeSelector, affinity, tolerations, topology
// spread constraints) and what policy resolution reads (labels). The
// template is shared, not copied: the order only reads it.
func podOf(namespace string, tmpl *v1.PodTemplateSpec) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
}

// selectorAndTemplate returns the selector and template of a ReplicaSet
// or ReplicationController. A ReplicationController's selector defaults
// to its template's labels, as the API server defaults it.
func selectorAndTemplate(obj client.Object) (labels.Selector, *v1.PodTemplateSpec, error) {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
		if err != nil {
			return nil, nil, err
		}
		if sel.Empty() {
			return nil, nil, errors.New("an empty selector")
		}
		return sel, &o.Spec.Template, nil
	case *v1.ReplicationController:
		if len(o.Spec.Selector) == 0 {
			return nil, nil, errors.New("an empty selector")
		}
		return labels.SelectorFromSet(o.Spec.Selector), o.Spec.Template, nil
	}
	return nil, nil, fmt.Errorf("%T is no workload", obj)
}

// keyOf names the workload of an informer's object (or its tombstone).
func keyOf(obj any) (workloadKey, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		return workloadKey{KindReplicaSet, o.Namespace, o.Name}, true
	case *v1.ReplicationController:
		return workloadKey{KindReplicationController, o.Namespace, o.Name}, true
	}
	return workloadKey{}, false
}
