package app

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestAuditMetricsCarryOneSeriesPerSkewedWorkloadOnly(t *testing.T) {
	zone := func(skew int, when v1.UnsatisfiableConstraintAction) spread.Spread {
		return spread.Spread{TopologyKey: v1.LabelTopologyZone, MaxSkew: 1, WhenUnsatisfiable: when, Skew: skew}
	}
	result := func(name string, state health.State, cs ...spread.Spread) health.Result {
		return health.Result{Kind: "Deployment", Namespace: "shop", Name: name, Policy: "shop/zones", State: state, Constraints: cs}
	}
	reg := prometheus.NewRegistry()
	m, err := newAuditMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	// A first pass whose skewed workload is gone by the second must leave
	// no series behind.
	m.set([]health.Result{result("gone", health.StateSkewed, zone(5, v1.DoNotSchedule))})
	m.set([]health.Result{
		result("even", health.StateSpread, zone(0, v1.DoNotSchedule)),
		result("piled", health.StateSkewed, zone(3, v1.DoNotSchedule), zone(3, v1.ScheduleAnyway)),
		result("leaning", health.StateSpread, zone(2, v1.ScheduleAnyway)),
		result("old", health.StateUncovered, zone(4, v1.DoNotSchedule)),
	})
	want := `
# HELP spreadguard_workload_skew Skew (pods in the fullest domain minus the global minimum) of each skewed workload, by topology key; workloads within maxSkew have no series.
# TYPE spreadguard_workload_skew gauge
spreadguard_workload_skew{kind="Deployment",namespace="shop",topology_key="topology.kubernetes.io/zone",workload="piled"} 3
# HELP spreadguard_workloads Workloads the policies select, by namespace, policy and state (spread, skewed, uncovered), as the last audit pass found them.
# TYPE spreadguard_workloads gauge
spreadguard_workloads{namespace="shop",policy="shop/zones",state="skewed"} 1
spreadguard_workloads{namespace="shop",policy="shop/zones",state="spread"} 2
spreadguard_workloads{namespace="shop",policy="shop/zones",state="uncovered"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestPolicyReadyGaugeSaysWhy(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newAuditMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.setReady([]policyCondition{
		{"SpreadPolicy", "shop", "zones", metav1.Condition{Status: metav1.ConditionTrue, Reason: "Audited"}},
		{"ClusterSpreadPolicy", "", "racks", metav1.Condition{Status: metav1.ConditionFalse, Reason: "UnknownTopologyKey"}},
	})
	want := `
# HELP spreadguard_policy_ready 1 when the policy's Ready condition is True, 0 when it is False (the condition's reason and message say why), by kind, namespace (empty for a ClusterSpreadPolicy) and name.
# TYPE spreadguard_policy_ready gauge
spreadguard_policy_ready{kind="ClusterSpreadPolicy",name="racks",namespace="",reason="UnknownTopologyKey"} 0
spreadguard_policy_ready{kind="SpreadPolicy",name="zones",namespace="shop",reason="Audited"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "spreadguard_policy_ready"); err != nil {
		t.Error(err)
	}
}

func TestMetricNamesAreWhatTheServerRegisters(t *testing.T) {
	got, err := MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spreadguard_admission_requests_total", "spreadguard_admission_decision_duration_seconds",
		"spreadguard_workloads", "spreadguard_workload_skew", "spreadguard_policy_ready"} {
		if !slices.Contains(got, want) {
			t.Errorf("MetricNames() = %v, want %s among them", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("MetricNames() = %v, not sorted", got)
	}
}
