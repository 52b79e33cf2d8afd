// Package engine is the one admission pipeline of spreadguard: which policy
// applies to a pod, what to inject into it, and whether its hard spread
// constraints can be met. The webhook's handlers and `kubectl-spread check`
// both call it, so a decision made offline is the decision the webhook makes.
//
// The package is pure: lookups come in through Sources and counts through a
// spread.Checker, so callers decide whether they are backed by informers, a
// live API server or a file.
package engine

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Sources is everything a decision reads besides the node and pod counts.
type Sources interface {
	spread.SelectorSources
	policy.Lister
}

// Config is the part of the server's configuration that changes decisions.
type Config struct {
	// DefaultAction applies when the pod's policy sets no action, and to
	// pods that no policy applies to.
	DefaultAction v1alpha1.ValidationAction
	// ExcludedNamespaces are never mutated nor validated.
	ExcludedNamespaces []string
	// NamespaceSelector is the webhook configurations' extra condition on
	// the namespaces they send (the chart's webhook.namespaceSelector);
	// nil selects every namespace.
	NamespaceSelector labels.Selector
	// MessageDetail is what a denial may name: nodes (the zero value) or
	// domains only (see spread.DetailDomains).
	MessageDetail spread.MessageDetail
}

// SkipReason says why a pod is left as it is: not mutated, or not checked.
// Each reason carries its message, a short phrase that the webhook answers
// and logs and kubectl-spread shows (String), and the label that counts it
// in spreadguard_skipped_pods_total (Label). The reasons are a closed set,
// so the series are few.
type SkipReason uint8

// The reasons a pod is left as it is; NotSkipped, the zero value, is none.
const (
	NotSkipped SkipReason = iota
	SkipExcludedNamespace
	SkipAnnotation
	SkipOwnConstraints
	SkipUpToDate
	SkipNoPolicy
	SkipNoSelector
	SkipBound
	SkipOtherScheduler
	SkipGated
	// The three below are never mutated: each runs on one node chosen in
	// advance, where spread constraints can only keep it from running (a
	// Service selecting DaemonSet pods would otherwise make them "belong"
	// to it).
	SkipDaemonSet
	SkipMirror
	SkipPinnedNode

	// skipReasonCount is the number of reasons, NotSkipped included: a
	// test holds skipReasons to one row for each.
	skipReasonCount
)

// skipReasons holds each reason's label and message, by reason.
var skipReasons = [skipReasonCount]struct{ label, message string }{
	NotSkipped:            {},
	SkipExcludedNamespace: {"excluded_namespace", "namespace is excluded"},
	SkipAnnotation:        {"annotation", "pod is annotated " + v1alpha1.AnnotationSkip + `: "true"`},
	SkipOwnConstraints:    {"own_constraints", "pod declares its own topologySpreadConstraints"},
	SkipUpToDate:          {"up_to_date", "the constraints spreadguard injected into the pod are up to date"},
	SkipNoPolicy:          {"no_policy", "no SpreadPolicy or ClusterSpreadPolicy applies to the pod"},
	SkipNoSelector:        {"no_selector", "no Service, ReplicationController, ReplicaSet or StatefulSet selects the pod"},
	SkipBound:             {"bound", "pod is already bound to a node (spec.nodeName), so no scheduler places it"},
	SkipOtherScheduler:    {"other_scheduler", "pod is placed by another scheduler (spec.schedulerName)"},
	SkipGated:             {"gated", "pod has scheduling gates; it is checked when the last one is removed"},
	SkipDaemonSet:         {"daemonset", "pod is controlled by a DaemonSet, which places one pod per node"},
	SkipMirror:            {"mirror", "pod is a mirror pod (annotation " + v1.MirrorPodAnnotationKey + ") of a static pod the kubelet runs"},
	SkipPinnedNode:        {"pinned_node", "pod's required node affinity pins it to one node by metadata.name"},
}

// SkipReasons returns every reason a pod is left as it is, NotSkipped
// excluded.
func SkipReasons() []SkipReason {
	out := make([]SkipReason, 0, len(skipReasons)-1)
	for r := range skipReasons[1:] {
		out = append(out, SkipReason(r+1))
	}
	return out
}

// String is the reason's message; "" for NotSkipped.
func (r SkipReason) String() string {
	if int(r) >= len(skipReasons) {
		return fmt.Sprintf("SkipReason(%d)", r)
	}
	return skipReasons[r].message
}

