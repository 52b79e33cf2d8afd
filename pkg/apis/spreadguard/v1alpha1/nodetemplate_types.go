package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindNodeTemplate is the kind of NodeTemplate.
const KindNodeTemplate = "NodeTemplate"

// NodeTemplateSpec is the shape of one node an autoscaler can add.
type NodeTemplateSpec struct {
	// Labels are the new node's labels. kubernetes.io/hostname is set to a
	// fresh name when it is not among them.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Taints are the new node's taints. Only NoSchedule and NoExecute ones
	// keep a pod off it.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Taints []v1.Taint `json:"taints,omitempty"`
}

// NodeTemplate declares a node that a node autoscaler can add, for a node
// group that spreadguard cannot derive from Karpenter's NodePools or the
// existing nodes (a group scaled to zero, say). A pod that no existing node
// takes but the fresh node of a template does is admitted with a warning:
// the scheduler leaves it Pending and the autoscaler adds the node.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=spreadguard
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeTemplateSpec `json:"spec"`
}

// NodeTemplateList is a list of NodeTemplate.
//
// +kubebuilder:object:root=true
type NodeTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeTemplate `json:"items"`
}
