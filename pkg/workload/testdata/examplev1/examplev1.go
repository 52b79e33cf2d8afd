// Package examplev1 is a made-up workload kind, ReplicaSetLike, which only
// tests import: its row, Kind, is all that makes it a workload, and the
// tests of pkg/forecast and pkg/health register it to show that one row is
// forecast and audited. Its controller is taken to behave as the
// ReplicaSet controller does: it stamps pods out of its template and keeps
// them through a change of the template.
package examplev1

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spreadguard/spreadguard/pkg/workload"
)

// SchemeGroupVersion is the made-up group's version.
var SchemeGroupVersion = schema.GroupVersion{Group: "example.com", Version: "v1"}

// ReplicaSetLike is a workload of the made-up kind.
type ReplicaSetLike struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ReplicaSetLikeSpec `json:"spec"`
}

// ReplicaSetLikeSpec is a ReplicaSet's spec, in short.
type ReplicaSetLikeSpec struct {
	Replicas *int32                `json:"replicas,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	Template v1.PodTemplateSpec    `json:"template"`
}

// ReplicaSetLikeList is a list of ReplicaSetLikes.
type ReplicaSetLikeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReplicaSetLike `json:"items"`
}

// DeepCopyObject copies r.
func (r *ReplicaSetLike) DeepCopyObject() runtime.Object {
	out := &ReplicaSetLike{TypeMeta: r.TypeMeta, Spec: ReplicaSetLikeSpec{Selector: r.Spec.Selector.DeepCopy()}}
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if r.Spec.Replicas != nil {
		out.Spec.Replicas = new(*r.Spec.Replicas)
	}
	r.Spec.Template.DeepCopyInto(&out.Spec.Template)
	return out
}

// DeepCopyObject copies l.
func (l *ReplicaSetLikeList) DeepCopyObject() runtime.Object {
	out := &ReplicaSetLikeList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*ReplicaSetLike))
	}
	return out
}

// Kind is the one row that makes ReplicaSetLike a workload kind.
var Kind = workload.NewKind(&ReplicaSetLike{}, &ReplicaSetLikeList{}, SchemeGroupVersion.WithKind("ReplicaSetLike"), "replicasetlikes", []string{"rsl"}, false,
	func(o *ReplicaSetLike) workload.Fields {
		return workload.Fields{Replicas: &o.Spec.Replicas, Selector: o.Spec.Selector, Template: &o.Spec.Template}
	})

// Register adds Kind to workload.Kinds for the rest of t, which must not
// run in parallel with a test that reads the table.
func Register(t testing.TB) {
	t.Helper()
	kinds := workload.Kinds
	workload.Kinds = append(kinds[:len(kinds):len(kinds)], Kind)
	t.Cleanup(func() { workload.Kinds = kinds })
}

// Make is a ReplicaSetLike namespace/name of replicas pods labelled
// app=name, the selector's label.
func Make(namespace, name string, replicas int32) *ReplicaSetLike {
	labels := map[string]string{"app": name}
	return &ReplicaSetLike{
		TypeMeta:   metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "ReplicaSetLike"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-rsl-" + name)},
		Spec: ReplicaSetLikeSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: name, Image: "example.com/" + name}}}},
		},
	}
}