// Label is the reason's value of the reason label of
// spreadguard_skipped_pods_total; "" for NotSkipped.
func (r SkipReason) Label() string {
	if int(r) >= len(skipReasons) {
		return fmt.Sprintf("skip_reason_%d", r)
	}
	return skipReasons[r].label
}

// GatedWarning is returned for a pod created with scheduling gates and hard
// spread constraints: its node selector and affinity may still be narrowed
// while it is gated (KEP-3838), so judging it now could refuse a pod that
// will fit, and the scheduler does not place it before the gates are gone.
const GatedWarning = "spreadguard: this pod has schedulingGates, so its topology spread constraints " +
	"were not checked now; they are checked when the last gate is removed"

// NoCandidateNodesWarning is returned when no node passes the pod's node
// affinity and taints: the pod will stay Pending, but not because of spread.
const NoCandidateNodesWarning = "no node passes this pod's node affinity, nodeSelector and taint tolerations; " +
	"it will stay Pending for reasons other than topology spread"

// unservedNote is the sentence a warning ends with when the pod may wait
// for a node in a zone an autoscaler's node pool requires and cannot serve
// (spread.Result.Unserved), worded at cfg's detail; "" otherwise.
func unservedNote(res *spread.Result, cfg Config) string {
	if len(res.Unserved) == 0 {
		return ""
	}
	return ". " + cfg.MessageDetail.UnservedSentence(res.Unserved)
}

// NewNodeWarningPrefix starts the warning of a pod that no current node
// takes but a node an autoscaler can add would; the check's message
// follows it.
const NewNodeWarningPrefix = "admitted: "

// ErrLookup is matched (errors.Is) by every error of Mutate and Validate
// that came from reading Sources: an owner, a Service, a namespace or the
// policies. Callers tell a failed read, often passing (an API server
// restarting), from a fault of the decision itself.
var ErrLookup = errors.New("lookup failed")

// lookupError marks err as a failed lookup without changing its text.
type lookupError struct{ err error }

func (e lookupError) Error() string   { return e.err.Error() }
func (e lookupError) Unwrap() []error { return []error{ErrLookup, e.err} }

// Mutation is the outcome of Mutate.
type Mutation struct {
	// Pod is the mutated pod, nil when nothing changes: a copy of the pod
	// given to Mutate whose two members the mutation writes
	// (spec.topologySpreadConstraints, metadata.annotations) are its own,
	// and every other member is shared with that pod. Read it; never change
	// it.
	Pod *v1.Pod
	// Policy is the policy that applies to the pod, if any.
	Policy *policy.Applied
	// Injected are the constraints written into Pod.
	Injected []v1.TopologySpreadConstraint
	// Skipped says why nothing was injected.
	Skipped SkipReason
}

// Mutate computes the default constraints for pod (whose Namespace must be
// set). It never changes pod itself.
func Mutate(pod *v1.Pod, src Sources, cfg Config) (*Mutation, error) {
	if reason := skipReason(pod, src, cfg); reason != NotSkipped {
		return &Mutation{Skipped: reason}, nil
	}
	if reason := pinnedReason(pod); reason != NotSkipped {
		return &Mutation{Skipped: reason}, nil
	}
	// As the scheduler does, a pod that declares any constraint, hard or
	// soft, gets no defaults; unless spreadguard wrote them itself.
	current := pod.Spec.TopologySpreadConstraints
	_, ours := pod.Annotations[v1alpha1.AnnotationPolicy]
	if len(current) > 0 && !ours {
		return &Mutation{Skipped: SkipOwnConstraints}, nil
	}
	applied, injected, err := defaults(pod, src)
	if err != nil {
		return nil, err
	}
	switch {
	case len(current) > 0:
		return reinvoked(pod, applied, injected), nil
	case applied == nil:
		return &Mutation{Skipped: SkipNoPolicy}, nil
	case len(injected) == 0:
		return &Mutation{Policy: applied, Skipped: SkipNoSelector}, nil
	}
	return withDefaults(pod, applied, injected), nil
}

// defaults returns the policy that applies to pod and the constraints it
// would write into pod if pod declared none: its constraints with the
// selector derived from pod's Services and controller.
func defaults(pod *v1.Pod, src Sources) (*policy.Applied, []v1.TopologySpreadConstraint, error) {
	applied, err := policy.Resolve(pod, src)
	if err != nil {
		return nil, nil, lookupError{fmt.Errorf("resolving the policy: %w", err)}
	}
	if applied == nil {
		return nil, nil, nil
	}
	sel, err := spread.DefaultSelector(pod, src)
	if err != nil {
		return nil, nil, lookupError{fmt.Errorf("building the default selector: %w", err)}
	}
	bare := *pod
	bare.Spec.TopologySpreadConstraints = nil
	injected, err := spread.InjectConstraints(&bare, sel, applied.Constraints)
	if err != nil {
		return nil, nil, fmt.Errorf("injecting the constraints of %s %s: %w", applied.Kind, applied.Name, err)
	}
	return applied, injected, nil
}

