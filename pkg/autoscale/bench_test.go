package autoscale_test

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// benchInputs is a cluster of nodes nodes in 3 zones, each in one of
// groups node groups, with the labels a managed node carries, and pools
// NodePools allowing the 3 zones and 2 capacity types.
func benchInputs(nodes, pools, groups int) autoscale.Inputs {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	in := autoscale.Inputs{NodeGroupLabel: groupLabel, SpreadKeys: []string{v1.LabelHostname}}
	for i := range nodes {
		in.Nodes = append(in.Nodes, spreadtest.MakeNode().Name(fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/256, i%256)).
			Zone(zones[i%len(zones)]).Region("us-east-1").
			Label(groupLabel, fmt.Sprintf("ng-%d", i%groups)).
			Label(capacityType, []string{"spot", "on-demand"}[i%2]).
			Label(v1.LabelInstanceTypeStable, "m6i.xlarge").Label(v1.LabelArchStable, "amd64").Label(v1.LabelOSStable, "linux").
			Label("eks.amazonaws.com/nodegroup-image", "ami-0123456789abcdef0").Label("eks.amazonaws.com/sourceLaunchTemplateId", "lt-0123456789").
			Label("k8s.io/cloud-provider-aws", "a1b2c3").Label("team", "platform").
			Obj())
	}
	for i := range pools {
		in.NodePools = append(in.NodePools, makeNodePool(fmt.Sprintf("pool-%d", i)).
			Zones(zones...).CapacityTypes("spot", "on-demand").
			Requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r").
			TemplateLabel("team", "platform").
			Limit(v1.ResourceCPU, "1000").Uses(v1.ResourceCPU, "120").
			Obj())
	}
	return in
}

// BenchmarkTemplates derives the templates, which the webhook does again
// whenever a NodePool or a node's labels change.
func BenchmarkTemplates(b *testing.B) {
	for _, size := range []struct{ nodes, pools, groups int }{{50, 20, 20}, {5000, 20, 20}} {
		in := benchInputs(size.nodes, size.pools, size.groups)
		// Each NodePool makes 6 (3 zones, 2 capacity types); each group one
		// per zone its nodes are in.
		want := len(autoscale.Templates(in))
		if want <= size.pools*6 {
			b.Fatalf("got %d templates, want more than the NodePools' %d", want, size.pools*6)
		}
		b.Run(fmt.Sprintf("nodes=%d,nodepools=%d,groups=%d", size.nodes, size.pools, size.groups), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ts := autoscale.Templates(in); len(ts) != want {
					b.Fatalf("got %d templates, want %d", len(ts), want)
				}
			}
		})
	}
}

// BenchmarkScanZones is the baseline: one pass over the nodes collecting
// their zones, the least any derivation of templates from nodes does.
func BenchmarkScanZones(b *testing.B) {
	for _, nodes := range []int{50, 5000} {
		in := benchInputs(nodes, 0, 20)
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				seen := map[string]struct{}{}
				for _, n := range in.Nodes {
					seen[n.Labels[v1.LabelTopologyZone]] = struct{}{}
				}
				if len(seen) != 3 {
					b.Fatalf("got %d zones", len(seen))
				}
			}
		})
	}
}
