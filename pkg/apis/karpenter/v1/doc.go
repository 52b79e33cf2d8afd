// Package v1 is a minimal mirror of Karpenter's karpenter.sh/v1 NodePool
// and NodeClaim API: only the fields spreadguard reads to derive the nodes a
// NodePool can add, and whether Karpenter is launching one in a zone or
// failed to (pkg/autoscale). Decoding a full NodePool or NodeClaim document
// works: the fields not mirrored here are ignored.
//
// Mirroring instead of importing sigs.k8s.io/karpenter keeps its dependency
// tree (cloud-provider helpers, operatorpkg, a newer Go) out of the
// webhook, which only reads these fields and never writes a NodePool or a
// NodeClaim.
//
// The package declares no +groupName, and +kubebuilder:skip keeps
// controller-gen's crd generator from writing a CRD for it: Karpenter
// installs its own.
//
// +kubebuilder:object:generate=true
// +kubebuilder:skip
package v1
