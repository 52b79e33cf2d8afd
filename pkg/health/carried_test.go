package health_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/health"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestCarried(t *testing.T) {
	injected := []v1.TopologySpreadConstraint{st.Constraint(1, zone).MatchLabel("app", "web").Obj()}
	web := st.MakePod().Namespace(ns).Name("web-1").Label("app", "web")
	tests := []struct {
		name string
		kind string
		pods []*v1.Pod
		want []v1.TopologySpreadConstraint
	}{
		{
			name: "the first pod of the workload decides: one created before spreadguard, without constraints",
			kind: health.KindReplicaSet,
			pods: []*v1.Pod{web.Obj(), podWith(web, injected)},
			want: nil,
		},
		{
			name: "a pod the webhook gave constraints shows them, pods of other workloads and namespaces aside",
			kind: health.KindReplicaSet,
			pods: []*v1.Pod{
				st.MakePod().Namespace(ns).Name("api-1").Label("app", "api").Obj(),
				st.MakePod().Namespace("other").Name("web-1").Label("app", "web").Obj(),
				podWith(web, injected),
			},
			want: injected,
		},
		{
			name: "a Service's pods are those no controller owns",
			kind: health.KindService,
			pods: []*v1.Pod{
				st.MakePod().Namespace(ns).Name("web-rs").Label("app", "web").ControlledBy("ReplicaSet", "apps/v1", "web").Obj(),
				podWith(web, injected),
			},
			want: injected,
		},
		{
			name: "no pod of the workload: nothing is known",
			kind: health.KindReplicaSet,
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &health.Workload{Kind: tt.kind, Namespace: ns, Name: "web", Selector: labels.SelectorFromSet(labels.Set{"app": "web"})}
			if diff := cmp.Diff(tt.want, health.Carried(w, tt.pods)); diff != "" {
				t.Errorf("Carried() (-want +got):\n%s", diff)
			}
		})
	}
}

func podWith(p *st.PodWrapper, cs []v1.TopologySpreadConstraint) *v1.Pod {
	out := p.Obj()
	out.Spec.TopologySpreadConstraints = cs
	return out
}
