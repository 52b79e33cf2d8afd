package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindNodeClaim is the kind of a NodeClaim.
const KindNodeClaim = "NodeClaim"

// The conditions of a NodeClaim's life, in order, as
// https://github.com/kubernetes-sigs/karpenter/blob/v1.15.0/pkg/apis/v1/nodeclaim_status.go
// names them: the cloud provider created the instance (Launched), its node
// joined the cluster (Registered), and the node is ready with its startup
// taints gone (Initialized).
const (
	ConditionTypeLaunched    = "Launched"
	ConditionTypeRegistered  = "Registered"
	ConditionTypeInitialized = "Initialized"
)

// ReasonRebooting is the reason of Initialized while the node of a
// NodeClaim that was initialized reboots (Initialized is then Unknown).
const ReasonRebooting = "Rebooting"

// NodeClaim is the mirror of karpenter.sh/v1 NodeClaim: one node Karpenter
// is launching or has launched. Its labels carry karpenter.sh/nodepool from
// the start, and the zone (and, on AWS, the zone ID) once the cloud
// provider has launched it; before that spec.requirements say where it may
// come up.
//
// +kubebuilder:object:root=true
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeClaimSpec   `json:"spec"`
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimSpec is the part of a NodeClaim's spec that says where its node
// may come up.
type NodeClaimSpec struct {
	// Requirements constrain the labels of the node, its zone and zone ID
	// among them.
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
}

// NodeClaimStatus is the part of a NodeClaim's status that says how far its
// launch has come.
type NodeClaimStatus struct {
	// NodeName is the name of its node once registered.
	NodeName string `json:"nodeName,omitempty"`
	// Conditions has the shape of metav1.Condition (Karpenter's operatorpkg
	// status.Condition serialises the same fields): Launched, Registered,
	// Initialized, each with its reason.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}
