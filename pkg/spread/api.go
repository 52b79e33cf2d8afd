package spread

// This file is the package's contract with the webhook, the kubectl plugin,
// the parity test and the benchmarks. The functions that complete it:
//
//	func DefaultSelector(pod *v1.Pod, src SelectorSources) (labels.Selector, error)
//	func SelectorToLabelSelector(sel labels.Selector) (*metav1.LabelSelector, error)
//	func InjectConstraints(pod *v1.Pod, sel labels.Selector, defaults []v1.TopologySpreadConstraint) ([]v1.TopologySpreadConstraint, error)
//	func (s Snapshot) Check(pod *v1.Pod, opts Options) (*Result, error)
//	func NewIndex() *Index
//	func IndexFromSnapshot(s Snapshot) *Index
//	func (ix *Index) AddNode(n *v1.Node) / UpdateNode(old, new *v1.Node) / DeleteNode(n *v1.Node)
//	func (ix *Index) AddPod(p *v1.Pod) / UpdatePod(old, new *v1.Pod) / DeletePod(p *v1.Pod)
//	func (ix *Index) AddPodRecord(r PodRecord) / UpdatePodRecord(old, new PodRecord) / DeletePodRecord(r PodRecord)
//	func PodRecordOf(p *v1.Pod) PodRecord
//	func LabelSetOf(ls map[string]string) LabelSet
//	func ConstraintSetOf(cs []v1.TopologySpreadConstraint) ConstraintSet
//	func (ix *Index) Check(pod *v1.Pod, opts Options) (*Result, error)
//	func (ix *Index) Layout(pod *v1.Pod, detail MessageDetail) (*Layout, error)

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
)

// SelectorSources answers the lookups DefaultSelector needs. pkg/lookup
// implements it over the webhook's informer cache (with a live read on a
// miss) and over the kubectl plugin's in-memory store.
//
// A Get method returns (nil, nil) when the object does not exist: the
// scheduler then builds the selector without it. Any other error is returned
// by DefaultSelector, so that a broken lookup is never mistaken for "no owner".
type SelectorSources interface {
	// Services returns the Services of namespace.
	Services(namespace string) ([]*v1.Service, error)
	// ReplicationController returns namespace/name, or nil if there is none.
	ReplicationController(namespace, name string) (*v1.ReplicationController, error)
	// ReplicaSet returns namespace/name, or nil if there is none.
	ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error)
	// StatefulSet returns namespace/name, or nil if there is none.
	StatefulSet(namespace, name string) (*appsv1.StatefulSet, error)
}

// ServiceCandidates is implemented by SelectorSources that can narrow a
// namespace's Services to those that may select a pod. DefaultSelector uses
// it when it is there, so that its cost follows the pod's labels instead of
// the number of Services in the namespace.
type ServiceCandidates interface {
	// ServicesSelecting returns every Service of namespace that selects a
	// pod labelled podLabels, and may return others: DefaultSelector
	// matches each one. The Services must not be modified.
	ServicesSelecting(namespace string, podLabels map[string]string) ([]*v1.Service, error)
}

// Snapshot is a plain, complete view of the nodes and pods of a cluster, as
// the scheduler's cache would hold them. Pods that are Succeeded or Failed are
// ignored wherever they appear, as the scheduler's pod informer filters them
// out.
type Snapshot struct {
	Nodes []*v1.Node
	Pods  []*v1.Pod
	// Templates are the nodes an autoscaler can add. A later template of
	// the same name replaces an earlier one.
	Templates []Template
	// UnservedZones are the zones an autoscaler's node pool requires that
	// its node class cannot serve: a denial over zones names them.
	UnservedZones []UnservedZone
}

// Verdict is the outcome of a feasibility check.
type Verdict string

