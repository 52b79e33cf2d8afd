package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EC2GroupName is the API group of Karpenter's AWS provider.
const EC2GroupName = "karpenter.k8s.aws"

// EKSGroupName is the API group of EKS Auto Mode's NodeClass.
const EKSGroupName = "eks.amazonaws.com"

// EC2GroupVersion is karpenter.k8s.aws/v1.
var EC2GroupVersion = schema.GroupVersion{Group: EC2GroupName, Version: "v1"}

// EKSGroupVersion is eks.amazonaws.com/v1.
var EKSGroupVersion = schema.GroupVersion{Group: EKSGroupName, Version: "v1"}

const (
	// KindEC2NodeClass is the kind of an EC2NodeClass.
	KindEC2NodeClass = "EC2NodeClass"
	// KindNodeClass is the kind of an EKS Auto Mode NodeClass.
	KindNodeClass = "NodeClass"
)

var (
	// SchemeBuilder registers EC2NodeClass and NodeClass and their lists,
	// each under its own group. It is apimachinery's builder, as in
	// pkg/apis/karpenter/v1, so that pure packages importing these types
	// do not pull in controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds both node classes to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(EC2GroupVersion, &EC2NodeClass{}, &EC2NodeClassList{})
	metav1.AddToGroupVersion(s, EC2GroupVersion)
	s.AddKnownTypes(EKSGroupVersion, &NodeClass{}, &NodeClassList{})
	metav1.AddToGroupVersion(s, EKSGroupVersion)
	return nil
}
