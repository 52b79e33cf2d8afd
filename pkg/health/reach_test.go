package health_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestReachSaysWhichConstraintsNoNodeCanEverSatisfy(t *testing.T) {
	audited := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAudited, Message: "2 workloads: 2 spread, 0 skewed, 0 uncovered"}
	invalid := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInvalid, Message: "spec.constraints[0].maxSkew: must be positive"}
	ref := v1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindSpreadPolicy, Namespace: "shop", Name: "zones"}
	zonesOf3 := autoscale.OutOfReach{Index: 1, TopologyKey: v1.LabelTopologyZone, MinDomains: 4, Domains: []string{"a", "b", "c"}}
	zoneMsg := "minDomains 4 over topology.kubernetes.io/zone, but the nodes and every node an autoscaler can add reach only 3 domains (a, b, c), " +
		"so the global minimum stays 0 and the pods beyond maxSkew per domain stay Pending. Remedy: let the autoscaler add nodes in 1 more zone " +
		"(the zones of a NodePool or of its node class, or the chart's autoscaler.zones), or lower minDomains to 3."
	zoneResult := health.ReportResult{Policy: "shop/zones", Rule: health.RuleMinDomains, Result: health.ResultFail, Message: zoneMsg,
		Properties: map[string]string{"topologyKey": v1.LabelTopologyZone, "minDomains": "4", "reachableDomains": "3"}, Resources: []v1.ObjectReference{ref}}
	hostsOf2 := autoscale.OutOfReach{Index: 0, TopologyKey: v1.LabelHostname, MinDomains: 5, Domains: []string{"node-1", "node-2"}}
	hostMsg := "minDomains 5 over kubernetes.io/hostname, but the nodes and every node an autoscaler can add reach only 2 domains, " +
		"so the global minimum stays 0 and the pods beyond maxSkew per domain stay Pending. Remedy: let the autoscaler add nodes in 3 more domains of kubernetes.io/hostname, or lower minDomains to 2."
	tests := []struct {
		name        string
		ready       metav1.Condition
		out         []autoscale.OutOfReach
		detail      spread.MessageDetail
		wantReady   metav1.Condition
		wantResults []health.ReportResult
	}{
		{
			name:      "every constraint within reach -> Ready as the audit found it, no result",
			ready:     audited,
			detail:    spread.DetailDomains,
			wantReady: audited,
		},
		{
			name:   "minDomains 4 over zones, nodes and templates in 3 zones -> Ready False naming spec.constraints[1], one failed result naming the zones",
			ready:  audited,
			out:    []autoscale.OutOfReach{zonesOf3},
			detail: spread.DetailDomains,
			wantReady: metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonMinDomainsOutOfReach,
				Message: "spec.constraints[1]: " + zoneMsg},
			wantResults: []health.ReportResult{zoneResult},
		},
		{
			name:   "minDomains 5 over hostnames, 2 nodes, messageDetail domains -> the nodes counted, not named",
			ready:  audited,
			out:    []autoscale.OutOfReach{hostsOf2},
			detail: spread.DetailDomains,
			wantReady: metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonMinDomainsOutOfReach,
				Message: "spec.constraints[0]: " + hostMsg},
			wantResults: []health.ReportResult{{Policy: "shop/zones", Rule: health.RuleMinDomains, Result: health.ResultFail, Message: hostMsg,
				Properties: map[string]string{"topologyKey": v1.LabelHostname, "minDomains": "5", "reachableDomains": "2"}, Resources: []v1.ObjectReference{ref}}},
		},
		{
			name:        "an invalid policy with a constraint out of reach -> Ready stays Invalid, the result is still reported",
			ready:       invalid,
			out:         []autoscale.OutOfReach{zonesOf3},
			detail:      spread.DetailDomains,
			wantReady:   invalid,
			wantResults: []health.ReportResult{zoneResult},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, results := health.Reach(tt.ready, "shop/zones", ref, tt.out, tt.detail)
			if diff := cmp.Diff(tt.wantReady, ready); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantResults, results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}
