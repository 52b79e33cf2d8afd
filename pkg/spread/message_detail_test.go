package spread_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestMessageDetailDomainsNamesNoNodeTaintOrLabel(t *testing.T) {
	// Zones a and b hold 2 foo=bar pods each; zone c's only node belongs to
	// another tenant and is tainted for it.
	nodes := []*v1.Node{
		zoneNode("a1", "a").Obj(), zoneNode("b1", "b").Obj(),
		zoneNode("tenant-b-gpu-1", "c").Taint("dedicated", "tenant-b", v1.TaintEffectNoSchedule).Obj(),
	}
	snap := spread.Snapshot{Nodes: nodes, Pods: fooPods("a1", "a1", "b1", "b1")}
	tests := []struct {
		name      string
		pod       *v1.Pod
		detail    spread.MessageDetail
		want      []string
		wantNever []string
	}{
		{
			name:   "zone constraint, tenant-b's tainted node pins zone c at 0, detail nodes -> the node and its taint are named",
			pod:    incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			detail: spread.DetailNodes,
			want:   []string{"a=2, b=2, c=0", "tenant-b-gpu-1", "untolerated taint dedicated=tenant-b:NoSchedule", "Remedy:"},
		},
		{
			name:      "the same pod, detail domains -> the counts, the minimum, the reason and the remedy, but no node name nor taint",
			pod:       incoming().SpreadConstraint(zoneConstraint().Obj()).Obj(),
			detail:    spread.DetailDomains,
			want:      []string{"a=2, b=2, c=0", "global minimum of spec.topologySpreadConstraints[0] is 0", "1 node in zone c is excluded: a taint the pod does not tolerate", "Remedy:"},
			wantNever: []string{"tenant-b", "dedicated", "a1", "b1"},
		},
		{
			name: "hostname constraint, maxSkew 1, nodes [2,2,0] with the empty node tainted, detail domains -> nodes counted by how many they hold",
			pod: incoming().SpreadConstraint(hostConstraint().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).
				Obj()).Obj(),
			detail:    spread.DetailDomains,
			want:      []string{"2 nodes with 2, 1 node with 0", "Remedy:"},
			wantNever: []string{"tenant-b", "dedicated", "a1", "b1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := checkBoth(t, snap, tt.pod, spread.Options{Detail: tt.detail})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != spread.VerdictUnsatisfiable {
				t.Fatalf("verdict = %s, want Unsatisfiable", res.Verdict)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Message, w) {
					t.Errorf("message lacks %q:\n%s", w, res.Message)
				}
			}
			for _, w := range tt.wantNever {
				if strings.Contains(res.Message, w) {
					t.Errorf("message shows %q:\n%s", w, res.Message)
				}
			}
		})
	}
}
