// Package policy decides which SpreadPolicy or ClusterSpreadPolicy applies to
// a pod, and validates policies beyond what their CRD schema can check.
//
// The package is pure: it reads what it needs through Lister and never talks
// to an API server. The webhook implements Lister with informers, the kubectl
// plugin with the objects of a snapshot file (SliceLister).
//
// One policy applies to a pod, never a merge of several. Candidates are the
// SpreadPolicies of the pod's namespace whose podSelector matches, and the
// ClusterSpreadPolicies whose namespaceSelector and podSelector match. They
// rank by priority (highest first), then SpreadPolicy before
// ClusterSpreadPolicy, then name. The first candidate that passes validation
// applies: a policy that fails validation is skipped as a whole, never
// applied half-valid, and the next one in rank takes its place.
package policy
