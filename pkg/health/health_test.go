package health_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const zone = v1.LabelTopologyZone

func zoneHard() *st.ConstraintWrapper { return st.Constraint(1, zone) }

// threeZones is a cluster of two nodes in each of zones a, b and c, with a
// policy spreading every pod of the namespace over zones.
func threeZones() *clusterBuilder {
	return newCluster().Zone("a", 2).Zone("b", 2).Zone("c", 2).
		Policy("zones", pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj())
}

// zoneResult is the result of a workload with one zone constraint, whose
// pods are all on nodes of the counted domains.
func zoneResult(kind, name string, state health.State, s spread.Spread) health.Result {
	pods := 0
	for _, n := range s.Domains {
		pods += n
	}
	s.TopologyKey = zone
	if s.MaxSkew == 0 {
		s.MaxSkew = 1
	}
	if s.WhenUnsatisfiable == "" {
		s.WhenUnsatisfiable = v1.DoNotSchedule
	}
	return health.Result{
		Kind: kind, Namespace: ns, Name: name, Policy: ns + "/zones", PolicyKind: "SpreadPolicy",
		State: state, Pods: pods, Constraints: []spread.Spread{s},
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		cluster *clusterBuilder
		want    []health.Result
	}{
		{
			name: "pods spread one per zone pair are spread",
			cluster: threeZones().ReplicaSet("web").Constraint(zoneHard()).
				Pods("a-0", 2).Pods("b-1", 2).Pods("c-0", 1).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSpread,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 2, "c": 1}, DomainCount: 3, Min: 1, Max: 2, Skew: 1})},
		},
		{
			name: "a zone outage piled the pods into the two zones left, so the workload is skewed",
			cluster: threeZones().ReplicaSet("web").Constraint(zoneHard()).
				Pods("a-0", 3).Pods("b-0", 3).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSkewed,
				spread.Spread{Domains: map[string]int{"a": 3, "b": 3, "c": 0}, DomainCount: 3, Min: 0, Max: 3, Skew: 3})},
		},
		{
			name: "a cordoned zone counts as an empty domain when taints are ignored",
			cluster: newCluster().Zone("a", 1).Zone("b", 1).Zone("c", 1, func(n *st.NodeWrapper) { n.Cordoned() }).
				Policy("zones", pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).
				ReplicaSet("web").Constraint(zoneHard()).Pods("a-0", 2).Pods("b-0", 2).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSkewed,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 2, "c": 0}, DomainCount: 3, Min: 0, Max: 2, Skew: 2})},
		},
		{
			name: "a cordoned zone takes no part when nodeTaintsPolicy is Honor, so two even zones are spread",
			cluster: newCluster().Zone("a", 1).Zone("b", 1).Zone("c", 1, func(n *st.NodeWrapper) { n.Cordoned() }).
				Policy("zones", pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).
				ReplicaSet("web").Constraint(zoneHard().NodeTaintsPolicy(v1.NodeInclusionPolicyHonor)).
				Pods("a-0", 2).Pods("b-0", 2).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSpread,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 2}, DomainCount: 2, Min: 2, Max: 2, Skew: 0})},
		},
		{
			name: "two even zones under minDomains 3 have a global minimum of 0 and are skewed",
			cluster: newCluster().Zone("a", 1).Zone("b", 1).
				Policy("zones", pt.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).
				ReplicaSet("web").Constraint(zoneHard().MinDomains(3)).Pods("a-0", 2).Pods("b-0", 2).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSkewed,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 2}, DomainCount: 2, Min: 0, Max: 2, Skew: 2})},
		},
		{
			name: "terminating pods do not count, so a zone that looks crowded is even",
			cluster: threeZones().ReplicaSet("web").Constraint(zoneHard()).
				Pods("a-0", 2).TerminatingPods("a-1", 3).Pods("b-0", 2).Pods("c-0", 2).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSpread,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 2, "c": 2}, DomainCount: 3, Min: 2, Max: 2, Skew: 0})},
		},
		{
			name: "a soft constraint two over its maxSkew of 1 is spread: the scheduler only prefers it",
			cluster: threeZones().ReplicaSet("web").Constraint(zoneHard().ScheduleAnyway()).
				Pods("a-0", 2).Pods("b-0", 1).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSpread,
				spread.Spread{WhenUnsatisfiable: v1.ScheduleAnyway,
					Domains: map[string]int{"a": 2, "b": 1, "c": 0}, DomainCount: 3, Min: 0, Max: 2, Skew: 2})},
		},
		{
			name: "a soft constraint three over its maxSkew of 1 is skewed",
			cluster: threeZones().ReplicaSet("web").Constraint(zoneHard().ScheduleAnyway()).
				Pods("a-0", 3).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateSkewed,
				spread.Spread{WhenUnsatisfiable: v1.ScheduleAnyway,
					Domains: map[string]int{"a": 3, "b": 0, "c": 0}, DomainCount: 3, Min: 0, Max: 3, Skew: 3})},
		},
		{
			name:    "pods created before spreadguard carry no constraint: uncovered, counted as the policy would",
			cluster: threeZones().ReplicaSet("web").Pods("a-0", 4).Pods("b-0", 1).And(),
			want: []health.Result{zoneResult("ReplicaSet", "web", health.StateUncovered,
				spread.Spread{Domains: map[string]int{"a": 4, "b": 1, "c": 0}, DomainCount: 3, Min: 0, Max: 4, Skew: 4})},
		},
		{
			name: "a Deployment is audited through its current ReplicaSet, the old one's pods apart",
			cluster: threeZones().Deployment("web").Constraint(zoneHard().MatchLabelKeys("pod-template-hash")).
				Pods("a-0", 3).Rollout().Pods("a-0", 1).Pods("b-0", 1).Pods("c-0", 1).And(),
			want: []health.Result{zoneResult("Deployment", "web", health.StateSpread,
				spread.Spread{Domains: map[string]int{"a": 1, "b": 1, "c": 1}, DomainCount: 3, Min: 1, Max: 1, Skew: 0})},
		},
		{
			name:    "pods only a Service stands for are its workload",
			cluster: threeZones().Service("db").Pods("a-0", 2).And(),
			want: []health.Result{zoneResult("Service", "db", health.StateUncovered,
				spread.Spread{Domains: map[string]int{"a": 2, "b": 0, "c": 0}, DomainCount: 3, Min: 0, Max: 2, Skew: 2})},
		},
		{
			name:    "a workload without pods is not audited",
			cluster: threeZones().ReplicaSet("web").Constraint(zoneHard()).And(),
			want:    []health.Result{},
		},
		{
			name: "a workload no policy selects is not audited",
			cluster: newCluster().Zone("a", 1).ReplicaSet("web").Constraint(zoneHard()).
				Pods("a-0", 2).And(),
			want: []health.Result{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cluster.run(t)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTally(t *testing.T) {
	got := health.Tally(threeZones().
		ReplicaSet("even").Constraint(zoneHard()).Pods("a-0", 1).Pods("b-0", 1).Pods("c-0", 1).And().
		ReplicaSet("piled").Constraint(zoneHard()).Pods("a-0", 3).And().
		ReplicaSet("old").Pods("b-0", 1).And().
		run(t))
	want := map[health.PolicyKey]health.Counts{
		{Kind: "SpreadPolicy", Name: ns + "/zones"}: {Workloads: 3, Spread: 1, Skewed: 1, Uncovered: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tally() (-want +got):\n%s", diff)
	}
}
