package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The types below keep the field names and JSON tags of
// https://github.com/kubernetes-sigs/karpenter/blob/v1.15.0/pkg/apis/v1/nodepool.go
// (and nodeclaim.go, nodepool_status.go, labels.go beside it), and only the
// fields pkg/autoscale reads.

// Well-known labels and values Karpenter sets on the nodes it launches.
const (
	// NodePoolLabelKey names the NodePool a node was launched from.
	NodePoolLabelKey = GroupName + "/nodepool"
	// CapacityTypeLabelKey is the node's capacity type (spot, on-demand,
	// reserved).
	CapacityTypeLabelKey = GroupName + "/capacity-type"

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// ResourceNodes is the resource name Karpenter counts nodes under, in
// spec.limits and status.resources: every node adds 1.
const ResourceNodes corev1.ResourceName = "nodes"

// ConditionTypeReady is the NodePool condition Karpenter's provisioner
// requires to be True before it launches nodes from the NodePool.
const ConditionTypeReady = "Ready"

// Operators Karpenter accepts in requirements beyond those of
// v1.NodeSelectorOperator: Gte and Lte (Gt and Lt are core's).
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodePool is the mirror of karpenter.sh/v1 NodePool: what nodes Karpenter
// may launch for pending pods, and how many.
//
// +kubebuilder:object:root=true
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolSpec is the part of a NodePool's spec that shapes its nodes.
type NodePoolSpec struct {
	// Template is what every node launched from the NodePool carries.
	Template NodeClaimTemplate `json:"template"`
	// Limits bound the resources of all the NodePool's nodes together.
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Replicas, when set, makes the NodePool static: Karpenter keeps that
	// many nodes and launches none for pending pods.
	Replicas *int64 `json:"replicas,omitempty"`
}

// NodeClaimTemplate is spec.template.
type NodeClaimTemplate struct {
	// ObjectMeta is spec.template.metadata, Karpenter's own two-field type.
	ObjectMeta `json:"metadata,omitempty"`
	Spec       NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is spec.template.metadata: the labels every node gets.
// Annotations are not mirrored: they play no part in scheduling.
type ObjectMeta struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// NodeClaimTemplateSpec is spec.template.spec.
type NodeClaimTemplateSpec struct {
	// NodeClassRef names the cloud provider's node class of the nodes
	// (an EC2NodeClass on AWS), whose status may say which zones they can
	// come up in.
	NodeClassRef *NodeClassReference `json:"nodeClassRef,omitempty"`
	// Taints are on every node for its whole life.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are on a node only until something removes them once
	// it is ready; Karpenter does not require pods to tolerate them.
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the labels of the nodes, zone and capacity
	// type included.
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
}

// NodeClassReference is spec.template.spec.nodeClassRef.
type NodeClassReference struct {
	// Group is the node class's API group, e.g. karpenter.k8s.aws.
	Group string `json:"group"`
	// Kind is the node class's kind, e.g. EC2NodeClass.
	Kind string `json:"kind"`
	// Name is the node class's name; node classes are cluster-scoped.
	Name string `json:"name"`
}

// NodeSelectorRequirementWithMinValues is one requirement of
// spec.template.spec.requirements. Operator is one of In, NotIn, Exists,
// DoesNotExist, Gt, Lt, Gte, Lte.
type NodeSelectorRequirementWithMinValues struct {
	Key       string                      `json:"key"`
	Operator  corev1.NodeSelectorOperator `json:"operator,omitempty"`
	Values    []string                    `json:"values,omitempty"`
	MinValues *int                        `json:"minValues,omitempty"`
}

// NodePoolStatus is the part of a NodePool's status that says whether it
// can launch nodes.
type NodePoolStatus struct {
	// Resources is what the NodePool's nodes hold together, compared with
	// spec.limits.
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Conditions has the shape of metav1.Condition (Karpenter's
	// operatorpkg status.Condition serialises the same fields).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}
