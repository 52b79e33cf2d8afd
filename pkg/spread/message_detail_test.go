package spread_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// That no string a tenant reads names a node under DetailDomains is held by
// the property test of cmd/kubectl-spread, over every path; these pin the
// wording of the pieces every path takes from message_detail.go.

func TestDomainName(t *testing.T) {
	tests := []struct {
		name       string
		detail     spread.MessageDetail
		key, value string
		want       string
	}{
		{"a zone, detail nodes -> zone and value", spread.DetailNodes, v1.LabelTopologyZone, "us-east-1a", "zone us-east-1a"},
		{"a zone, detail domains -> the same: the constraint counts by it", spread.DetailDomains, v1.LabelTopologyZone, "us-east-1a", "zone us-east-1a"},
		{"the beta zone label, detail domains -> zone and value", spread.DetailDomains, v1.LabelFailureDomainBetaZone, "b", "zone b"},
		{"a region, detail domains -> region and value", spread.DetailDomains, v1.LabelTopologyRegion, "eu-west-3", "region eu-west-3"},
		{"a custom key, detail domains -> key=value", spread.DetailDomains, "example.com/rack", "rack-12", "example.com/rack=rack-12"},
		{"a hostname, detail nodes -> node and its name", spread.DetailNodes, v1.LabelHostname, "ip-10-0-3-17", "node ip-10-0-3-17"},
		{"a hostname, no detail set (the engine's zero value) -> node and its name", "", v1.LabelHostname, "n1", "node n1"},
		{"a hostname, detail domains -> a node, unnamed", spread.DetailDomains, v1.LabelHostname, "tenant-b-secret-node-1", "a node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.detail.DomainName(tt.key, tt.value)); diff != "" {
				t.Errorf("DomainName(%q, %q) (-want +got):\n%s", tt.key, tt.value, diff)
			}
		})
	}
}

func TestNodesPerCount(t *testing.T) {
	tests := []struct {
		name    string
		counts  map[string]int
		domains int
		want    string
	}{
		{"3 nodes, two with 2 pods, the empty one left out of the counts -> fullest first", map[string]int{"a1": 2, "b1": 2}, 3, "2 nodes with 2, 1 node with 0"},
		{"the empty nodes listed with 0 and counted -> counted once", map[string]int{"a1": 3, "b1": 0, "c1": 1}, 3, "1 node with 3, 1 node with 1, 1 node with 0"},
		{"30 nodes, 2 listed -> 28 with 0", map[string]int{"a1": 1, "b1": 1}, 30, "2 nodes with 1, 28 nodes with 0"},
		{"no counted node -> no node", map[string]int{}, 0, "no node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, spread.NodesPerCount(tt.counts, tt.domains)); diff != "" {
				t.Errorf("NodesPerCount(%v, %d) (-want +got):\n%s", tt.counts, tt.domains, diff)
			}
		})
	}
}

func TestMessagesUnderDomainsDetail(t *testing.T) {
	twoZones := []*v1.Node{zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj()}
	minDomains3 := incoming().SpreadConstraint(zoneConstraint().MinDomains(3).Obj()).Obj()
	perHost := incoming().SpreadConstraint(hostConstraint().MinDomains(3).Obj()).Obj()
	tests := []struct {
		name      string
		nodes     []*v1.Node
		pods      []*v1.Pod
		templates []spread.Template
		pod       *v1.Pod
		want      string
	}{
		{
			name: "zones [2,2,0], zone c's only node tainted for tenant-b -> counts, minimum, why and remedy, no node name nor taint",
			nodes: []*v1.Node{zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj(),
				zoneNode("tenant-b-gpu-1", "c").Taint("dedicated", "tenant-b", v1.TaintEffectNoSchedule).Obj()},
			pods: fooPods("a1", "a1", "b1", "b1"),
			pod:  incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			want: "spec.topologySpreadConstraints[0] (topologyKey topology.kubernetes.io/zone, maxSkew 1) cannot be satisfied on any node. " +
				`Matching pods (selector "foo=bar") per topology.kubernetes.io/zone: a=2, b=2, c=0. ` +
				"The global minimum of spec.topologySpreadConstraints[0] is 0: zone c has the fewest matching pods. " +
				"Every node the pod can use is in a domain where the skew would exceed 1: zone a (2 + 1 - 0 = 3), zone b (2 + 1 - 0 = 3). " +
				"1 node in zone c is excluded: a taint the pod does not tolerate. " +
				"Remedy: set nodeTaintsPolicy: Honor so tainted and cordoned nodes do not pin the global minimum at 0, or add capacity the pod can use in zone c.",
		},
		{
			name:      "minDomains 3, nodes in 2 zones, NodePool tenant-b-batch allows zone c -> the new node's zone, not its NodePool",
			templates: []spread.Template{makeTemplate("nodepool/tenant-b-batch/c").Zone("c").Obj()},
			pod:       minDomains3,
			want:      "no current node fits; a new node that an autoscaler can add in zone c would",
		},
		{
			name:      "per-host spread with minDomains 3, a NodeTemplate with a hostname of its own -> neither the template nor its hostname",
			templates: []spread.Template{makeTemplate("tenant-b-reserved").Zone("a").Label(v1.LabelHostname, "tenant-b-reserved-host").Obj()},
			pod:       perHost,
			want:      "no current node fits; a new node that an autoscaler can add would",
		},
		{
			name: "minDomains 3, two tainted templates and one in a full zone -> how many fail for each reason, no name nor taint",
			templates: []spread.Template{
				makeTemplate("nodegroup/ng-tenant-b/c").Zone("c").Taint("dedicated", "tenant-b", v1.TaintEffectNoSchedule).Obj(),
				makeTemplate("gpu-team-x").Zone("d").Taint("nvidia.com/gpu", "", v1.TaintEffectNoExecute).Obj(),
				makeTemplate("nodepool/default/a").Zone("a").Obj(),
			},
			pod: minDomains3,
			want: "spec.topologySpreadConstraints[0] (topologyKey topology.kubernetes.io/zone, maxSkew 1) cannot be satisfied on any node. " +
				`Matching pods (selector "foo=bar") per topology.kubernetes.io/zone: a=1, b=1. ` +
				"The global minimum of spec.topologySpreadConstraints[0] is 0: fewer domains (2) than minDomains (3). " +
				"Every node the pod can use is in a domain where the skew would exceed 1: zone a (1 + 1 - 0 = 2), zone b (1 + 1 - 0 = 2). " +
				"The nodes and every node an autoscaler can add reach only 2 domains of topology.kubernetes.io/zone, fewer than minDomains 3, " +
				"so the global minimum stays 0 and each domain is full at maxSkew 1 matching pod: the pods beyond stay Pending until a node exists in another domain. " +
				"Remedy: let the autoscaler add nodes the pod can use in 1 more zone (the zones of a NodePool or of its node class, or the chart's autoscaler.zones), or lower minDomains to 2. " +
				"No node an autoscaler can add fits either (3 templates: 2 have a taint the pod does not tolerate; 1 would exceed maxSkew).",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := spread.Snapshot{Nodes: twoZones, Pods: fooPods("a1", "b1"), Templates: tt.templates}
			if tt.nodes != nil {
				snap.Nodes, snap.Pods = tt.nodes, tt.pods
			}
			for _, explain := range []bool{false, true} {
				res, err := checkBoth(t, snap, tt.pod, spread.Options{Detail: spread.DetailDomains, Explain: explain})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, res.Message); diff != "" {
					t.Errorf("message (Explain %v) (-want +got):\n%s", explain, diff)
				}
			}
		})
	}
}
