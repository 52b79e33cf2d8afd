// Package v1alpha1 holds spreadguard's configuration API, group
// spreadguard.io, version v1alpha1: SpreadPolicy (namespaced) and
// ClusterSpreadPolicy (cluster-scoped). A policy names the topology spread
// constraints that spreadguard writes into pods that declare none, and what
// the validating webhook does when a pod's hard constraints cannot be met.
//
// The CRDs are generated from these types by controller-gen into
// charts/spreadguard/files/crds/ (`make generate`), which the chart renders as
// templates. The schema refuses what it can (enums, minimums, CEL rules);
// pkg/policy validates the rest, and the webhook skips any policy that fails
// there.
//
// +kubebuilder:object:generate=true
// +groupName=spreadguard.io
package v1alpha1
