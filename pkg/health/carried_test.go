package health_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// TestRunReadsTheConstraintsThePodsCarry holds the audit of a workload
// whose template declares no constraint (the normal case: the webhook
// injects them) to what its pods carry, as the index tallies them.
func TestRunReadsTheConstraintsThePodsCarry(t *testing.T) {
	tests := []struct {
		name    string
		cluster *clusterBuilder
		want    []health.Result
	}{
		{
			name:    "pods the webhook gave the zone constraint, piled in zone a: skewed, not uncovered",
			cluster: threeZones().ReplicaSet("web").Injected(zoneHard()).Pods("a-0", 3).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSkewed,
				spread.Spread{Domains: map[string]int{"a": 3, "b": 0, "c": 0}, DomainCount: 3, Min: 0, Max: 3, Skew: 3})},
		},
		{
			name: "3 pods carry the soft constraint, 2 created before spreadguard carry none: most pods decide",
			cluster: threeZones().ReplicaSet("web").Injected(zoneHard().ScheduleAnyway()).Pods("a-0", 2).Pods("b-0", 1).
				None().Pods("c-0", 2).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSpread,
				spread.Spread{WhenUnsatisfiable: v1.ScheduleAnyway,
					Domains: map[string]int{"a": 2, "b": 1, "c": 2}, DomainCount: 3, Min: 1, Max: 2, Skew: 1})},
		},
		{
			name: "2 pods carry the soft constraint, 3 created before spreadguard carry none: uncovered",
			cluster: threeZones().ReplicaSet("web").Injected(zoneHard().ScheduleAnyway()).Pods("a-0", 2).
				None().Pods("b-0", 1).Pods("c-0", 2).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateUncovered,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 1, "c": 2}, DomainCount: 3, Min: 1, Max: 2, Skew: 1})},
		},
		{
			name: "a Deployment's new revision carries the constraint, its old one none: the new one's pods decide",
			cluster: threeZones().Deployment("web").Pods("a-0", 4).Rollout().Injected(zoneHard().MatchLabelKeys("pod-template-hash")).
				Pods("a-0", 1).Pods("b-0", 1).Pods("c-0", 1).And(),
			want: []health.Result{zoneResult("Deployment", "web", health.StateSpread,
				spread.Spread{Domains: map[string]int{"a": 1, "b": 1, "c": 1}, DomainCount: 3, Min: 1, Max: 1, Skew: 0})},
		},
		{
			name: "a Service's own 2 pods carry the constraint, which counts the 4 of a ReplicaSet it also selects; those carry none and are the ReplicaSet's",
			cluster: threeZones().Service("web").Injected(zoneHard()).Pods("a-0", 1).Pods("b-0", 1).And().
				ReplicaSet("web").Label("role", "worker").Pods("c-0", 4).And(),
			want: []health.Result{
				zoneResult("ReplicaSet", "web", health.StateUncovered,
					spread.Spread{Domains: map[string]int{"a": 0, "b": 0, "c": 4}, DomainCount: 3, Min: 0, Max: 4, Skew: 4}),
				zoneResult("Service", "web", health.StateSkewed,
					spread.Spread{Domains: map[string]int{"a": 1, "b": 1, "c": 4}, DomainCount: 3, Min: 1, Max: 4, Skew: 3}),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.cluster.run(t)); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOneWorkloadTheEngineCannotReadDegradesOnlyItsOwnResult: objects
// stored before the API server validated label values in selectors must
// not stop the audit of the others.
func TestOneWorkloadTheEngineCannotReadDegradesOnlyItsOwnResult(t *testing.T) {
	frontEnd := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"old", "front end"}}}}
	tests := []struct {
		name    string
		cluster *clusterBuilder
		want    []health.Result
	}{
		{
			name: `a ReplicaSet selecting "front end" beside a spread one: an error result for it, the other audited`,
			cluster: threeZones().ReplicaSet("old").Selector(frontEnd).Pods("a-0", 2).And().
				ReplicaSet("web").Constraint(zoneHard()).Pods("a-0", 1).Pods("b-0", 1).Pods("c-0", 1).And(),
			want: []health.Result{
				{Kind: "ReplicaSet", Namespace: ns, Name: "old", Policy: ns + "/zones", PolicyKind: "SpreadPolicy", State: health.StateError},
				zoneResult("ReplicaSet", "web", health.StateSpread,
					spread.Spread{Domains: map[string]int{"a": 1, "b": 1, "c": 1}, DomainCount: 3, Min: 1, Max: 1, Skew: 0}),
			},
		},
		{
			name: `pods carrying a constraint that selects "front end" beside a skewed workload: an error result for them, the other audited`,
			cluster: threeZones().ReplicaSet("old").Injected(zoneHard().Selector(frontEnd)).Pods("a-0", 2).And().
				ReplicaSet("web").Constraint(zoneHard()).Pods("a-0", 3).And(),
			want: []health.Result{
				{Kind: "ReplicaSet", Namespace: ns, Name: "old", Policy: ns + "/zones", PolicyKind: "SpreadPolicy", State: health.StateError},
				zoneResult("ReplicaSet", "web", health.StateSkewed,
					spread.Spread{Domains: map[string]int{"a": 3, "b": 0, "c": 0}, DomainCount: 3, Min: 0, Max: 3, Skew: 3}),
			},
		},
		{
			name:    `a ReplicaSet selecting "front end" that no policy selects: left out, as it would be if it parsed`,
			cluster: newCluster().Zone("a", 1).ReplicaSet("old").Selector(frontEnd).Pods("a-0", 2).And(),
			want:    []health.Result{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cluster.run(t)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(health.Result{}, "Error")); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
			for _, r := range got {
				if r.State == health.StateError && !strings.Contains(r.Error, `Invalid value: "front end"`) {
					t.Errorf("the error of %s %s does not name the value: %q", r.Kind, r.Name, r.Error)
				}
			}
		})
	}
}
