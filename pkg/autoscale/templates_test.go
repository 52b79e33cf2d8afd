package autoscale_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const groupLabel = "eks.amazonaws.com/nodegroup"

// fromGroup is the template of group in zone z, with labels kv and taints.
func fromGroup(group, z string, kv []string, taints ...v1.Taint) spread.Template {
	return spread.Template{Name: "nodegroup/" + group + "/" + z, Source: "node group " + group, Labels: labels(kv...), Taints: taints}
}

func TestTemplatesFromNodeGroups(t *testing.T) {
	dedicated := v1.Taint{Key: "example.com/dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}
	tests := []struct {
		name       string
		nodes      []*v1.Node
		groupLabel string
		want       []spread.Template
	}{
		{
			name: "a group in two zones with a cordoned node yields one template per zone, modelled on a schedulable node, without the cordon",
			nodes: []*v1.Node{
				// ng-1 in a: the cordoned node comes first by name but is passed over.
				spreadtest.MakeNode().Name("ng1-a-0").Zone("a").Label(groupLabel, "ng-1").Label("stale", "yes").Cordoned().Obj(),
				spreadtest.MakeNode().Name("ng1-a-1").Zone("a").Label(groupLabel, "ng-1").Obj(),
				// ng-1 in b: only a cordoned node, which still shows the shape.
				spreadtest.MakeNode().Name("ng1-b-0").Zone("b").Label(groupLabel, "ng-1").Cordoned().
					Taint(dedicated.Key, dedicated.Value, dedicated.Effect).
					Taint("DeletionCandidateOfClusterAutoscaler", "1700000000", v1.TaintEffectPreferNoSchedule).
					Taint(v1.TaintNodeNotReady, "", v1.TaintEffectNoExecute).
					Taint("node.cloudprovider.kubernetes.io/uninitialized", "true", v1.TaintEffectNoSchedule).
					Taint("startup-taint.cluster-autoscaler.kubernetes.io/cni", "", v1.TaintEffectNoSchedule).
					Obj(),
				spreadtest.MakeNode().Name("other").Zone("c").Obj(),
			},
			groupLabel: groupLabel,
			want: []spread.Template{
				fromGroup("ng-1", "a", []string{zone, "a", groupLabel, "ng-1"}),
				fromGroup("ng-1", "b", []string{zone, "b", groupLabel, "ng-1"}, dedicated),
			},
		},
		{
			name: "two groups in one zone yield a template each, and the choice of node does not depend on the node order",
			nodes: []*v1.Node{
				spreadtest.MakeNode().Name("n3").Zone("a").Label(groupLabel, "ng-2").Label("size", "large").Obj(),
				spreadtest.MakeNode().Name("n2").Zone("a").Label(groupLabel, "ng-1").Label("seen", "second").Obj(),
				spreadtest.MakeNode().Name("n1").Zone("a").Label(groupLabel, "ng-1").Label("seen", "first").Obj(),
			},
			groupLabel: groupLabel,
			want: []spread.Template{
				fromGroup("ng-1", "a", []string{zone, "a", groupLabel, "ng-1", "seen", "first"}),
				fromGroup("ng-2", "a", []string{zone, "a", groupLabel, "ng-2", "size", "large"}),
			},
		},
		{
			name:       "a group whose nodes have no zone yields a template with an empty zone in its name",
			nodes:      []*v1.Node{spreadtest.MakeNode().Name("n1").Label(groupLabel, "ng-1").Obj()},
			groupLabel: groupLabel,
			want:       []spread.Template{fromGroup("ng-1", "", []string{groupLabel, "ng-1"})},
		},
		{
			name:  "without a node-group label configured no node-group template is derived",
			nodes: []*v1.Node{spreadtest.MakeNode().Name("n1").Zone("a").Label(groupLabel, "ng-1").Obj()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Templates(autoscale.Inputs{Nodes: tt.nodes, NodeGroupLabel: tt.groupLabel})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("templates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTemplatesOfAllSourcesAreSortedAndUniquelyNamed(t *testing.T) {
	gpu := v1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: v1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		in   autoscale.Inputs
		want []spread.Template
	}{
		{
			name: "a NodeTemplate yields the template of its name, labels and taints",
			in:   autoscale.Inputs{Declared: []autoscale.Declared{{Name: "gpu", Labels: labels("pool", "gpu"), Taints: []v1.Taint{gpu}}}},
			want: []spread.Template{{Name: "gpu", Source: "NodeTemplate gpu", Labels: labels("pool", "gpu"), Taints: []v1.Taint{gpu}}},
		},
		{
			name: "two NodeTemplates of one name yield one template, the later one",
			in: autoscale.Inputs{Declared: []autoscale.Declared{
				{Name: "gpu", Labels: labels("version", "old")},
				{Name: "gpu", Labels: labels("version", "new")},
			}},
			want: []spread.Template{{Name: "gpu", Source: "NodeTemplate gpu", Labels: labels("version", "new")}},
		},
		{
			name: "two NodePools of one name yield the templates of the later one",
			in: autoscale.Inputs{
				Nodes: nodesInZones("a"),
				NodePools: []*karpenterv1.NodePool{
					makeNodePool("default").TemplateLabel("version", "old").Obj(),
					makeNodePool("default").TemplateLabel("version", "new").Obj(),
				},
			},
			want: []spread.Template{fromPool("nodepool/default/a", "default", zone, "a", "version", "new")},
		},
		{
			name: "the templates of NodeTemplates, NodePools and node groups come sorted by name",
			in: autoscale.Inputs{
				Nodes:          []*v1.Node{spreadtest.MakeNode().Name("n1").Zone("a").Label(groupLabel, "ng-1").Obj()},
				Declared:       []autoscale.Declared{{Name: "zeta"}, {Name: "alpha"}},
				NodePools:      []*karpenterv1.NodePool{makeNodePool("default").Obj()},
				NodeGroupLabel: groupLabel,
			},
			want: []spread.Template{
				{Name: "alpha", Source: "NodeTemplate alpha"},
				fromGroup("ng-1", "a", []string{zone, "a", groupLabel, "ng-1"}),
				fromPool("nodepool/default/a", "default", zone, "a"),
				{Name: "zeta", Source: "NodeTemplate zeta"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := autoscale.Templates(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("templates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTemplatesDoNotShareMapsWithTheInputs(t *testing.T) {
	node := spreadtest.MakeNode().Name("n1").Zone("a").Label(groupLabel, "ng-1").Obj()
	declared := autoscale.Declared{Name: "gpu", Labels: labels("pool", "gpu")}
	pool := makeNodePool("default").TemplateLabel("team", "web").Obj()
	in := autoscale.Inputs{Nodes: []*v1.Node{node}, Declared: []autoscale.Declared{declared}, NodePools: []*karpenterv1.NodePool{pool}, NodeGroupLabel: groupLabel}
	want := []map[string]string{node.DeepCopy().Labels, labels("pool", "gpu"), labels("team", "web")}

	for _, tm := range autoscale.Templates(in) {
		tm.Labels["written"] = "by a caller"
	}
	got := []map[string]string{node.Labels, declared.Labels, pool.Spec.Template.Labels}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("input labels after writing into the templates (-want +got):\n%s", diff)
	}
}
