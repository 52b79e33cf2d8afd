package autoscale_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// ec2Class is the EC2NodeClass name whose subnets are in zones.
func ec2Class(name string, zones ...string) autoscale.NodeClass {
	return autoscale.NodeClass{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: name, Zones: zones}
}

// names returns the names of ts.
func names(ts []spread.Template) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestTheZonesOfANodePoolComeFromItsNodeClassThenTheListThenTheNodes(t *testing.T) {
	ec2Ref := karpenterv1.NodeClassReference{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "default"}
	tests := []struct {
		name    string
		nodes   []*v1.Node
		pools   []*karpenterv1.NodePool
		classes []autoscale.NodeClass
		zones   []string
		// want are the template names.
		want         []string
		wantUnserved []autoscale.UnservedZones
	}{
		{
			name:    "no zone requirement, its EC2NodeClass's subnets in a, b and c, nodes in a and b -> a node in each of a, b and c",
			nodes:   nodesInZones("a", "b"),
			pools:   []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("default").Obj()},
			classes: []autoscale.NodeClass{ec2Class("default", "c", "a", "b", "a")},
			want:    []string{"nodepool/default/a", "nodepool/default/b", "nodepool/default/c"},
		},
		{
			name:    "no zone requirement, EKS Auto Mode's NodeClass with subnets in a and d, the list b, c -> the node class wins: a and d",
			nodes:   nodesInZones("a", "b"),
			pools:   []*karpenterv1.NodePool{makeNodePool("general-purpose").NodeClass(nodeclassv1.EKSGroupName, nodeclassv1.KindNodeClass, "default").Obj()},
			classes: []autoscale.NodeClass{{Group: nodeclassv1.EKSGroupName, Kind: nodeclassv1.KindNodeClass, Name: "default", Zones: []string{"a", "d"}}},
			zones:   []string{"b", "c"},
			want:    []string{"nodepool/general-purpose/a", "nodepool/general-purpose/d"},
		},
		{
			name:    "no zone requirement, its EC2NodeClass has no subnet resolved yet, the list a, b, d -> the list",
			nodes:   nodesInZones("a", "b"),
			pools:   []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("default").Obj()},
			classes: []autoscale.NodeClass{ec2Class("default")},
			zones:   []string{"d", "a", "b", ""},
			want:    []string{"nodepool/default/a", "nodepool/default/b", "nodepool/default/d"},
		},
		{
			name:    "no zone requirement, a KWOKNodeClass spreadguard does not read, named like an EC2NodeClass with zones, the list c -> the list",
			nodes:   nodesInZones("a"),
			pools:   []*karpenterv1.NodePool{makeNodePool("default").NodeClass("karpenter.kwok.sh", "KWOKNodeClass", "default").Obj()},
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b")},
			zones:   []string{"c"},
			want:    []string{"nodepool/default/c"},
		},
		{
			name:  "no zone requirement, no node class zones, no list -> the zones seen on nodes",
			nodes: nodesInZones("a", "b"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("missing").Obj()},
			want:  []string{"nodepool/default/a", "nodepool/default/b"},
		},
		{
			name:    "Exists on the zone, node class zones a, b, c -> a, b and c",
			nodes:   nodesInZones("a"),
			pools:   []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("default").Requirement(zone, v1.NodeSelectorOpExists).Obj()},
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b", "c")},
			want:    []string{"nodepool/default/a", "nodepool/default/b", "nodepool/default/c"},
		},
		{
			name:  "NotIn b on the zone, the list a, b, c -> a and c",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Requirement(zone, v1.NodeSelectorOpNotIn, "b").Obj()},
			zones: []string{"a", "b", "c"},
			want:  []string{"nodepool/default/a", "nodepool/default/c"},
		},
		{
			name:  "In a, d without node class zones, the list a, b, c -> the requirement wins: a and d",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{makeNodePool("default").Zones("a", "d").Obj()},
			zones: []string{"a", "b", "c"},
			want:  []string{"nodepool/default/a", "nodepool/default/d"},
		},
		{
			name:    "In a, b, z with node class zones a, b, c -> a and b, and z reported as a zone its node class does not serve",
			nodes:   nodesInZones("a", "b"),
			pools:   []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("default").Zones("z", "a", "b").Obj()},
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b", "c")},
			want:    []string{"nodepool/default/a", "nodepool/default/b"},
			wantUnserved: []autoscale.UnservedZones{
				{NodePool: "default", NodeClass: ec2Ref, Zones: []string{"z"}, Served: []string{"a", "b", "c"}},
			},
		},
		{
			name:    "In y, z only, node class zones a, b -> no node at all, both reported",
			nodes:   nodesInZones("a", "b"),
			pools:   []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("default").Zones("z", "y").Obj()},
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b")},
			wantUnserved: []autoscale.UnservedZones{
				{NodePool: "default", NodeClass: ec2Ref, Zones: []string{"y", "z"}, Served: []string{"a", "b"}},
			},
		},
		{
			name:    "a template label pinning zone c, node class zones a, b -> no node, c reported",
			nodes:   nodesInZones("a"),
			pools:   []*karpenterv1.NodePool{makeNodePool("pinned").EC2NodeClass("default").TemplateLabel(zone, "c").Obj()},
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b")},
			wantUnserved: []autoscale.UnservedZones{
				{NodePool: "pinned", NodeClass: ec2Ref, Zones: []string{"c"}, Served: []string{"a", "b"}},
			},
		},
		{
			name:    "DoesNotExist on the zone, node class zones a, b -> no node: each subnet is in a zone",
			nodes:   nodesInZones("a"),
			pools:   []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("default").Requirement(zone, v1.NodeSelectorOpDoesNotExist).Obj()},
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b")},
		},
		{
			name:    "two NodePools on two EC2NodeClasses -> each its own class's zones",
			nodes:   nodesInZones("a"),
			pools:   []*karpenterv1.NodePool{makeNodePool("east").EC2NodeClass("east").Obj(), makeNodePool("west").EC2NodeClass("west").Obj()},
			classes: []autoscale.NodeClass{ec2Class("east", "e1", "e2"), ec2Class("west", "w1")},
			want:    []string{"nodepool/east/e1", "nodepool/east/e2", "nodepool/west/w1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Derive(autoscale.Inputs{Nodes: tt.nodes, NodePools: tt.pools, NodeClasses: tt.classes, Zones: tt.zones})
			if diff := cmp.Diff(tt.want, names(got.Templates)); diff != "" {
				t.Errorf("template names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantUnserved, got.UnservedZones); diff != "" {
				t.Errorf("unserved zones (-want +got):\n%s", diff)
			}
		})
	}
}

