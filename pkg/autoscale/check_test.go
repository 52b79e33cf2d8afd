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

// outcome is what a check says about a pod and the templates.
type outcome struct {
	Verdict           spread.Verdict
	FeasibleTemplates []string
}

// webPod is a pod of app=web, bound to node when it is not "".
func webPod(name, node string) *v1.Pod {
	return spreadtest.MakePod().Name(name).Label("app", "web").Node(node).Obj()
}

// The three cases of issue 14: pods that only a new node fits, which the
// derived templates let through.
func TestDerivedTemplatesAdmitWhatOnlyANewNodeFits(t *testing.T) {
	zoneSpread := func() *spreadtest.ConstraintWrapper { return spreadtest.Constraint(1, zone).MatchLabel("app", "web") }
	gpu := v1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: v1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		in   autoscale.Inputs
		pods []*v1.Pod
		pod  *v1.Pod
		// without is the outcome with no template, with the outcome with
		// the derived ones.
		without, with outcome
	}{
		{
			name: "minDomains 3 with nodes in two zones and a NodePool allowing three fits a new node in the third zone",
			in: autoscale.Inputs{
				Nodes:     nodesInZones("a", "b"),
				NodePools: []*karpenterv1.NodePool{makeNodePool("default").Zones("a", "b", "c").Obj()},
			},
			pods:    []*v1.Pod{webPod("w1", "node-a"), webPod("w2", "node-b")},
			pod:     spreadtest.MakePod().Name("w3").Label("app", "web").SpreadConstraint(zoneSpread().MinDomains(3).Obj()).Obj(),
			without: outcome{Verdict: spread.VerdictUnsatisfiable},
			with:    outcome{Verdict: spread.VerdictFeasibleOnNewNode, FeasibleTemplates: []string{"nodepool/default/c"}},
		},
		{
			name: "a cordoned zone counted under nodeTaintsPolicy Ignore fits a new node of the node group in that zone",
			in: autoscale.Inputs{
				Nodes: []*v1.Node{
					spreadtest.MakeNode().Name("ng1-a").Zone("a").Label(groupLabel, "ng-1").Cordoned().Obj(),
					spreadtest.MakeNode().Name("ng1-b").Zone("b").Label(groupLabel, "ng-1").Obj(),
					spreadtest.MakeNode().Name("ng1-c").Zone("c").Label(groupLabel, "ng-1").Obj(),
				},
				NodeGroupLabel: groupLabel,
			},
			pods:    []*v1.Pod{webPod("w1", "ng1-b"), webPod("w2", "ng1-c")},
			pod:     spreadtest.MakePod().Name("w3").Label("app", "web").SpreadConstraint(zoneSpread().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj(),
			without: outcome{Verdict: spread.VerdictUnsatisfiable},
			with:    outcome{Verdict: spread.VerdictFeasibleOnNewNode, FeasibleTemplates: []string{"nodegroup/ng-1/a"}},
		},
		{
			name: "a pod whose affinity fits only a node group scaled to zero fits the NodeTemplate that declares it",
			in: autoscale.Inputs{
				Nodes: []*v1.Node{
					spreadtest.MakeNode().Name("ng1-a").Zone("a").Label(groupLabel, "ng-1").Obj(),
					spreadtest.MakeNode().Name("ng1-b").Zone("b").Label(groupLabel, "ng-1").Obj(),
				},
				Declared:       []autoscale.Declared{{Name: "gpu", Labels: labels(zone, "a", "pool", "gpu"), Taints: []v1.Taint{gpu}}},
				NodeGroupLabel: groupLabel,
			},
			pods: []*v1.Pod{webPod("w1", "ng1-a")},
			pod: spreadtest.MakePod().Name("w2").Label("app", "web").NodeSelector("pool", "gpu").
				Toleration(gpu.Key, v1.TolerationOpEqual, gpu.Value, gpu.Effect).
				SpreadConstraint(zoneSpread().Obj()).Obj(),
			without: outcome{Verdict: spread.VerdictNoCandidateNodes},
			with:    outcome{Verdict: spread.VerdictFeasibleOnNewNode, FeasibleTemplates: []string{"gpu"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(ts []spread.Template) outcome {
				t.Helper()
				res, err := spread.Snapshot{Nodes: tt.in.Nodes, Pods: tt.pods, Templates: ts}.Check(tt.pod, spread.Options{})
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return outcome{Verdict: res.Verdict, FeasibleTemplates: res.FeasibleTemplates}
			}
			if diff := cmp.Diff(tt.without, check(nil)); diff != "" {
				t.Errorf("without templates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.with, check(autoscale.Templates(tt.in))); diff != "" {
				t.Errorf("with the derived templates (-want +got):\n%s", diff)
			}
		})
	}
}
