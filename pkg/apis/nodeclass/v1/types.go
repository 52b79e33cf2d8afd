package v1

import (
	"cmp"
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

// LabelTopologyZoneID is the label Karpenter's AWS provider puts on every
// node it launches: the zone ID of its subnet (usw2-az1), which names the
// same physical zone in every AWS account, where zone names do not.
// See LabelTopologyZoneID in
// https://github.com/aws/karpenter-provider-aws/blob/v1.15.1/pkg/apis/v1/labels.go
const LabelTopologyZoneID = "topology.k8s.aws/zone-id"

// Subnet is one resolved subnet: its zone, what nodes are labelled with
// (topology.kubernetes.io/zone), and its zone ID (LabelTopologyZoneID).
// Its ID is not mirrored.
type Subnet struct {
	Zone string `json:"zone"`
	// ZoneID is optional in the API: "" when the status does not say it.
	ZoneID string `json:"zoneID,omitempty"`
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

// Placements returns the distinct (zone, zone ID) pairs of s's subnets,
// sorted by zone then zone ID, without subnets that name no zone; nil when
// there is none, as for Zones.
func (s *NodeClassStatus) Placements() []Subnet {
	var out []Subnet
	for _, sn := range s.Subnets {
		if sn.Zone != "" {
			out = append(out, Subnet{Zone: sn.Zone, ZoneID: sn.ZoneID})
		}
	}
	slices.SortFunc(out, func(a, b Subnet) int {
		return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.ZoneID, b.ZoneID))
	})
	return slices.Compact(out)
}

// ZoneIDs returns the zone ID of each zone of s's subnets that has one
// (the first, sorted, should two subnets of a zone disagree); nil when no
// subnet says a zone ID.
func (s *NodeClassStatus) ZoneIDs() map[string]string {
	var out map[string]string
	for _, p := range s.Placements() {
		if p.ZoneID == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		if _, ok := out[p.Zone]; !ok {
			out[p.Zone] = p.ZoneID
		}
	}
	return out
}
