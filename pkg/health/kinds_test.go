package health_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
	"github.com/spreadguard/spreadguard/pkg/workload/testdata/examplev1"
)

// A kind added to workload.Kinds as one row, and nothing else, is
// audited: its selector, pod and name come from the row.
func TestAKindAddedAsOneRowIsInSpreadHealth(t *testing.T) {
	examplev1.Register(t)
	tests := []struct {
		name  string
		pods  map[string]int // per node
		want  []health.Result
		unrow bool // run without the kind's row
	}{
		{
			name: "its pods spread 2, 2, 1 over the zones -> spread",
			pods: map[string]int{"a-0": 2, "b-1": 2, "c-0": 1},
			want: []health.Result{zoneResult("ReplicaSetLike", "web", health.StateSpread,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 2, "c": 1}, DomainCount: 3, Min: 1, Max: 2, Skew: 1})},
		},
		{
			name: "its pods piled 3, 3, 0 by a zone outage -> skewed",
			pods: map[string]int{"a-0": 3, "b-0": 3},
			want: []health.Result{zoneResult("ReplicaSetLike", "web", health.StateSkewed,
				spread.Spread{Domains: map[string]int{"a": 3, "b": 3, "c": 0}, DomainCount: 3, Min: 0, Max: 3, Skew: 3})},
		},
		{
			name:  "the same pods once the row is gone -> no workload to audit",
			pods:  map[string]int{"a-0": 3, "b-0": 3},
			want:  []health.Result{},
			unrow: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := threeZones()
			obj := examplev1.Make(ns, "web", 6)
			w := c.owned(obj, &obj.Spec.Template).Constraint(zoneHard())
			for _, node := range []string{"a-0", "b-0", "b-1", "c-0"} {
				w.Pods(node, tt.pods[node])
			}
			if tt.unrow {
				kinds := workload.Kinds
				workload.Kinds = kinds[:len(kinds)-1]
				t.Cleanup(func() { workload.Kinds = kinds })
			}
			if diff := cmp.Diff(tt.want, c.run(t)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}
