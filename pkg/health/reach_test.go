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

func TestUnservedSaysWhichPoliciesSpreadOverAZoneNoNodeComesUpIn(t *testing.T) {
	audited := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAudited, Message: "1 workloads: 1 spread, 0 skewed, 0 uncovered"}
	outOfReach := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonMinDomainsOutOfReach, Message: "spec.constraints[0]: minDomains 4 ..."}
	ref := v1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindSpreadPolicy, Namespace: "shop", Name: "zones"}
	zoneD := []spread.UnservedZone{{Zone: "z-d", NodePool: "general", NodeClass: "EC2NodeClass default"}}
	hard := func(key string) v1alpha1.Constraint {
		return v1alpha1.Constraint{TopologyKey: key, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule}
	}
	soft := v1alpha1.Constraint{TopologyKey: v1.LabelTopologyZone, MaxSkew: 1, WhenUnsatisfiable: v1.ScheduleAnyway}
	domainsMsg := "spec.constraints[1] spread over topology.kubernetes.io/zone. Zone z-d is required by an autoscaler's node pool whose node class cannot serve it: " +
		"no node comes up there, so pods that need it stay Pending. Remedy: ask the cluster's operator to remove z-d from the node pool's zone requirement, or to let its node class serve it."
	domainsResult := health.ReportResult{Policy: "shop/zones", Rule: health.RuleUnservedZone, Result: health.ResultFail, Message: domainsMsg,
		Properties: map[string]string{"topologyKey": v1.LabelTopologyZone, "zones": "z-d"}, Resources: []v1.ObjectReference{ref}}
	tests := []struct {
		name        string
		ready       metav1.Condition
		constraints []v1alpha1.Constraint
		zones       []spread.UnservedZone
		detail      spread.MessageDetail
		wantReady   metav1.Condition
		wantResults []health.ReportResult
	}{
		{
			name:        "hard zone constraint, every zone served -> Ready as the audit found it, no result",
			ready:       audited,
			constraints: []v1alpha1.Constraint{hard(v1.LabelTopologyZone)},
			detail:      spread.DetailDomains,
			wantReady:   audited,
		},
		{
			name:        "hostname and hard zone constraints, NodePool requires z-d its EC2NodeClass cannot serve, messageDetail domains -> Ready False naming the zone, not the NodePool",
			ready:       audited,
			constraints: []v1alpha1.Constraint{hard(v1.LabelHostname), hard(v1.LabelTopologyZone)},
			zones:       zoneD,
			detail:      spread.DetailDomains,
			wantReady:   metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonZoneNotServed, Message: domainsMsg},
			wantResults: []health.ReportResult{domainsResult},
		},
		{
			name:        "hard zone constraint, zones z-d and z-e of two NodePools unserved, messageDetail nodes -> the NodePools and node classes named",
			ready:       audited,
			constraints: []v1alpha1.Constraint{hard(v1.LabelTopologyZone)},
			zones:       []spread.UnservedZone{{Zone: "z-d", NodePool: "general", NodeClass: "EC2NodeClass default"}, {Zone: "z-e", NodePool: "spot", NodeClass: "EC2NodeClass spot"}},
			detail:      spread.DetailNodes,
			wantReady: metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonZoneNotServed,
				Message: "spec.constraints[0] spread over topology.kubernetes.io/zone. Zones z-d, z-e are required by NodePool general (EC2NodeClass default) and NodePool spot (EC2NodeClass spot), whose node class cannot serve them: " +
					"no node comes up there, so pods that need them stay Pending. Remedy: remove z-d, z-e from the topology.kubernetes.io/zone requirement of NodePool general, NodePool spot, or give its node class a subnet there."},
			wantResults: []health.ReportResult{{Policy: "shop/zones", Rule: health.RuleUnservedZone, Result: health.ResultFail,
				Message: "spec.constraints[0] spread over topology.kubernetes.io/zone. Zones z-d, z-e are required by NodePool general (EC2NodeClass default) and NodePool spot (EC2NodeClass spot), whose node class cannot serve them: " +
					"no node comes up there, so pods that need them stay Pending. Remedy: remove z-d, z-e from the topology.kubernetes.io/zone requirement of NodePool general, NodePool spot, or give its node class a subnet there.",
				Properties: map[string]string{"topologyKey": v1.LabelTopologyZone, "zones": "z-d,z-e", "nodePools": "general,spot"}, Resources: []v1.ObjectReference{ref}}},
		},
		{
			name:        "only a soft zone constraint and a hostname one, z-d unserved -> not affected, no result",
			ready:       audited,
			constraints: []v1alpha1.Constraint{soft, hard(v1.LabelHostname)},
			zones:       zoneD,
			detail:      spread.DetailDomains,
			wantReady:   audited,
		},
		{
			name:        "hard zone constraint, z-d unserved, Ready already False for a minDomains out of reach -> Ready kept, the result still reported",
			ready:       outOfReach,
			constraints: []v1alpha1.Constraint{hard(v1.LabelHostname), hard(v1.LabelTopologyZone)},
			zones:       zoneD,
			detail:      spread.DetailDomains,
			wantReady:   outOfReach,
			wantResults: []health.ReportResult{domainsResult},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, results := health.Unserved(tt.ready, "shop/zones", ref, tt.constraints, tt.zones, tt.detail)
			if diff := cmp.Diff(tt.wantReady, ready); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantResults, results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}
