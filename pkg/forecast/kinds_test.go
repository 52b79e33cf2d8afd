package forecast

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/workload"
	"github.com/spreadguard/spreadguard/pkg/workload/testdata/examplev1"
)

// A kind added to workload.Kinds as one row, and nothing else, is
// forecast: its name, replicas and pod come from the row.
func TestAKindAddedAsOneRowIsForecast(t *testing.T) {
	examplev1.Register(t)
	zones := zonesPolicy().Obj()
	// DefaultSelector knows the owners upstream knows
	// (spread.SelectorSources), not a made-up kind: the pods' selector is
	// their Service's.
	svc := spreadtest.MakeService().Name("web").Namespace(shop).Selector("app", "web").Obj()
	tests := []struct {
		name     string
		world    *world
		replicas int32
		want     outcome
	}{
		{
			name:     "4 replicas over zones a and b -> 2 per zone, no warning",
			world:    makeWorld().zones(1, "zone-a", "zone-b").policy(zones),
			replicas: 4,
			want:     outcome{Nodes: []string{"zone-a-1", "zone-b-1", "zone-a-1", "zone-b-1"}},
		},
		{
			name: "zone-c only cordoned, counted -> replica 3 of 4 refused, zone-c named",
			world: makeWorld().zones(1, "zone-a", "zone-b").policy(zones).
				node(spreadtest.MakeNode().Name("zone-c-1").Zone("zone-c").Cordoned().Obj()),
			replicas: 4,
			want: outcome{
				Warning: "spreadguard: replica 3 of 4 would be refused: zone-c has no schedulable node; " +
					"zone: zone-a=1 zone-b=1 zone-c=0, maxSkew 1 (policy shop/zones)",
				Nodes: []string{"zone-a-1", "zone-b-1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := examplev1.Make(shop, "web", tt.replicas)
			w, err := Of(obj, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(workload.Ref{Kind: "ReplicaSetLike", Namespace: shop, Name: "web"}, w.Ref); diff != "" {
				t.Errorf("the workload's Ref (-want +got):\n%s", diff)
			}
			if w.Replicas != tt.replicas {
				t.Errorf("Replicas = %d, want %d", w.Replicas, tt.replicas)
			}
			wantRef := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "ReplicaSetLike", Name: "web", UID: obj.UID,
				Controller: new(true), BlockOwnerDeletion: new(true)}
			if diff := cmp.Diff([]metav1.OwnerReference{wantRef}, w.Pod.OwnerReferences); diff != "" {
				t.Errorf("the pod's owner references (-want +got):\n%s", diff)
			}
			ix := spread.IndexFromSnapshot(tt.world.snap)
			src := tt.world.sources()
			src.Add(svc)
			f, err := Run(w, src, ix, engine.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(f)); diff != "" {
				t.Errorf("forecast (-want +got):\n%s", diff)
			}
		})
	}
	// Without its row the kind is no workload.
	workload.Kinds = workload.Kinds[:len(workload.Kinds)-1]
	if _, err := Of(examplev1.Make(shop, "web", 1), 0); err == nil {
		t.Error("Of forecast a ReplicaSetLike without its row in workload.Kinds")
	}
}
