package health_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestReports(t *testing.T) {
	results := threeZones().
		ReplicaSet("even").Constraint(zoneHard()).Pods("a-0", 1).Pods("b-0", 1).Pods("c-0", 1).And().
		ReplicaSet("piled").Constraint(zoneHard()).Pods("a-0", 3).And().
		ReplicaSet("leaning").Constraint(zoneHard().ScheduleAnyway()).Pods("a-0", 4).Pods("b-0", 1).And().
		ReplicaSet("old").Pods("b-0", 2).And().
		run(t)
	rs := func(name string) []v1.ObjectReference {
		return []v1.ObjectReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: ns, Name: name}}
	}
	props := func(domains, skew, state string) map[string]string {
		return map[string]string{"domains": domains, "skew": skew, "maxSkew": "1", "state": state}
	}
	policy := ns + "/zones"
	want := map[string]*health.Report{ns: {
		Source:  "spreadguard",
		Summary: health.ReportSummary{Pass: 1, Fail: 1, Warn: 2},
		Results: []health.ReportResult{
			{Policy: policy, Rule: "topology.kubernetes.io/zone DoNotSchedule", Result: "pass", Resources: rs("even"),
				Message:    "skew 0 over topology.kubernetes.io/zone is within maxSkew 1.",
				Properties: props("a=1,b=1,c=1", "0", "spread")},
			{Policy: policy, Rule: "topology.kubernetes.io/zone ScheduleAnyway", Result: "warn", Resources: rs("leaning"),
				Message:    "skew 4 over topology.kubernetes.io/zone exceeds the preferred maxSkew 1 by more than 1.",
				Properties: props("a=4,b=1,c=0", "4", "skewed")},
			{Policy: policy, Rule: "topology.kubernetes.io/zone DoNotSchedule", Result: "warn", Resources: rs("old"),
				Message: "the pods carry no topology spread constraint; the policy's constraint over topology.kubernetes.io/zone sees a skew of 2 " +
					"(maxSkew 1). Recreate them (kubectl rollout restart) so that spreadguard gives them the policy's constraints.",
				Properties: props("a=0,b=2,c=0", "2", "uncovered")},
			{Policy: policy, Rule: "topology.kubernetes.io/zone DoNotSchedule", Result: "fail", Resources: rs("piled"),
				Message: "skew 3 over topology.kubernetes.io/zone exceeds maxSkew 1. " +
					"Restore the missing domains' capacity, or recreate pods from the fullest domains (kubectl rollout restart) so the scheduler spreads them again.",
				Properties: props("a=3,b=0,c=0", "3", "skewed")},
		},
	}}
	if diff := cmp.Diff(want, health.Reports(results, spread.DetailNodes)); diff != "" {
		t.Errorf("Reports() (-want +got):\n%s", diff)
	}
}

// TestReportsCountNodesUnderDomainDetail holds the counts of a hostname
// constraint under domain detail: every counted node, the empty ones that
// Domains leaves out included. That no Report names a node is held, with
// every other string a tenant reads, by the property test of
// cmd/kubectl-spread.
func TestReportsCountNodesUnderDomainDetail(t *testing.T) {
	results := threeZones().
		ReplicaSet("web").Constraint(st.Constraint(1, v1.LabelHostname)).Pods("a-0", 2).Pods("b-0", 1).And().
		run(t)
	tests := []struct {
		name   string
		detail spread.MessageDetail
		want   string
	}{
		{"with node detail the pods per node name the nodes", spread.DetailNodes, "a-0=2,a-1=0,b-0=1,b-1=0,c-0=0,c-1=0"},
		{"with domain detail they say how many nodes hold each count", spread.DetailDomains, "1 node with 2, 1 node with 1, 4 nodes with 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := health.Reports(results, tt.detail)[ns].Results[0]
			if diff := cmp.Diff(tt.want, res.Properties["domains"]); diff != "" {
				t.Errorf("domains (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReportsGiveAWorkloadThatCannotBeCheckedOneErrorResult(t *testing.T) {
	results := []health.Result{
		{Kind: "ReplicaSet", Namespace: ns, Name: "old", Policy: ns + "/zones", PolicyKind: "SpreadPolicy", State: health.StateError,
			Error: `spec.selector: values[1][app]: Invalid value: "front end"`},
	}
	want := map[string]*health.Report{ns: {
		Source:  "spreadguard",
		Summary: health.ReportSummary{Error: 1},
		Results: []health.ReportResult{{
			Policy: ns + "/zones", Result: "error",
			Message: `spreadguard cannot audit this workload: spec.selector: values[1][app]: Invalid value: "front end". ` +
				"Correct the value it names in the selector or the topology spread constraints, or recreate the object.",
			Properties: map[string]string{"state": "error"},
			Resources:  []v1.ObjectReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: ns, Name: "old"}},
		}},
	}}
	if diff := cmp.Diff(want, health.Reports(results, spread.DetailDomains)); diff != "" {
		t.Errorf("Reports() (-want +got):\n%s", diff)
	}
}
