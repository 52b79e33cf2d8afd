package spread

import (
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

// The owner kinds DefaultSelector follows. They are compared as whole
// GroupVersionKinds, as the scheduler does: an owner reference to
// extensions/v1beta1 ReplicaSet is not followed.
var (
	rcKind = v1.SchemeGroupVersion.WithKind("ReplicationController")
	rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	ssKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
)

// DefaultSelector returns the selector kube-scheduler v1.37.1 derives for a
// pod that declares no spread constraints: the merged selectors of the
// pod's namespace's Services that select it, then the selector of its
// controller (controllerRef only) when that is a ReplicationController,
// ReplicaSet or StatefulSet.
//
// It mirrors
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/helper/spread.go
// quirks included: a Service with a nil selector selects nothing; a
// ReplicationController's selector is merged into the Services' label set
// (so its value wins on a shared key); a ReplicaSet's or StatefulSet's
// requirements are appended, and an owner selector that does not parse is
// skipped. An owner that does not exist (the source returns nil, nil) is
// skipped like the scheduler skips a lister miss. Unlike the scheduler,
// which treats every lister error as a miss, a failing lookup is returned:
// a broken cache must not silently produce a narrower selector.
func DefaultSelector(pod *v1.Pod, src SelectorSources) (labels.Selector, error) {
	if pod == nil {
		return nil, errors.New("default selector: nil pod")
	}
	if src == nil {
		return nil, errors.New("default selector: nil selector sources")
	}
	var services []*v1.Service
	var err error
	if c, ok := src.(ServiceCandidates); ok {
		services, err = c.ServicesSelecting(pod.Namespace, pod.Labels)
	} else {
		services, err = src.Services(pod.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("listing services in namespace %q: %w", pod.Namespace, err)
	}
	podLabels := labels.Set(pod.Labels)
	labelSet := labels.Set{}
	for _, svc := range services {
		if svc == nil || svc.Spec.Selector == nil {
			continue
		}
		if labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(podLabels) {
			// Every Service merged here selects the pod, so their selectors
			// cannot disagree on a key the pod carries.
			labelSet = labels.Merge(labelSet, svc.Spec.Selector)
		}
	}
	selector := labelSet.AsSelector()

	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return selector, nil
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return selector, nil
	}
	switch gv.WithKind(owner.Kind) {
	case rcKind:
		rc, err := src.ReplicationController(pod.Namespace, owner.Name)
		if err != nil {
			return nil, fmt.Errorf("getting replicationcontroller %s/%s: %w", pod.Namespace, owner.Name, err)
		}
		if rc != nil {
			labelSet = labels.Merge(labelSet, rc.Spec.Selector)
			selector = labelSet.AsSelector()
		}
	case rsKind:
		rs, err := src.ReplicaSet(pod.Namespace, owner.Name)
		if err != nil {
			return nil, fmt.Errorf("getting replicaset %s/%s: %w", pod.Namespace, owner.Name, err)
		}
		if rs != nil {
			selector = addOwnerSelector(selector, rs.Spec.Selector)
		}
	case ssKind:
		ss, err := src.StatefulSet(pod.Namespace, owner.Name)
		if err != nil {
			return nil, fmt.Errorf("getting statefulset %s/%s: %w", pod.Namespace, owner.Name, err)
		}
		if ss != nil {
			selector = addOwnerSelector(selector, ss.Spec.Selector)
		}
	}
	return selector, nil
}

// addOwnerSelector appends the requirements of an owner's selector. A nil
// owner selector parses to labels.Nothing, which has no requirements, so it
// adds nothing, exactly as upstream.
func addOwnerSelector(selector labels.Selector, owner *metav1.LabelSelector) labels.Selector {
	if owner != nil && len(owner.MatchExpressions) == 0 && len(owner.MatchLabels) > 0 && labelSelectorValid(owner) {
		// A Deployment's ReplicaSet: LabelSelectorAsSelector would make the
		// same sorted equalities, after checking the labels again.
		reqs, _ := labels.SelectorFromValidatedSet(owner.MatchLabels).Requirements()
		return selector.Add(reqs...)
	}
	other, err := metav1.LabelSelectorAsSelector(owner)
	if err != nil {
		return selector
	}
	if reqs, ok := other.Requirements(); ok {
		selector = selector.Add(reqs...)
	}
	return selector
}

// SelectorToLabelSelector converts a labels.Selector into the API form that
// selects exactly the same label sets through metav1.LabelSelectorAsSelector:
// the first equality on a key goes to matchLabels, a further equality on the
// same key to matchExpressions (In [v]), != to NotIn [v], and set-based
// requirements to matchExpressions. labels.Nothing() becomes nil, which is
// how the API spells "selects nothing"; an empty selector becomes an empty
// LabelSelector, which selects everything.
//
// Gt and Lt have no LabelSelector form, and a key or value the API would
// refuse cannot be written either; both are errors naming the requirement.
func SelectorToLabelSelector(sel labels.Selector) (*metav1.LabelSelector, error) {
	if sel == nil {
		return nil, errors.New("converting selector: nil selector")
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, nil
	}
	out := &metav1.LabelSelector{}
	for _, r := range reqs {
		key, vals := r.Key(), r.ValuesUnsorted()
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
			// A Service and the owner often both say app=web; the second
			// copy selects nothing less and only adds noise to the pod.
			if v, taken := out.MatchLabels[key]; taken && len(vals) == 1 && v == vals[0] {
				continue
			}
			if _, taken := out.MatchLabels[key]; !taken && len(vals) == 1 {
				if out.MatchLabels == nil {
					out.MatchLabels = map[string]string{}
				}
				out.MatchLabels[key] = vals[0]
				continue
			}
			out.MatchExpressions = append(out.MatchExpressions, expression(key, metav1.LabelSelectorOpIn, vals))
		case selection.In:
			out.MatchExpressions = append(out.MatchExpressions, expression(key, metav1.LabelSelectorOpIn, vals))
		case selection.NotEquals, selection.NotIn:
			out.MatchExpressions = append(out.MatchExpressions, expression(key, metav1.LabelSelectorOpNotIn, vals))
		case selection.Exists:
			out.MatchExpressions = append(out.MatchExpressions, expression(key, metav1.LabelSelectorOpExists, nil))
		case selection.DoesNotExist:
			out.MatchExpressions = append(out.MatchExpressions, expression(key, metav1.LabelSelectorOpDoesNotExist, nil))
		default:
			return nil, fmt.Errorf("converting selector: requirement %q has operator %q, which a LabelSelector cannot express", r.String(), r.Operator())
		}
	}
	// The API validates keys and values that labels.SelectorFromSet never
	// checked; refuse here what the apiserver would refuse later.
	if labelSelectorValid(out) {
		return out, nil
	}
	if _, err := metav1.LabelSelectorAsSelector(out); err != nil {
		return nil, fmt.Errorf("converting selector %q: %w", sel.String(), err)
	}
	return out, nil
}

func expression(key string, op metav1.LabelSelectorOperator, vals []string) metav1.LabelSelectorRequirement {
	vals = slices.Clone(vals)
	slices.Sort(vals)
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: slices.Compact(vals)}
}
