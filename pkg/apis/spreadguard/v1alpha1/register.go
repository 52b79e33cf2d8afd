package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every spreadguard resource.
const GroupName = "spreadguard.io"

// GroupVersion is spreadguard.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// SchemeGroupVersion is GroupVersion under the name client-go's generated
// code and many helpers expect.
var SchemeGroupVersion = GroupVersion

var (
	// SchemeBuilder registers this package's types. It is apimachinery's
	// builder rather than controller-runtime's so that the pure packages
	// importing these types (pkg/policy, the kubectl plugin) do not pull in
	// controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds SpreadPolicy, ClusterSpreadPolicy and their lists to
	// a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind returns the group-qualified kind, e.g. for errors.NewNotFound.
func Kind(kind string) schema.GroupKind {
	return GroupVersion.WithKind(kind).GroupKind()
}

// Resource returns the group-qualified resource, e.g. "spreadpolicies".
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&SpreadPolicy{}, &SpreadPolicyList{},
		&ClusterSpreadPolicy{}, &ClusterSpreadPolicyList{},
		&NodeTemplate{}, &NodeTemplateList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
