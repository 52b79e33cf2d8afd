package v1alpha1

// Names spreadguard reads or writes on objects it does not own.
const (
	// AnnotationPolicy is set on a mutated pod to the policy its constraints
	// came from: "<namespace>/<name>" for a SpreadPolicy, "<name>" for a
	// ClusterSpreadPolicy.
	AnnotationPolicy = "spreadguard.io/policy"
	// AnnotationSkip, set to "true" on a pod, makes the webhook leave the pod
	// alone: no defaults injected.
	AnnotationSkip = "spreadguard.io/skip"
	// LabelIgnoreNamespace, set to "true" on a namespace, keeps the webhook
	// configurations' namespaceSelector from sending that namespace's pods
	// to spreadguard at all.
	LabelIgnoreNamespace = "spreadguard.io/ignore"
)

// Kinds, as they appear in apiVersion/kind and in policy.Applied.Kind.
const (
	KindSpreadPolicy        = "SpreadPolicy"
	KindClusterSpreadPolicy = "ClusterSpreadPolicy"
)
