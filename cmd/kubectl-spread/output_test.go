package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// TestReadableReportUnderDomainsDetail pins the readable report of a per-host
// denial worded under domains: nodes and templates counted by reason, the
// hosts by how many hold each count.
func TestReadableReportUnderDomainsDetail(t *testing.T) {
	objs := []runtime.Object{
		st.MakeNode().Name("a1").Zone("a").Obj(),
		st.MakeNode().Name("b1").Zone("b").Obj(),
		st.MakeNode().Name("tenant-b-node").Zone("c").Taint("dedicated", "tenant-b", v1.TaintEffectNoSchedule).Obj(),
		st.MakePod().Name("web-1").Label("app", "web").Node("a1").Obj(),
		st.MakePod().Name("web-2").Label("app", "web").Node("b1").Obj(),
		&v1alpha1.NodeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b-gpu"}, Spec: v1alpha1.NodeTemplateSpec{
			Labels: map[string]string{v1.LabelTopologyZone: "c"},
			Taints: []v1.Taint{{Key: "dedicated", Value: "tenant-b", Effect: v1.TaintEffectNoSchedule}},
		}},
	}
	store, err := lookup.NewStore(objs...)
	if err != nil {
		t.Fatal(err)
	}
	pod := st.MakePod().Name("web-3").Label("app", "web").
		SpreadConstraint(st.Constraint(1, v1.LabelHostname).MatchLabel("app", "web").NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj()
	cfg := engine.Config{DefaultAction: v1alpha1.ActionDeny, MessageDetail: spread.DetailDomains}
	rev, err := review(pod, store, cfg, lookup.TemplateOptions{NodeTemplates: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeReview(&b, "", rev, cfg.MessageDetail); err != nil {
		t.Fatal(err)
	}
	want := `Pod default/web-3: DENIED (action Deny)

Policy:    none
Injected:  nothing (pod declares its own topologySpreadConstraints)
Verdict:   Unsatisfiable

spec.topologySpreadConstraints[0]: kubernetes.io/hostname, maxSkew 1, DoNotSchedule
  selector app=web; the pod itself matches: yes (+1)
  nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore, minDomains 1
  DOMAIN   MATCHING PODS  SKEW IF PLACED HERE (PODS + SELF - MIN)  MAXSKEW 1
  2 nodes  1              1 + 1 - 0 = 2                            exceeded
  1 node   0              0 + 1 - 0 = 1                            ok
  global minimum: 0

Feasible nodes: none
Not feasible:
  has a taint the pod does not tolerate  1 node
  would exceed maxSkew                   2 nodes

Nodes an autoscaler can add:
  has a taint the pod does not tolerate  1 template

Message: spec.topologySpreadConstraints[0] (topologyKey kubernetes.io/hostname, maxSkew 1) cannot be satisfied on any node. ` +
		`Matching pods (selector "app=web") per kubernetes.io/hostname: 2 nodes with 1, 1 node with 0. ` +
		`The global minimum of spec.topologySpreadConstraints[0] is 0: a node has the fewest matching pods. ` +
		`Every node the pod can use is in a domain where the skew would exceed 1: a node (1 + 1 - 0 = 2), a node (1 + 1 - 0 = 2). ` +
		`1 node is excluded: a taint the pod does not tolerate. ` +
		`Remedy: set nodeTaintsPolicy: Honor so tainted and cordoned nodes do not pin the global minimum at 0, or add capacity the pod can use in a node. ` +
		`No node an autoscaler can add fits either (1 template: 1 has a taint the pod does not tolerate).
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
