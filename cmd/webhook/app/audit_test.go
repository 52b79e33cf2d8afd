package app

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestMayChangeTheAudit(t *testing.T) {
	pod := st.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Node("a1")
	running := pod.Obj()
	running.Status.Phase = v1.PodRunning
	ready := running.DeepCopy()
	ready.ResourceVersion = "2"
	ready.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	moved := running.DeepCopy()
	moved.Spec.NodeName = "b1"

	node := st.MakeNode().Name("a1").Zone("zone-a").Obj()
	heartbeat := node.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	cordoned := st.MakeNode().Name("a1").Zone("zone-a").Cordoned().Obj()

	policy := &v1alpha1.SpreadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zones", Generation: 1}}
	audited := policy.DeepCopy()
	audited.Status.Workloads = 3
	edited := policy.DeepCopy()
	edited.Generation = 2

	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	scaled := rs.DeepCopy()
	scaled.Status.Replicas = 3

	tests := []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"a pod turning ready changes nothing counted", cache.CompactPod(running), cache.CompactPod(ready), false},
		{"a pod on another node may change the counts", cache.CompactPod(running), cache.CompactPod(moved), true},
		{"a node's heartbeat changes no domain", node, heartbeat, false},
		{"a cordoned node may leave the counting", node, cordoned, true},
		{"the audit's own status write changes no spec", policy, audited, false},
		{"an edited policy may change everything", policy, edited, true},
		{"a ReplicaSet's update is always looked at", rs, scaled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mayChangeTheAudit(tt.old, tt.obj); got != tt.want {
				t.Errorf("mayChangeTheAudit() = %t, want %t", got, tt.want)
			}
		})
	}
}
