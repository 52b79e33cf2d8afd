// Package v1 is a minimal mirror of the node classes of Karpenter's cloud
// providers whose status says which zones their nodes can come up in: only
// what pkg/autoscale reads to resolve the zones of a NodePool that leaves
// the zone open. Decoding a full node class document works: the fields not
// mirrored here are ignored.
//
//   - EC2NodeClass (karpenter.k8s.aws/v1), of Karpenter's AWS provider:
//     status.subnets[].zone and .zoneID, the zones (and their zone IDs) of
//     the subnets its subnetSelectorTerms select, which are the only zones
//     Karpenter launches its nodes in.
//   - NodeClass (eks.amazonaws.com/v1), of EKS Auto Mode: the same
//     status.subnets. AWS publishes no CRD or Go type for it; Auto Mode
//     runs Karpenter's AWS provider, and its NodeClass status carries the
//     resolved subnets as EC2NodeClass's does. A NodeClass without them
//     says nothing, and the zones come from elsewhere (docs/autoscaler.md).
//
// Azure's AKSNodeClass and the GCP provider's GCENodeClass expose no zone
// in their status (their subnets are regional), so they are not mirrored.
//
// Both versions are v1 but of two API groups; they share one status type,
// since spreadguard reads the same field of each.
//
// +kubebuilder:object:generate=true
// +kubebuilder:skip
package v1
