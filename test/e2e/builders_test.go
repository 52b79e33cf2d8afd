//go:build e2e

package e2e

import (
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// pauseImage is never pulled on kwok nodes; kind nodes carry it already.
const pauseImage = "registry.k8s.io/pause:3.10"

func podTemplate(labels map[string]string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       podSpec(),
	}
}

func podSpec() v1.PodSpec {
	return v1.PodSpec{
		Containers:                    []v1.Container{{Name: "pause", Image: pauseImage, ImagePullPolicy: v1.PullIfNotPresent}},
		TerminationGracePeriodSeconds: new(int64),
	}
}

// pod completes a spreadtest pod with what the apiserver requires.
func pod(w *spreadtest.PodWrapper) *v1.Pod {
	p := w.Obj()
	p.Spec.Containers = podSpec().Containers
	p.Spec.TerminationGracePeriodSeconds = new(int64)
	return p
}

// service completes a spreadtest Service with what the apiserver requires.
func service(w *spreadtest.ServiceWrapper) *v1.Service {
	s := w.Obj()
	s.Spec.Ports = []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}
	return s
}

// DeploymentWrapper builds an apps/v1 Deployment whose pods carry app=<name>.
type DeploymentWrapper struct{ appsv1.Deployment }

func makeDeployment(name string) *DeploymentWrapper {
	labels := map[string]string{"app": name}
	return &DeploymentWrapper{appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels),
		},
	}}
}

// Obj returns a deep copy of the Deployment built so far.
func (d *DeploymentWrapper) Obj() *appsv1.Deployment { return d.Deployment.DeepCopy() }

// Replicas sets spec.replicas.
func (d *DeploymentWrapper) Replicas(n int32) *DeploymentWrapper {
	d.Spec.Replicas = new(n)
	return d
}

// PodLabel adds a label to the pod template (not to the selector).
func (d *DeploymentWrapper) PodLabel(k, v string) *DeploymentWrapper {
	d.Spec.Template.Labels[k] = v
	return d
}

// PodSpec sets the pod template's spec: the spec of a pod built once for
// the Deployment and for dry runs of one more replica.
func (d *DeploymentWrapper) PodSpec(spec v1.PodSpec) *DeploymentWrapper {
	d.Spec.Template.Spec = *spec.DeepCopy()
	return d
}

// RollingUpdate sets the strategy's surge and unavailability.
func (d *DeploymentWrapper) RollingUpdate(maxSurge, maxUnavailable int) *DeploymentWrapper {
	surge, unavailable := intstr.FromInt(maxSurge), intstr.FromInt(maxUnavailable)
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type:          appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
	}
	return d
}

// StatefulSetWrapper builds an apps/v1 StatefulSet whose pods carry
// app=<name>: unlike spreadtest's, it writes the pod template and replicas
// a controller needs to create pods.
type StatefulSetWrapper struct{ appsv1.StatefulSet }

func makeStatefulSet(name string) *StatefulSetWrapper {
	labels := map[string]string{"app": name}
	return &StatefulSetWrapper{appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(int32(1)),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template:    podTemplate(labels),
			// Parallel: the placement is the scheduler's either way, and
			// it does not wait for each pod before the next.
			PodManagementPolicy: appsv1.ParallelPodManagement,
		},
	}}
}

// Obj returns a deep copy of the StatefulSet built so far.
func (s *StatefulSetWrapper) Obj() *appsv1.StatefulSet { return s.StatefulSet.DeepCopy() }

// Replicas sets spec.replicas.
func (s *StatefulSetWrapper) Replicas(n int32) *StatefulSetWrapper {
	s.Spec.Replicas = new(n)
	return s
}

// injected returns the constraints spreadguard writes into a pod for
// policy constraints cs, given the selector it derives for the pod: the
// policy's fields, nodeTaintsPolicy Honor where the policy leaves it unset,
// and the derived selector.
func injected(cs []v1alpha1.Constraint, selector *metav1.LabelSelector) []v1.TopologySpreadConstraint {
	out := make([]v1.TopologySpreadConstraint, 0, len(cs))
	for _, c := range cs {
		tsc := c.ToTopologySpreadConstraint()
		if tsc.NodeTaintsPolicy == nil {
			tsc.NodeTaintsPolicy = new(v1.NodeInclusionPolicyHonor)
		}
		tsc.LabelSelector = selector.DeepCopy()
		out = append(out, tsc)
	}
	return out
}
