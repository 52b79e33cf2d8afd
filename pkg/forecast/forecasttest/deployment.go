// Package forecasttest builds the workloads that forecast tests place.
package forecasttest

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DeploymentWrapper builds a Deployment.
type DeploymentWrapper struct{ d appsv1.Deployment }

// MakeDeployment returns a builder for Deployment namespace/name of 1
// replica, uid "uid-<name>", selecting and labelling its pods app=<name>,
// with one container.
func MakeDeployment(namespace, name string) *DeploymentWrapper {
	one := int32(1)
	return &DeploymentWrapper{d: appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}}
}

// Replicas sets spec.replicas.
func (w *DeploymentWrapper) Replicas(n int32) *DeploymentWrapper {
	w.d.Spec.Replicas = &n
	return w
}

// Obj returns a deep copy of the Deployment built so far.
func (w *DeploymentWrapper) Obj() *appsv1.Deployment { return w.d.DeepCopy() }
