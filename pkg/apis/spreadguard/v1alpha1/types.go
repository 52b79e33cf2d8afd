package v1alpha1

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ValidationAction is what the validating webhook does with a pod whose hard
// topology spread constraints cannot be met on any node.
// +kubebuilder:validation:Enum=Deny;Warn;Audit
type ValidationAction string

const (
	// ActionDeny refuses the pod, with a message that shows the numbers.
	ActionDeny ValidationAction = "Deny"
	// ActionWarn admits the pod and returns the same message as a warning.
	ActionWarn ValidationAction = "Warn"
	// ActionAudit admits the pod silently and records the verdict in the
	// webhook's metrics and, as the audit annotation
	// <webhook name>/unsatisfiable, in the API server's audit log.
	ActionAudit ValidationAction = "Audit"
)

// DeletionCostMode says whether spreadguard keeps the deletion cost
// (controller.kubernetes.io/pod-deletion-cost) of the pods a policy
// governs.
// +kubebuilder:validation:Enum=Enabled;Disabled
type DeletionCostMode string

const (
	// DeletionCostEnabled keeps the costs, so that the ReplicaSet
	// controller's scale-downs keep the spread.
	DeletionCostEnabled DeletionCostMode = "Enabled"
	// DeletionCostDisabled leaves the costs as they are: for workloads whose
	// costs another controller sets, or that should scale down as
	// Kubernetes alone would.
	DeletionCostDisabled DeletionCostMode = "Disabled"
)

