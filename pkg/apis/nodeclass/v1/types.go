package v1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The types below keep the field names and JSON tags of
// https://github.com/aws/karpenter-provider-aws/blob/v1.15.1/pkg/apis/v1/ec2nodeclass_status.go
// and only the fields pkg/autoscale reads.

// EC2NodeClass is the mirror of karpenter.k8s.aws/v1 EC2NodeClass: the AWS
// settings of the nodes of the NodePools that name it in
// spec.template.spec.nodeClassRef.
//
// +kubebuilder:object:root=true
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// NodeClass is the mirror of eks.amazonaws.com/v1 NodeClass, EKS Auto
// Mode's node class.
//
// +kubebuilder:object:root=true
type NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status NodeClassStatus `json:"status,omitempty"`
}

// NodeClassList is a list of NodeClasses.
//
// +kubebuilder:object:root=true
type NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClass `json:"items"`
}

// NodeClassStatus is the part of a node class's status that says where its
// nodes can come up: the subnets the provider resolved from
// spec.subnetSelectorTerms.
type NodeClassStatus struct {
	// Subnets are the subnets new nodes are launched in; an EC2 subnet
	// lies in exactly one zone.
	Subnets []Subnet `json:"subnets,omitempty"`
}

// Subnet is one resolved subnet. Its ID and zone ID are not mirrored: the
// zone is what nodes are labelled with (topology.kubernetes.io/zone).
type Subnet struct {
	Zone string `json:"zone"`
}

// Zones returns the zones of s's subnets, sorted, without duplicates or
// empty names; nil when the status lists none (not resolved yet, or no
// subnet matches), which says nothing about the zones.
func (s *NodeClassStatus) Zones() []string {
	var out []string
	for _, sn := range s.Subnets {
		if sn.Zone != "" {
			out = append(out, sn.Zone)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
