package spreadhealth

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func zoneSkew(skew int, when v1.UnsatisfiableConstraintAction) spread.Spread {
	return spread.Spread{TopologyKey: v1.LabelTopologyZone, MaxSkew: 1, WhenUnsatisfiable: when, Skew: skew}
}

func result(name string, state health.State, cs ...spread.Spread) health.Result {
	return health.Result{Kind: "Deployment", Namespace: "shop", Name: name, Policy: "shop/zones", State: state, Constraints: cs}
}

func TestMetricsCarryOneSeriesPerSkewedWorkloadOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	// A first pass whose skewed workload is gone by the second must leave
	// no series behind.
	m.publish([]health.Result{result("gone", health.StateSkewed, zoneSkew(5, v1.DoNotSchedule))}, nil)
	m.publish([]health.Result{
		result("even", health.StateSpread, zoneSkew(0, v1.DoNotSchedule)),
		result("piled", health.StateSkewed, zoneSkew(3, v1.DoNotSchedule), zoneSkew(3, v1.ScheduleAnyway)),
		result("leaning", health.StateSpread, zoneSkew(2, v1.ScheduleAnyway)),
		result("old", health.StateUncovered, zoneSkew(4, v1.DoNotSchedule)),
		{Kind: "ReplicaSet", Namespace: "shop", Name: "front-end", Policy: "shop/zones", State: health.StateError, Error: "spec.selector: ..."},
	}, nil)
	want := `
# HELP spreadguard_workload_skew Skew (pods in the fullest domain minus the global minimum) of each skewed workload, by topology key; workloads within maxSkew have no series.
# TYPE spreadguard_workload_skew gauge
spreadguard_workload_skew{kind="Deployment",namespace="shop",topology_key="topology.kubernetes.io/zone",workload="piled"} 3
# HELP spreadguard_workloads Workloads the policies select, by namespace, policy and state (spread, skewed, uncovered, error), as the last audit pass found them.
# TYPE spreadguard_workloads gauge
spreadguard_workloads{namespace="shop",policy="shop/zones",state="error"} 1
spreadguard_workloads{namespace="shop",policy="shop/zones",state="skewed"} 1
spreadguard_workloads{namespace="shop",policy="shop/zones",state="spread"} 2
spreadguard_workloads{namespace="shop",policy="shop/zones",state="uncovered"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "spreadguard_workloads", "spreadguard_workload_skew"); err != nil {
		t.Error(err)
	}
}

func TestPolicyReadyGaugeSaysWhy(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.publish(nil, []policyCondition{
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

// TestAScrapeSeesOnePassWhole scrapes while passes of 200 and 300 skewed
// workloads replace each other: every scrape must see all of one pass.
func TestAScrapeSeesOnePassWhole(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	passes := map[int][]health.Result{}
	for _, n := range []int{200, 300} {
		for i := range n {
			passes[n] = append(passes[n], result(fmt.Sprintf("app-%d", i), health.StateSkewed, zoneSkew(2, v1.DoNotSchedule)))
		}
	}
	m.publish(passes[200], nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			m.publish(passes[[]int{200, 300}[i%2]], nil)
		}
	})
	for range 200 {
		skewed, err := testutil.GatherAndCount(reg, "spreadguard_workload_skew")
		if err != nil {
			t.Fatal(err)
		}
		if skewed != 200 && skewed != 300 {
			t.Errorf("a scrape saw %d skewed workloads, want the 200 of one pass or the 300 of the other", skewed)
			break
		}
	}
	close(done)
	wg.Wait()
}