const (
	// VerdictNoHardConstraints: the pod has no DoNotSchedule constraint, so
	// spread cannot stop it.
	VerdictNoHardConstraints Verdict = "NoHardConstraints"
	// VerdictFeasible: at least one node passes every filter and every hard
	// constraint.
	VerdictFeasible Verdict = "Feasible"
	// VerdictFeasibleOnNewNode: no existing node is feasible, but the
	// fresh node of some template is (see Template): the scheduler leaves
	// the pod Pending and an autoscaler adds that node. The webhook admits
	// the pod with a warning.
	VerdictFeasibleOnNewNode Verdict = "FeasibleOnNewNode"
	// VerdictUnsatisfiable: some node or template passes node affinity,
	// nodeSelector and taints, but none of those also meets the hard
	// spread constraints. This is the case the webhook denies (or warns
	// about).
	VerdictUnsatisfiable Verdict = "Unsatisfiable"
	// VerdictNoCandidateNodes: no node and no template passes node
	// affinity, nodeSelector and taints at all. That is not a spread problem; the pod is allowed.
	VerdictNoCandidateNodes Verdict = "NoCandidateNodes"
)

// ExclusionReason says why a node took no part in a constraint's counting,
// or why it is not a feasible node. The values are exported constants so
// callers and tests can match on them.
type ExclusionReason string

const (
	ReasonNodeAffinity       ExclusionReason = "does not match the pod's node affinity or nodeSelector"
	ReasonUntoleratedTaint   ExclusionReason = "has a taint the pod does not tolerate"
	ReasonUnschedulable      ExclusionReason = "is cordoned (spec.unschedulable)"
	ReasonMissingTopologyKey ExclusionReason = "lacks a topology key of the pod's hard constraints"
	ReasonSkew               ExclusionReason = "would exceed maxSkew"
)

// ExcludedNode is a node that is not feasible, or took no part in counting,
// with the first reason found.
type ExcludedNode struct {
	Name   string          `json:"name"`
	Reason ExclusionReason `json:"reason"`
	// Detail is the taint, the missing key or the skew arithmetic.
	Detail string `json:"detail,omitempty"`
}

// ConstraintResult is the counting for one hard constraint, as PreFilter
// computes it.
type ConstraintResult struct {
	// Index is the position of the constraint in
	// pod.spec.topologySpreadConstraints.
	Index              int                              `json:"index"`
	TopologyKey        string                           `json:"topologyKey"`
	MaxSkew            int32                            `json:"maxSkew"`
	WhenUnsatisfiable  v1.UnsatisfiableConstraintAction `json:"whenUnsatisfiable"`
	MinDomains         int32                            `json:"minDomains"`
	NodeAffinityPolicy v1.NodeInclusionPolicy           `json:"nodeAffinityPolicy"`
	NodeTaintsPolicy   v1.NodeInclusionPolicy           `json:"nodeTaintsPolicy"`
	// Selector is the constraint's selector after matchLabelKeys were
	// merged, in labels.Selector string form.
	Selector string `json:"selector"`
	// SelfMatch is 1 when the incoming pod matches the selector, else 0.
	SelfMatch int `json:"selfMatch"`
	// GlobalMin is the smallest domain count, or 0 when there are fewer
	// domains than minDomains.
	GlobalMin int `json:"globalMin"`
	// Domains maps counted domains (topology values) to their number of
	// matching pods. With Options.Explain it holds every counted domain;
	// without, only those with at least one matching pod, so that a check
	// at hostname level does not list thousands of empty nodes. It is never
	// nil.
	Domains map[string]int `json:"domains"`
	// DomainCount is the number of counted domains, those with 0 matching
	// pods included; minDomains is compared with it.
	DomainCount int `json:"domainCount"`
	// AddedDomains are the values of TopologyKey, sorted, that a fresh
	// node of a template the pod's taints, affinity and topology keys
	// allow would add as new domains: the domains the autoscaler sources
	// can add beside those the scheduler counts. A template without the
	// key's value (a fresh hostname) adds none here. Filled only with
	// Options.Explain.
	AddedDomains []string `json:"addedDomains,omitempty"`
	// Excluded lists nodes that took no part in this constraint's counting
	// (inclusion policies, missing keys). Filled only with
	// Options.Explain.
	Excluded []ExcludedNode `json:"excluded,omitempty"`
}

