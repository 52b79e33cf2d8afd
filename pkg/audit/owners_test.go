package audit_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/audit"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestStripOwner(t *testing.T) {
	zero, three := int32(0), int32(3)
	owner := []metav1.OwnerReference{{Kind: "Deployment", Name: "web", UID: "d1"}}
	full := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "shop"}},
		Spec: v1.PodSpec{
			NodeSelector:              map[string]string{"pool": "general"},
			Tolerations:               []v1.Toleration{{Key: "spot", Operator: v1.TolerationOpExists}},
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{st.Constraint(1, v1.LabelTopologyZone).Obj()},
			Containers:                []v1.Container{{Name: "web", Image: "web:1"}},
		},
	}
	kept := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: full.Labels},
		Spec: v1.PodSpec{
			NodeSelector: full.Spec.NodeSelector, Tolerations: full.Spec.Tolerations,
			TopologySpreadConstraints: full.Spec.TopologySpreadConstraints,
		},
	}
	meta := metav1.ObjectMeta{Namespace: ns, Name: "web-h1", UID: "r1", Generation: 2, OwnerReferences: owner,
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"deployment.kubernetes.io/revision": "4", "note": "x"}}
	keptMeta := metav1.ObjectMeta{Namespace: ns, Name: "web-h1", UID: "r1", Generation: 2, OwnerReferences: owner,
		Annotations: map[string]string{"deployment.kubernetes.io/revision": "4"}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := []struct {
		name     string
		in, want any
	}{
		{
			name: "a running ReplicaSet keeps its controller, revision, selector and what places its pods",
			in:   &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: &three, Selector: sel, Template: full}},
			want: &appsv1.ReplicaSet{ObjectMeta: keptMeta, Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: kept}},
		},
		{
			name: "an old revision scaled to zero with no pod left keeps no template",
			in:   &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: sel, Template: full}},
			want: &appsv1.ReplicaSet{ObjectMeta: keptMeta, Spec: appsv1.ReplicaSetSpec{Selector: sel}},
		},
		{
			name: "a StatefulSet keeps its selector and template",
			in:   &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &three, Selector: sel, Template: full}},
			want: &appsv1.StatefulSet{ObjectMeta: keptMeta, Spec: appsv1.StatefulSetSpec{Selector: sel, Template: kept}},
		},
		{
			name: "a tombstone passes unchanged",
			in:   "tombstone",
			want: "tombstone",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := audit.StripOwner(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StripOwner() (-want +got):\n%s", diff)
			}
		})
	}
}