// Constraint is one topology spread constraint a policy writes into a pod:
// the fields of v1.TopologySpreadConstraint except labelSelector, which
// spreadguard derives per pod from the Services and controller that select
// it, as kube-scheduler's DefaultSelector does.
//
// LabelSelector is declared only so that the schema can refuse it with a
// message: a field unknown to the schema would be pruned silently, and the
// author would believe their selector was in force.
//
// +kubebuilder:validation:XValidation:rule="!has(self.labelSelector)",message="labelSelector must not be set: spreadguard derives each pod's selector from the Services and controller that select it, as kube-scheduler's DefaultSelector does. Remove labelSelector; use matchLabelKeys to narrow the selector by the pod's own labels."
// +kubebuilder:validation:XValidation:rule="!has(self.minDomains) || self.whenUnsatisfiable == 'DoNotSchedule'",message="minDomains can only be used with whenUnsatisfiable: DoNotSchedule. Remove minDomains or set whenUnsatisfiable to DoNotSchedule."
type Constraint struct {
	// MaxSkew is the largest allowed difference between the number of
	// matching pods in a domain and the global minimum.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxSkew int32 `json:"maxSkew"`

	// TopologyKey is the node label whose values are the domains, e.g.
	// topology.kubernetes.io/zone. Nodes without it take no part.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="topologyKey must be a node label key: an optional DNS subdomain and '/', then a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. topology.kubernetes.io/zone"
	TopologyKey string `json:"topologyKey"`

	// WhenUnsatisfiable is DoNotSchedule (a hard constraint, which the
	// webhook also validates) or ScheduleAnyway (a scoring preference).
	// +required
	// +kubebuilder:validation:Enum=DoNotSchedule;ScheduleAnyway
	WhenUnsatisfiable v1.UnsatisfiableConstraintAction `json:"whenUnsatisfiable"`

	// MinDomains is the number of eligible domains below which the global
	// minimum is taken to be 0. Only with whenUnsatisfiable: DoNotSchedule.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinDomains *int32 `json:"minDomains,omitempty"`

	// NodeAffinityPolicy says whether the pod's nodeAffinity and
	// nodeSelector limit the nodes counted. Unset means Honor.
	// +optional
	// +kubebuilder:validation:Enum=Honor;Ignore
	NodeAffinityPolicy *v1.NodeInclusionPolicy `json:"nodeAffinityPolicy,omitempty"`

	// NodeTaintsPolicy says whether nodes with taints the pod does not
	// tolerate are left out of the counting. Unset in a pod means Ignore;
	// spreadguard injects Honor when the policy leaves it unset, so that
	// cordoned and tainted nodes do not pin the global minimum at 0.
	// +optional
	// +kubebuilder:validation:Enum=Honor;Ignore
	NodeTaintsPolicy *v1.NodeInclusionPolicy `json:"nodeTaintsPolicy,omitempty"`

	// MatchLabelKeys are pod label keys whose values, taken from the
	// incoming pod, are ANDed with the derived selector (e.g.
	// pod-template-hash, to spread each rollout on its own).
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=317
	MatchLabelKeys []string `json:"matchLabelKeys,omitempty"`

	// LabelSelector is forbidden: spreadguard derives it per pod. It exists
	// in the schema only so that setting it is refused with a clear message
	// instead of being pruned silently.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// ToTopologySpreadConstraint returns the constraint as a pod would carry
// it, without a label selector (the caller adds the derived one). Pointer
// fields are copied so the result never aliases a cached policy.
func (c Constraint) ToTopologySpreadConstraint() v1.TopologySpreadConstraint {
	out := v1.TopologySpreadConstraint{
		MaxSkew:           c.MaxSkew,
		TopologyKey:       c.TopologyKey,
		WhenUnsatisfiable: c.WhenUnsatisfiable,
	}
	if c.MinDomains != nil {
		v := *c.MinDomains
		out.MinDomains = &v
	}
	if c.NodeAffinityPolicy != nil {
		v := *c.NodeAffinityPolicy
		out.NodeAffinityPolicy = &v
	}
	if c.NodeTaintsPolicy != nil {
		v := *c.NodeTaintsPolicy
		out.NodeTaintsPolicy = &v
	}
	if c.MatchLabelKeys != nil {
		out.MatchLabelKeys = append([]string{}, c.MatchLabelKeys...)
	}
	return out
}

// ValidationSpec configures the validating webhook for the pods a policy
// applies to.
type ValidationSpec struct {
	// Action is Deny, Warn or Audit. Unset means the webhook's default,
	// configured in the chart.
	// +optional
	Action ValidationAction `json:"action,omitempty"`
}

// PolicySpec is what every policy, namespaced or cluster-wide, says: which
// pods, how strongly, which constraints, and what validation does.
type PolicySpec struct {
	// PodSelector selects the pods the policy applies to among those in its
	// scope. Unset selects every pod; so does an empty selector.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="every matchExpressions operator must be In, NotIn, Exists or DoesNotExist (case-sensitive)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="In and NotIn need at least one value; Exists and DoesNotExist take none"
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// Priority decides between policies that match the same pod: the
	// highest wins; at equal priority a SpreadPolicy wins over a
	// ClusterSpreadPolicy, then the name decides. Policies never merge.
	// +optional
	// +kubebuilder:default=0
	Priority int32 `json:"priority,omitempty"`

	// Constraints are written into the pods the policy applies to that
	// declare no topologySpreadConstraints of their own. No two may share
	// topologyKey and whenUnsatisfiable; the apiserver refuses such pods.
	// +required
	// +listType=map
	// +listMapKey=topologyKey
	// +listMapKey=whenUnsatisfiable
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Constraints []Constraint `json:"constraints"`

	// Validation configures what the validating webhook does when the
	// pod's hard constraints cannot be met.
	// +optional
	Validation *ValidationSpec `json:"validation,omitempty"`

	// DeletionCost says whether spreadguard keeps the
	// controller.kubernetes.io/pod-deletion-cost annotation of the running
	// pods of the ReplicaSets and ReplicationControllers the policy governs,
	// so that a scale-down deletes first the pods whose loss keeps the
	// spread. Enabled (the default) keeps it; Disabled leaves the costs as
	// they are. A cost another field manager set is never overwritten
	// either way.
	// +optional
	// +kubebuilder:default=Enabled
	DeletionCost DeletionCostMode `json:"deletionCost,omitempty"`

	// Fallback lets the hard constraints this policy injected bend, for one
	// workload at a time, over the domains that can take no more of its pods
	// (a zone out of capacity, a node group at its maximum, a quota), and
	// come back when they can. Unset, the default, keeps the spread strict:
	// a replica the spread sends to a full domain waits there, as the
	// scheduler alone would keep it. Constraints a pod declares itself are
	// never relaxed; see docs/fallback.md.
	// +optional
	Fallback *FallbackSpec `json:"fallback,omitempty"`
}

// FallbackSpec says when a policy's injected hard spread bends for a
// workload, and how far.
type FallbackSpec struct {
	// After is how long a replica may stay stranded (unschedulable because
	// the spread sends it to domains where no node fits it, with no
	// autoscaler still trying to add one there) before the fallback starts.
	// An autoscaler that reports it cannot add a node there ends the wait at
	// once. The default, 10m, outlasts a node launch and Karpenter's
	// 3-minute memory of unavailable offerings, and stays under
	// cluster-autoscaler's 15-minute max-node-provision-time, after which it
	// reports the failure itself.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="after must be a duration of at least 10s, such as 10m"
	After *metav1.Duration `json:"after,omitempty"`

	// MaxDomains is how many domains of one workload may be in fallback at
	// once. A wider outage keeps the spread strict (and the stranded
	// replicas are reported), since relaxing it over most domains would
	// leave little of the spread the policy asks for.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	MaxDomains *int32 `json:"maxDomains,omitempty"`
}

// DefaultFallbackAfter is FallbackSpec.After when unset.
const DefaultFallbackAfter = 10 * time.Minute

// DefaultFallbackMaxDomains is FallbackSpec.MaxDomains when unset.
const DefaultFallbackMaxDomains = 1

// AfterOrDefault is After, or DefaultFallbackAfter when unset.
func (f *FallbackSpec) AfterOrDefault() time.Duration {
	if f == nil || f.After == nil {
		return DefaultFallbackAfter
	}
	return f.After.Duration
}

// MaxDomainsOrDefault is MaxDomains, or DefaultFallbackMaxDomains when
// unset.
func (f *FallbackSpec) MaxDomainsOrDefault() int {
	if f == nil || f.MaxDomains == nil {
		return DefaultFallbackMaxDomains
	}
	return int(*f.MaxDomains)
}

// SpreadPolicySpec is the spec of a SpreadPolicy. It is PolicySpec itself,
// so `SpreadPolicySpec{PodSelector: ...}` and `PolicySpec{...}` are one type.
type SpreadPolicySpec = PolicySpec

// ClusterSpreadPolicySpec is the spec of a ClusterSpreadPolicy: a PolicySpec
// plus the namespaces it reaches.
type ClusterSpreadPolicySpec struct {
	PolicySpec `json:",inline"`

	// NamespaceSelector selects the namespaces whose pods the policy may
	// apply to. Unset selects every namespace; so does an empty selector.
	// Every namespace carries the label kubernetes.io/metadata.name, so a
	// policy can name namespaces.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="every matchExpressions operator must be In, NotIn, Exists or DoesNotExist (case-sensitive)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="In and NotIn need at least one value; Exists and DoesNotExist take none"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// PolicyStatus is what spreadguard's audit last found for a policy: whether
// it can work at all, and how the workloads whose pods it selects are
// spread now. The leader replica writes it.
type PolicyStatus struct {
	// ObservedGeneration is the generation of the spec the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions hold the Ready condition: False, with a reason and a
	// message naming the field, when the policy cannot do its work (an
	// invalid spec, a topology key no node carries, a podSelector no pod
	// matches, a minDomains out of reach, a zone an autoscaler's node pool
	// requires but cannot serve).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Workloads is the number of workloads (Deployments, StatefulSets,
	// ReplicaSets, ReplicationControllers, Services' own pods) the policy
	// applies to that have pods.
	// +optional
	Workloads int32 `json:"workloads"`
	// Spread is the number of them whose pods are spread within maxSkew.
	// +optional
	Spread int32 `json:"spread"`
	// Skewed is the number of them whose skew exceeds a hard constraint's
	// maxSkew, or a soft constraint's by more than maxSkew.
	// +optional
	Skewed int32 `json:"skewed"`
	// Uncovered is the number of them whose pods carry no topology spread
	// constraint: created before spreadguard, or skipped.
	// +optional
	Uncovered int32 `json:"uncovered"`
}

// ConditionReady is the type of the condition that says whether a policy
// can do its work.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonAudited: the audit found nothing wrong with the policy.
	ReasonAudited = "Audited"
	// ReasonUnknownTopologyKey: no node carries a constraint's topology
	// key, so the constraint has no domain.
	ReasonUnknownTopologyKey = "UnknownTopologyKey"
	// ReasonNoPodSelected: the podSelector matches no pod in the policy's
	// scope.
	ReasonNoPodSelected = "NoPodSelected"
	// ReasonInvalid: the spec has a problem the schema let through (an
	// older CRD, a selector that does not parse); the webhook passes over
	// the policy.
	ReasonInvalid = "Invalid"
	// ReasonMinDomainsOutOfReach: a hard constraint's minDomains exceeds
	// the domains the nodes and every node an autoscaler can add reach, so
	// the pods beyond stay Pending.
	ReasonMinDomainsOutOfReach = "MinDomainsOutOfReach"
	// ReasonZoneNotServed: a hard constraint spreads over zones, and an
	// autoscaler's node pool requires a zone its node class cannot serve,
	// so the pods that need that zone stay Pending.
	ReasonZoneNotServed = "ZoneNotServed"
)

// SpreadPolicy gives the pods of its namespace default topology spread
// constraints and a validation action.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=spreadguard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Workloads",type=integer,JSONPath=`.status.workloads`
// +kubebuilder:printcolumn:name="Skewed",type=integer,JSONPath=`.status.skewed`
// +kubebuilder:printcolumn:name="Uncovered",type=integer,JSONPath=`.status.uncovered`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.validation.action`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SpreadPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SpreadPolicySpec `json:"spec"`

	// +optional
	Status PolicyStatus `json:"status,omitempty"`
}

// SpreadPolicyList is a list of SpreadPolicy.
//
// +kubebuilder:object:root=true
type SpreadPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpreadPolicy `json:"items"`
}

// ClusterSpreadPolicy gives the pods of the namespaces it selects default
// topology spread constraints and a validation action.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=spreadguard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Workloads",type=integer,JSONPath=`.status.workloads`
// +kubebuilder:printcolumn:name="Skewed",type=integer,JSONPath=`.status.skewed`
// +kubebuilder:printcolumn:name="Uncovered",type=integer,JSONPath=`.status.uncovered`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.validation.action`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterSpreadPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterSpreadPolicySpec `json:"spec"`

	// +optional
	Status PolicyStatus `json:"status,omitempty"`
}

// ClusterSpreadPolicyList is a list of ClusterSpreadPolicy.
//
// +kubebuilder:object:root=true
type ClusterSpreadPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterSpreadPolicy `json:"items"`
}
