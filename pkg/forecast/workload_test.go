package forecast

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The hashes below are what ComputeHash of k8s.io/kubernetes v1.37.1
// (pkg/controller/controller_utils.go) returns for the same templates; a
// change of k8s.io/api's PodTemplateSpec changes them, as it changes the
// deployment controller's.
func TestPodTemplateHashIsTheDeploymentControllers(t *testing.T) {
	web := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
	}
	annotated := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "x"}, Annotations: map[string]string{"a": "b"}},
		Spec: v1.PodSpec{
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}},
			Containers:                []v1.Container{{Name: "app", Image: "nginx", Ports: []v1.ContainerPort{{ContainerPort: 80}}}},
		},
	}
	tests := []struct {
		name           string
		template       v1.PodTemplateSpec
		collisionCount *int32
		want           string
	}{
		{name: "an empty template", want: "54f4c57dcb"},
		{name: "an empty template after 3 collisions", collisionCount: ptr.To[int32](3), want: "f8d8cf667"},
		{name: "one labelled container", template: web, want: "754c66795c"},
		{name: "one labelled container after 3 collisions", template: web, collisionCount: ptr.To[int32](3), want: "5cbcbf5bcd"},
		{name: "annotations, a constraint and a port", template: annotated, want: "5f9ffcf46d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodTemplateHash(&tt.template, tt.collisionCount); got != tt.want {
				t.Errorf("PodTemplateHash = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestADeploymentsPodIsItsNewReplicaSets(t *testing.T) {
	d := deployment(3)
	d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}
	d.Spec.Template.Labels["tier"] = "front"
	w, err := Of(d, 0)
	if err != nil {
		t.Fatal(err)
	}
	hash := PodTemplateHash(&d.Spec.Template, nil)
	rs := w.owner.(*appsv1.ReplicaSet)
	want := &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash},
		MatchExpressions: d.Spec.Selector.MatchExpressions,
	}
	if diff := cmp.Diff(want, rs.Spec.Selector); diff != "" {
		t.Errorf("the new ReplicaSet's selector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app": "web", "tier": "front", appsv1.DefaultDeploymentUniqueLabelKey: hash}, w.Pod.Labels); diff != "" {
		t.Errorf("the pod's labels (-want +got):\n%s", diff)
	}
	ref := metav1.GetControllerOf(w.Pod)
	if ref == nil || ref.Kind != "ReplicaSet" || ref.Name != "web-"+hash || ref.UID != rs.UID {
		t.Errorf("the pod's controllerRef = %+v, want the ReplicaSet web-%s", ref, hash)
	}
	if _, ok := d.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("Of changed the Deployment's template")
	}
}
