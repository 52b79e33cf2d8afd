package autoscale_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const (
	zone         = v1.LabelTopologyZone
	capacityType = karpenterv1.CapacityTypeLabelKey
)

// fromPool is the template named name of NodePool pool, with the labels kv
// and the karpenter.sh/nodepool label.
func fromPool(name, pool string, kv ...string) spread.Template {
	return spread.Template{
		Name:   name,
		Source: "NodePool " + pool,
		Labels: labels(append(kv, karpenterv1.NodePoolLabelKey, pool)...),
	}
}

// nodesInZones returns one node per zone, named after it.
func nodesInZones(zones ...string) []*v1.Node {
	var out []*v1.Node
	for _, z := range zones {
		out = append(out, spreadtest.MakeNode().Name("node-"+z).Zone(z).Obj())
	}
	return out
}

func TestTemplatesFromNodePools(t *testing.T) {
	noisy := v1.Taint{Key: "example.com/dedicated", Value: "web", Effect: v1.TaintEffectNoSchedule}
	tests := []struct {
		name       string
		nodes      []*v1.Node
		pools      []*karpenterv1.NodePool
		spreadKeys []string
		want       []spread.Template
	}{
		{
			name:  "a NodePool allowing zones a, b and c with nodes in a and b adds a node in each of the three zones",
			nodes: nodesInZones("a", "b"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Zones("c", "a", "b").Obj()},
			want: []spread.Template{
				fromPool("nodepool/default/a", "default", zone, "a"),
				fromPool("nodepool/default/b", "default", zone, "b"),
				fromPool("nodepool/default/c", "default", zone, "c"),
			},
		},
		{
			name:  "Exists on the zone resolves to the zones seen on the nodes",
			nodes: nodesInZones("a", "b"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Requirement(zone, v1.NodeSelectorOpExists).Obj()},
			want: []spread.Template{
				fromPool("nodepool/default/a", "default", zone, "a"),
				fromPool("nodepool/default/b", "default", zone, "b"),
			},
		},
		{
			name:  "no requirement on the zone resolves to the zones seen on the nodes, since Karpenter sets the zone on every node",
			nodes: nodesInZones("a", "b"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Obj()},
			want: []spread.Template{
				fromPool("nodepool/default/a", "default", zone, "a"),
				fromPool("nodepool/default/b", "default", zone, "b"),
			},
		},
		{
			name:  "NotIn on the zone removes its values from the zones seen",
			nodes: nodesInZones("a", "b", "c"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Requirement(zone, v1.NodeSelectorOpNotIn, "b").Obj()},
			want: []spread.Template{
				fromPool("nodepool/default/a", "default", zone, "a"),
				fromPool("nodepool/default/c", "default", zone, "c"),
			},
		},
		{
			// Every offering of Karpenter's cloud providers requires a zone,
			// which DoesNotExist is incompatible with.
			name:  "DoesNotExist on the zone, nodes in a and b -> no node: Karpenter's every offering is in a zone",
			nodes: nodesInZones("a", "b"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Requirement(zone, v1.NodeSelectorOpDoesNotExist).Obj()},
		},
		{
			name:  "with no zone anywhere the one template has no zone",
			nodes: []*v1.Node{spreadtest.MakeNode().Name("n1").Obj()},
			pools: []*karpenterv1.NodePool{makeNodePool("default").Obj()},
			want:  []spread.Template{fromPool("nodepool/default/", "default")},
		},
		{
			name:  "spot and on-demand expand with the zones, zone first in the name",
			nodes: nodesInZones("a", "b"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Zones("a", "b").CapacityTypes("spot", "on-demand").Obj()},
			want: []spread.Template{
				fromPool("nodepool/default/a,on-demand", "default", zone, "a", capacityType, "on-demand"),
				fromPool("nodepool/default/a,spot", "default", zone, "a", capacityType, "spot"),
				fromPool("nodepool/default/b,on-demand", "default", zone, "b", capacityType, "on-demand"),
				fromPool("nodepool/default/b,spot", "default", zone, "b", capacityType, "spot"),
			},
		},
		{
			name: "without a capacity-type requirement the capacity types seen on the nodes expand",
			nodes: []*v1.Node{
				spreadtest.MakeNode().Name("n1").Zone("a").Label(capacityType, "spot").Obj(),
				spreadtest.MakeNode().Name("n2").Zone("a").Label(capacityType, "on-demand").Obj(),
			},
			pools: []*karpenterv1.NodePool{makeNodePool("default").Zones("a").Obj()},
			want: []spread.Template{
				fromPool("nodepool/default/a,on-demand", "default", zone, "a", capacityType, "on-demand"),
				fromPool("nodepool/default/a,spot", "default", zone, "a", capacityType, "spot"),
			},
		},
		{
			name:  "a NodePool whose nodes use all of its cpu limit adds no node, one below it does",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{
				makeNodePool("full").Limit(v1.ResourceCPU, "100").Uses(v1.ResourceCPU, "100").Obj(),
				makeNodePool("roomy").Limit(v1.ResourceCPU, "100").Uses(v1.ResourceCPU, "99").Obj(),
			},
			want: []spread.Template{fromPool("nodepool/roomy/a", "roomy", zone, "a")},
		},
		{
			name:  "a NodePool at its node-count limit adds no node",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Limit(karpenterv1.ResourceNodes, "3").Uses(karpenterv1.ResourceNodes, "3").Obj()},
		},
		{
			name:  "a NodePool at its gpu limit still adds nodes without gpus, one over it adds none",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{
				makeNodePool("at").Limit("nvidia.com/gpu", "8").Uses("nvidia.com/gpu", "8").Obj(),
				makeNodePool("over").Limit("nvidia.com/gpu", "8").Uses("nvidia.com/gpu", "9").Obj(),
			},
			want: []spread.Template{fromPool("nodepool/at/a", "at", zone, "a")},
		},
		{
			name:  "a NodePool being deleted, a static one and one that is not Ready add no node; one with no status yet does",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{
				makeNodePool("deleting").Deleting().Obj(),
				makeNodePool("static").Static(3).Obj(),
				makeNodePool("broken").Ready(metav1.ConditionFalse).Obj(),
				makeNodePool("new").Obj(),
				makeNodePool("ready").Ready(metav1.ConditionTrue).Obj(),
			},
			want: []spread.Template{
				fromPool("nodepool/new/a", "new", zone, "a"),
				fromPool("nodepool/ready/a", "ready", zone, "a"),
			},
		},
		{
			name:  "a single-valued requirement on another key becomes a label, a multi-valued one does not",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").
				Requirement(v1.LabelArchStable, v1.NodeSelectorOpIn, "arm64").
				Requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r").
				Requirement("karpenter.k8s.aws/instance-family", v1.NodeSelectorOpExists).
				Obj()},
			want: []spread.Template{fromPool("nodepool/default/a", "default", zone, "a", v1.LabelArchStable, "arm64")},
		},
		{
			name: "a well-known label all the nodes agree on is carried, one they disagree on is not, one a requirement pins is",
			nodes: []*v1.Node{
				spreadtest.MakeNode().Name("n1").Zone("a").Region("r1").Label(v1.LabelOSStable, "linux").Label(v1.LabelArchStable, "amd64").Obj(),
				spreadtest.MakeNode().Name("n2").Zone("a").Region("r1").Label(v1.LabelOSStable, "linux").Label(v1.LabelArchStable, "arm64").Obj(),
			},
			pools: []*karpenterv1.NodePool{
				makeNodePool("any-arch").Obj(),
				makeNodePool("graviton").Requirement(v1.LabelArchStable, v1.NodeSelectorOpNotIn, "amd64").Obj(),
			},
			want: []spread.Template{
				fromPool("nodepool/any-arch/a", "any-arch", zone, "a", v1.LabelTopologyRegion, "r1", v1.LabelOSStable, "linux"),
				fromPool("nodepool/graviton/a", "graviton", zone, "a", v1.LabelTopologyRegion, "r1", v1.LabelOSStable, "linux", v1.LabelArchStable, "arm64"),
			},
		},
		{
			name:  "two requirements on one key intersect, down to a single value that becomes a label",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").
				Requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r").
				Requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "m", "x").
				Obj()},
			want: []spread.Template{fromPool("nodepool/default/a", "default", zone, "a", "karpenter.k8s.aws/instance-category", "m")},
		},
		{
			name:  "template labels are carried, and one on the zone pins the zone",
			nodes: nodesInZones("a", "b"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").TemplateLabel("team", "web").TemplateLabel(zone, "b").Obj()},
			want:  []spread.Template{fromPool("nodepool/default/b", "default", zone, "b", "team", "web")},
		},
		{
			name:  "taints are carried and startup taints are not, since Karpenter does not require pods to tolerate them",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").
				Taint(noisy.Key, noisy.Value, noisy.Effect).
				StartupTaint("node.cilium.io/agent-not-ready", "true", v1.TaintEffectNoExecute).
				Obj()},
			want: []spread.Template{func() spread.Template {
				t := fromPool("nodepool/default/a", "default", zone, "a")
				t.Taints = []v1.Taint{noisy}
				return t
			}()},
		},
		{
			name:       "a spread key expands over its In values; one the NodePool does not constrain is no label",
			nodes:      nodesInZones("a"),
			pools:      []*karpenterv1.NodePool{makeNodePool("default").Requirement("example.com/rack", v1.NodeSelectorOpIn, "r2", "r1").Obj()},
			spreadKeys: []string{"example.com/rack", "example.com/row", v1.LabelHostname},
			want: []spread.Template{
				fromPool("nodepool/default/a,r1", "default", zone, "a", "example.com/rack", "r1"),
				fromPool("nodepool/default/a,r2", "default", zone, "a", "example.com/rack", "r2"),
			},
		},
		{
			name: "Gt on a spread key keeps the values seen above the bound",
			nodes: []*v1.Node{
				spreadtest.MakeNode().Name("n1").Zone("a").Label("example.com/gen", "5").Obj(),
				spreadtest.MakeNode().Name("n2").Zone("a").Label("example.com/gen", "7").Obj(),
				spreadtest.MakeNode().Name("n3").Zone("a").Label("example.com/gen", "next").Obj(),
			},
			pools:      []*karpenterv1.NodePool{makeNodePool("default").Requirement("example.com/gen", v1.NodeSelectorOpGt, "6").Obj()},
			spreadKeys: []string{"example.com/gen"},
			want:       []spread.Template{fromPool("nodepool/default/a,7", "default", zone, "a", "example.com/gen", "7")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Templates(autoscale.Inputs{Nodes: tt.nodes, NodePools: tt.pools, SpreadKeys: tt.spreadKeys})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("templates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestANodePoolExpandsIntoAtMostMaxTemplatesPerNodePool(t *testing.T) {
	var racks []string
	for i := range 100 {
		racks = append(racks, fmt.Sprintf("r%03d", i))
	}
	pool := makeNodePool("big").Zones("a").Requirement("example.com/rack", v1.NodeSelectorOpIn, racks...).Obj()

	got := autoscale.Templates(autoscale.Inputs{NodePools: []*karpenterv1.NodePool{pool}, SpreadKeys: []string{"example.com/rack"}})

	var want, names []string
	for i := range autoscale.MaxTemplatesPerNodePool {
		want = append(want, fmt.Sprintf("nodepool/big/a,r%03d", i))
	}
	for _, tm := range got {
		names = append(names, tm.Name)
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("template names (-want +got):\n%s", diff)
	}
}