// withDefaults is the mutation that writes injected and the policy
// annotation into a copy of pod. The copy is shallow but for the two
// members it writes: a deep copy would copy every container and volume to
// write two members, and every caller only reads the result.
func withDefaults(pod *v1.Pod, applied *policy.Applied, injected []v1.TopologySpreadConstraint) *Mutation {
	out := *pod
	out.Spec.TopologySpreadConstraints = injected
	out.Annotations = make(map[string]string, len(pod.Annotations)+1)
	maps.Copy(out.Annotations, pod.Annotations)
	out.Annotations[v1alpha1.AnnotationPolicy] = applied.Name
	return &Mutation{Pod: &out, Policy: applied, Injected: injected}
}

// reinvoked decides for a pod that carries spreadguard's policy annotation
// and constraints: with reinvocationPolicy IfNeeded the API server calls the
// mutating webhook again after a later webhook changed the pod, and if that
// one changed the labels, the selector derived the first time may no longer
// be the pod's. The constraints are replaced by fresh ones when they are
// still the ones the named policy writes (equal but for the derived
// labelSelector and the matchLabelKeys folded into it); constraints that
// differ otherwise, or come from a policy that no longer applies, were
// written by someone else and are left alone.
func reinvoked(pod *v1.Pod, applied *policy.Applied, fresh []v1.TopologySpreadConstraint) *Mutation {
	current := pod.Spec.TopologySpreadConstraints
	switch {
	case applied == nil || applied.Name != pod.Annotations[v1alpha1.AnnotationPolicy]:
		return &Mutation{Policy: applied, Skipped: SkipOwnConstraints}
	case len(fresh) == 0 || !sameButSelector(current, fresh):
		return &Mutation{Policy: applied, Skipped: SkipOwnConstraints}
	case equality.Semantic.DeepEqual(current, fresh):
		return &Mutation{Policy: applied, Skipped: SkipUpToDate}
	}
	return withDefaults(pod, applied, fresh)
}