func TestATemplateInANodeClassZoneCarriesThatZoneAndTheNodePoolsLabels(t *testing.T) {
	got := autoscale.Templates(autoscale.Inputs{
		Nodes:       nodesInZones("a"),
		NodePools:   []*karpenterv1.NodePool{makeNodePool("default").EC2NodeClass("default").TemplateLabel("team", "web").Obj()},
		NodeClasses: []autoscale.NodeClass{ec2Class("default", "c")},
	})
	want := []spread.Template{fromPool("nodepool/default/c", "default", zone, "c", "team", "web")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
}

func TestTheMessageOfAnUnservedZoneNamesItsNodePoolNodeClassAndRemedy(t *testing.T) {
	u := autoscale.UnservedZones{
		NodePool:  "web",
		NodeClass: karpenterv1.NodeClassReference{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "default"},
		Zones:     []string{"us-west-2d"},
		Served:    []string{"us-west-2a", "us-west-2b"},
	}
	want := "NodePool web requires zone us-west-2d, which its EC2NodeClass default does not serve (its subnets are in us-west-2a, us-west-2b): " +
		"Karpenter never adds a node there but counts it as a topology domain, so pods spread over it can stay Pending. " +
		"Remedy: remove us-west-2d from the NodePool's topology.kubernetes.io/zone requirement, or give the EC2NodeClass a subnet in us-west-2d."
	if diff := cmp.Diff(want, u.Message()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestUnservedListsEachZoneWithTheNodePoolAndNodeClassRequiringIt(t *testing.T) {
	ref := func(name string) karpenterv1.NodeClassReference {
		return karpenterv1.NodeClassReference{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: name}
	}
	tests := []struct {
		name string
		d    autoscale.Derived
		want []spread.UnservedZone
	}{
		{
			name: "no NodePool requires an unserved zone -> none",
		},
		{
			name: "NodePool web requires d and e its EC2NodeClass default cannot serve, NodePool batch d of its EC2NodeClass spot -> d twice by NodePool, then e, sorted by zone",
			d: autoscale.Derived{UnservedZones: []autoscale.UnservedZones{
				{NodePool: "web", NodeClass: ref("default"), Zones: []string{"d", "e"}, Served: []string{"a"}},
				{NodePool: "batch", NodeClass: ref("spot"), Zones: []string{"d"}, Served: []string{"a"}},
			}},
			want: []spread.UnservedZone{
				{Zone: "d", NodePool: "batch", NodeClass: "EC2NodeClass spot"},
				{Zone: "d", NodePool: "web", NodeClass: "EC2NodeClass default"},
				{Zone: "e", NodePool: "web", NodeClass: "EC2NodeClass default"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.d.Unserved()); diff != "" {
				t.Errorf("Unserved() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestANodePoolsZonesAndZoneIDsAreResolvedTogether(t *testing.T) {
	const zoneID = nodeclassv1.LabelTopologyZoneID
	// usw2 is the EC2NodeClass default with subnets in a, b and c, whose
	// status says their zone IDs.
	usw2 := autoscale.NodeClass{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "default",
		Zones: []string{"a", "b", "c"}, ZoneIDs: map[string]string{"a": "usw2-az1", "b": "usw2-az2", "c": "usw2-az3"}}
	pool := func() *nodePoolWrapper { return makeNodePool("default").EC2NodeClass("default") }
	nodeIn := func(name, z, id string) *v1.Node {
		return spreadtest.MakeNode().Name(name).Zone(z).Label(zoneID, id).Obj()
	}
	tests := []struct {
		name       string
		nodes      []*v1.Node
		pool       *karpenterv1.NodePool
		classes    []autoscale.NodeClass
		zones      []string
		spreadKeys []string
		want       []spread.Template
	}{
		{
			name:    "zone-id In usw2-az1 -> only zone a, labelled with its zone and that zone ID",
			pool:    pool().Requirement(zoneID, v1.NodeSelectorOpIn, "usw2-az1").Obj(),
			classes: []autoscale.NodeClass{usw2},
			want:    []spread.Template{fromPool("nodepool/default/a", "default", zone, "a", zoneID, "usw2-az1")},
		},
		{
			name:    "no requirement -> a, b and c, each with its own zone ID",
			pool:    pool().Obj(),
			classes: []autoscale.NodeClass{usw2},
			want: []spread.Template{
				fromPool("nodepool/default/a", "default", zone, "a", zoneID, "usw2-az1"),
				fromPool("nodepool/default/b", "default", zone, "b", zoneID, "usw2-az2"),
				fromPool("nodepool/default/c", "default", zone, "c", zoneID, "usw2-az3"),
			},
		},
		{
			name:    "zone-id NotIn usw2-az2 -> a and c",
			pool:    pool().Requirement(zoneID, v1.NodeSelectorOpNotIn, "usw2-az2").Obj(),
			classes: []autoscale.NodeClass{usw2},
			want: []spread.Template{
				fromPool("nodepool/default/a", "default", zone, "a", zoneID, "usw2-az1"),
				fromPool("nodepool/default/c", "default", zone, "c", zoneID, "usw2-az3"),
			},
		},
		{
			name:    "zone In a, b and zone-id In usw2-az2, usw2-az3 -> only b, the one zone both allow",
			pool:    pool().Zones("a", "b").Requirement(zoneID, v1.NodeSelectorOpIn, "usw2-az2", "usw2-az3").Obj(),
			classes: []autoscale.NodeClass{usw2},
			want:    []spread.Template{fromPool("nodepool/default/b", "default", zone, "b", zoneID, "usw2-az2")},
		},
		{
			name:    "zone NotIn a and zone-id In usw2-az1 -> no node",
			pool:    pool().Requirement(zone, v1.NodeSelectorOpNotIn, "a").Requirement(zoneID, v1.NodeSelectorOpIn, "usw2-az1").Obj(),
			classes: []autoscale.NodeClass{usw2},
		},
		{
			name:    "zone-id DoesNotExist -> no node: every subnet has a zone ID",
			pool:    pool().Requirement(zoneID, v1.NodeSelectorOpDoesNotExist).Obj(),
			classes: []autoscale.NodeClass{usw2},
		},
		{
			name:    "a template label zone-id usw2-az3 -> only c",
			pool:    pool().TemplateLabel(zoneID, "usw2-az3").Obj(),
			classes: []autoscale.NodeClass{usw2},
			want:    []spread.Template{fromPool("nodepool/default/c", "default", zone, "c", zoneID, "usw2-az3")},
		},
		{
			name:       "a policy spreads on zone-id, zone-id Exists -> the zone ID in each name too",
			pool:       pool().Requirement(zoneID, v1.NodeSelectorOpExists).Zones("a", "c").Obj(),
			classes:    []autoscale.NodeClass{usw2},
			spreadKeys: []string{zoneID},
			want: []spread.Template{
				fromPool("nodepool/default/a,usw2-az1", "default", zone, "a", zoneID, "usw2-az1"),
				fromPool("nodepool/default/c,usw2-az3", "default", zone, "c", zoneID, "usw2-az3"),
			},
		},
		{
			name:    "a node class status without zone IDs, a node in a labelled usw2-az1 -> a takes the node's zone ID, b and c carry none",
			nodes:   []*v1.Node{nodeIn("n1", "a", "usw2-az1")},
			pool:    pool().Obj(),
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b", "c")},
			want: []spread.Template{
				fromPool("nodepool/default/a", "default", zone, "a", zoneID, "usw2-az1"),
				fromPool("nodepool/default/b", "default", zone, "b"),
				fromPool("nodepool/default/c", "default", zone, "c"),
			},
		},
		{
			name:    "zone-id In usw2-az2 and no zone ID known for any zone -> no node: none is known to be usw2-az2",
			pool:    pool().Requirement(zoneID, v1.NodeSelectorOpIn, "usw2-az2").Obj(),
			classes: []autoscale.NodeClass{ec2Class("default", "a", "b", "c")},
		},
		{
			name:  "no node class, the list a, b, nodes in a and b with their zone IDs, zone-id In usw2-az2 -> only b",
			nodes: []*v1.Node{nodeIn("n1", "a", "usw2-az1"), nodeIn("n2", "b", "usw2-az2")},
			pool:  makeNodePool("default").Requirement(zoneID, v1.NodeSelectorOpIn, "usw2-az2").Obj(),
			zones: []string{"a", "b"},
			want:  []spread.Template{fromPool("nodepool/default/b", "default", zone, "b", zoneID, "usw2-az2")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Templates(autoscale.Inputs{Nodes: tt.nodes, NodePools: []*karpenterv1.NodePool{tt.pool}, NodeClasses: tt.classes, Zones: tt.zones, SpreadKeys: tt.spreadKeys})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("templates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAZoneIsUnservedOnlyWhenNoSourceServesIt(t *testing.T) {
	ec2Ref := karpenterv1.NodeClassReference{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "default"}
	web := makeNodePool("web").EC2NodeClass("default").Zones("a", "d", "e").Obj()
	tests := []struct {
		name     string
		nodes    []*v1.Node
		pools    []*karpenterv1.NodePool
		declared []autoscale.Declared
		want     []autoscale.UnservedZones
		// wantUnserved is what the index and the health controller get.
		wantUnserved []spread.UnservedZone
	}{
		{
			name:  "web requires d and e, which its EC2NodeClass does not serve, and nothing else does -> both unserved",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{web},
			want:  []autoscale.UnservedZones{{NodePool: "web", NodeClass: ec2Ref, Zones: []string{"d", "e"}, Served: []string{"a", "b"}}},
			wantUnserved: []spread.UnservedZone{
				{Zone: "d", NodePool: "web", NodeClass: "EC2NodeClass default"},
				{Zone: "e", NodePool: "web", NodeClass: "EC2NodeClass default"},
			},
		},
		{
			name:  "NodePool batch on the EC2NodeClass east serves d and e -> neither is unserved",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{web, makeNodePool("batch").EC2NodeClass("east").Obj()},
		},
		{
			name:         "an existing node in e -> only d is unserved",
			nodes:        nodesInZones("a", "e"),
			pools:        []*karpenterv1.NodePool{web},
			want:         []autoscale.UnservedZones{{NodePool: "web", NodeClass: ec2Ref, Zones: []string{"d"}, Served: []string{"a", "b"}}},
			wantUnserved: []spread.UnservedZone{{Zone: "d", NodePool: "web", NodeClass: "EC2NodeClass default"}},
		},
		{
			name:     "a NodeTemplate in d and a node in e -> nothing unserved",
			nodes:    nodesInZones("a", "e"),
			pools:    []*karpenterv1.NodePool{web},
			declared: []autoscale.Declared{{Name: "gpu-d", Labels: labels(zone, "d")}},
		},
		{
			name:  "batch would serve d and e but is at its node limit -> both stay unserved",
			nodes: nodesInZones("a"),
			pools: []*karpenterv1.NodePool{web, makeNodePool("batch").EC2NodeClass("east").Limit(karpenterv1.ResourceNodes, "2").Uses(karpenterv1.ResourceNodes, "2").Obj()},
			want:  []autoscale.UnservedZones{{NodePool: "web", NodeClass: ec2Ref, Zones: []string{"d", "e"}, Served: []string{"a", "b"}}},
			wantUnserved: []spread.UnservedZone{
				{Zone: "d", NodePool: "web", NodeClass: "EC2NodeClass default"},
				{Zone: "e", NodePool: "web", NodeClass: "EC2NodeClass default"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Derive(autoscale.Inputs{
				Nodes: tt.nodes, NodePools: tt.pools, Declared: tt.declared,
				NodeClasses: []autoscale.NodeClass{ec2Class("default", "a", "b"), ec2Class("east", "d", "e")},
			})
			if diff := cmp.Diff(tt.want, got.UnservedZones); diff != "" {
				t.Errorf("UnservedZones (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantUnserved, got.Unserved()); diff != "" {
				t.Errorf("Unserved() (-want +got):\n%s", diff)
			}
		})
	}
}