// Result is the outcome of Check.
type Result struct {
	Verdict Verdict `json:"verdict"`
	// Constraints holds one entry per hard constraint, in the pod's order.
	Constraints []ConstraintResult `json:"constraints"`
	// FeasibleNodes is the sorted set of feasible node names. Filled only
	// with Options.Explain (listing it costs time proportional to the
	// number of nodes); otherwise only FeasibleCount is set.
	FeasibleNodes []string `json:"feasibleNodes,omitempty"`
	// FeasibleCount is the number of feasible nodes, with or without
	// Explain: both checkers always count them all.
	FeasibleCount int `json:"feasibleCount"`
	// Excluded lists the nodes that are not feasible, with the reason.
	// Filled only with Options.Explain.
	Excluded []ExcludedNode `json:"excluded,omitempty"`
	// FeasibleTemplates is the sorted set of the names of the templates
	// whose fresh node is feasible. Filled with Options.Explain, and for
	// VerdictFeasibleOnNewNode (without Explain, templates are only
	// checked when no existing node is feasible).
	FeasibleTemplates []string `json:"feasibleTemplates,omitempty"`
	// ExcludedTemplates lists the templates that are not feasible, with
	// the reason. Filled only with Options.Explain.
	ExcludedTemplates []ExcludedNode `json:"excludedTemplates,omitempty"`
	// Message is a sentence a person can act on: for Unsatisfiable it names
	// the constraint (spec.topologySpreadConstraints[i]), the per-domain
	// counts, the global minimum, the excluded nodes and why, and one
	// concrete remedy. For FeasibleOnNewNode it names the domains the new
	// node would add to and, under DetailNodes, its template. It is filled for
	// Unsatisfiable, FeasibleOnNewNode and NoCandidateNodes, with or
	// without Explain.
	Message string `json:"message,omitempty"`
	// Unserved are the zones an autoscaler's node pool requires that its
	// node class cannot serve, when a hard constraint spreads over zones:
	// what the messages' closing sentence names (MessageDetail's
	// UnservedSentence), for the callers that word a message of their
	// own. Left out of JSON: it names NodePools, which a tenant may not
	// read.
	Unserved []UnservedZone `json:"-"`
}

// Options tunes Check.
type Options struct {
	// Explain fills FeasibleNodes and the Excluded lists, which cost time
	// proportional to the number of nodes. A denial's message does not need
	// it: the webhook leaves it off, the kubectl plugin always sets it.
	Explain bool
	// Detail says what the message may name: nodes (the default) or
	// domains only.
	Detail MessageDetail
}

// MessageDetail is how much of the cluster a message shows.
type MessageDetail string

// The message detail levels.
const (
	// DetailNodes names nodes, their taints and the labels they lack: what
	// an operator needs, and what `kubectl-spread check` shows.
	DetailNodes MessageDetail = "nodes"
	// DetailDomains gives per-domain counts and reasons only: no node
	// names, node labels but the domains counted, taint keys or values,
	// nor the templates of the nodes an autoscaler can add. A tenant who
	// creates pods in one namespace usually may not read Nodes, and a
	// message should not tell them another tenant's node names and
	// taints. A constraint whose domains are nodes (kubernetes.io/hostname)
	// is summarised as how many nodes hold each count. message_detail.go
	// says exactly what each detail names.
	DetailDomains MessageDetail = "domains"
)

// Checker decides feasibility for a pod. Both the incremental Index and
// the plain Snapshot implement it, and they must agree on every input.
type Checker interface {
	Check(pod *v1.Pod, opts Options) (*Result, error)
}

var (
	_ Checker = (*Index)(nil)
	_ Checker = Snapshot{}
)