// sameButSelector reports whether a and b differ at most in the parts a
// selector is derived into: labelSelector and matchLabelKeys.
func sameButSelector(a, b []v1.TopologySpreadConstraint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.LabelSelector, y.LabelSelector = nil, nil
		x.MatchLabelKeys, y.MatchLabelKeys = nil, nil
		if !equality.Semantic.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// Validation is the outcome of Validate.
type Validation struct {
	// Allowed is false only for a Deny.
	Allowed bool
	// Action is what was done about an unsatisfiable pod: Deny, Warn or
	// Audit; empty when the pod can be placed or was not checked.
	Action v1alpha1.ValidationAction
	// Policy is the policy whose action applied, nil when the default
	// action did (no policy applies to the pod).
	Policy *policy.Applied
	// Message explains an unsatisfiable pod, with the numbers.
	Message string
	// Warnings go back to the client as admission warnings.
	Warnings []string
	// Result is the feasibility check, nil when the pod was not checked.
	Result *spread.Result
	// Skipped says why the pod was not checked.
	Skipped SkipReason
	// NewNode is set when no current node takes the pod but a node an
	// autoscaler can add would: it is admitted with a warning, so that it
	// stays Pending and the autoscaler adds the node.
	NewNode bool
}

// Validate decides whether pod, as it will be stored, can be placed. With
// explain the result lists feasible and excluded nodes; without it the
// result carries counts, the verdict and, for an unsatisfiable pod, the
// message.
func Validate(pod *v1.Pod, src Sources, checker spread.Checker, cfg Config, explain bool) (*Validation, error) {
	if reason := skipReason(pod, src, cfg); reason != NotSkipped {
		return &Validation{Allowed: true, Skipped: reason}, nil
	}
	if pod.Spec.NodeName != "" {
		return &Validation{Allowed: true, Skipped: SkipBound}, nil
	}
	if s := pod.Spec.SchedulerName; s != "" && s != v1.DefaultSchedulerName {
		return &Validation{Allowed: true, Skipped: SkipOtherScheduler}, nil
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		v := &Validation{Allowed: true, Skipped: SkipGated}
		if hasHardConstraint(pod) {
			v.Warnings = []string{GatedWarning}
		}
		return v, nil
	}

	res, err := checker.Check(pod, spread.Options{Explain: explain, Detail: cfg.MessageDetail})
	if err != nil {
		return nil, fmt.Errorf("checking the spread constraints: %w", err)
	}
	// An unsatisfiable pod's message is complete without Explain: the
	// checkers keep what it needs on the first pass (the spread tests hold
	// the two messages equal), so a denial costs one check.

	v := &Validation{Allowed: true, Result: res}
	switch res.Verdict {
	case spread.VerdictNoCandidateNodes:
		v.Warnings = []string{NoCandidateNodesWarning + unservedNote(res, cfg)}
		return v, nil
	case spread.VerdictFeasibleOnNewNode:
		v.NewNode = true
		v.Warnings = []string{NewNodeWarningPrefix + res.Message}
		return v, nil
	case spread.VerdictUnsatisfiable:
	default:
		return v, nil
	}

	applied, err := policy.Resolve(pod, src)
	if err != nil {
		return nil, lookupError{fmt.Errorf("resolving the policy: %w", err)}
	}
	v.Action = cfg.DefaultAction
	if applied != nil {
		v.Policy = applied
		if applied.Action != "" {
			v.Action = applied.Action
		}
	}
	v.Message = res.Message
	switch v.Action {
	case v1alpha1.ActionWarn:
		v.Warnings = []string{res.Message}
	case v1alpha1.ActionAudit:
	default:
		v.Action = v1alpha1.ActionDeny
		v.Allowed = false
	}
	return v, nil
}

// Review is a pod's whole admission: the mutation, then the validation of
// the pod as it would be stored.
type Review struct {
	Mutation   *Mutation
	Validation *Validation
	// Pod is the pod as it would be stored.
	Pod *v1.Pod
}

// ReviewPod runs Mutate then Validate with explanations, as the apiserver
// calls the mutating and then the validating webhook.
func ReviewPod(pod *v1.Pod, src Sources, checker spread.Checker, cfg Config) (*Review, error) {
	m, err := Mutate(pod, src, cfg)
	if err != nil {
		return nil, err
	}
	stored := pod
	if m.Pod != nil {
		stored = m.Pod
	}
	v, err := Validate(stored, src, checker, cfg, true)
	if err != nil {
		return nil, err
	}
	return &Review{Mutation: m, Validation: v, Pod: stored}, nil
}

func hasHardConstraint(pod *v1.Pod) bool {
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			return true
		}
	}
	return false
}

// pinnedReason says why pod runs on one node chosen before scheduling, or
// NotSkipped when the scheduler picks among many.
func pinnedReason(pod *v1.Pod) SkipReason {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") {
		return SkipDaemonSet
	}
	if _, ok := pod.Annotations[v1.MirrorPodAnnotationKey]; ok {
		return SkipMirror
	}
	if pinnedByName(pod.Spec.Affinity) {
		return SkipPinnedNode
	}
	return NotSkipped
}

// pinnedByName reports whether the required node affinity admits one node
// only, by metadata.name (matchFields In [name]), as the DaemonSet
// controller writes it. Terms are ORed, so every term must pin, and pin the
// same node.
func pinnedByName(a *v1.Affinity) bool {
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	node := ""
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		pin := ""
		for _, f := range t.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == v1.NodeSelectorOpIn && len(f.Values) == 1 {
				pin = f.Values[0]
			}
		}
		if pin == "" || (node != "" && pin != node) {
			return false
		}
		node = pin
	}
	return node != ""
}

// Scope is the namespaces cfg serves: those the webhook configurations
// send, and the only ones the keeper and spread health act in.
func (c Config) Scope() policy.Scope {
	return policy.Scope{Excluded: c.ExcludedNamespaces, Selector: c.NamespaceSelector}
}

func skipReason(pod *v1.Pod, src policy.Lister, cfg Config) SkipReason {
	if !cfg.Scope().Serves(pod.Namespace, namespaceOf(src, pod.Namespace)) {
		return SkipExcludedNamespace
	}
	if pod.Annotations[v1alpha1.AnnotationSkip] == "true" {
		return SkipAnnotation
	}
	return NotSkipped
}

// namespaceOf returns the namespace called name, nil when src cannot tell:
// it is then judged by its name alone.
func namespaceOf(src policy.Lister, name string) *v1.Namespace {
	ns, err := src.Namespace(name)
	if err != nil {
		return nil
	}
	return ns
}
