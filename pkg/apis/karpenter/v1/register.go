package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is Karpenter's API group.
const GroupName = "karpenter.sh"

// GroupVersion is karpenter.sh/v1.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// KindNodePool is the kind of a NodePool.
const KindNodePool = "NodePool"

var (
	// SchemeBuilder registers NodePool, NodeClaim and their lists. It is
	// apimachinery's builder, as in pkg/apis/spreadguard/v1alpha1, so that
	// pure packages importing these types do not pull in controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds NodePool, NodeClaim and their lists to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NodePool{}, &NodePoolList{}, &NodeClaim{}, &NodeClaimList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
