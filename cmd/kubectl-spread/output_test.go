package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

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

func TestEveryDocumentUnderDomainsNamesNoNode(t *testing.T) {
	live := fakeCluster(t, exampleWithOwners(t)...)
	tests := []struct {
		name string
		args []string
		// refused: the command refuses the format under domains.
		refused bool
		// wantKey is a key the document holds under domains.
		wantKey string
	}{
		{"check -o json counts the feasible nodes", []string{"check", "--cluster", exampleCluster, "--pod", examplePodWeb, "-o", "json"}, false, "feasibleNodeCount"},
		{"check -o yaml counts them too", []string{"check", "--cluster", exampleCluster, "--pod", examplePodWeb, "-o", "yaml"}, false, "feasibleNodeCount"},
		{"explain -o json counts them", []string{"explain", "deployment/web", "-n", "shop", "-o", "json"}, false, "feasibleNodeCount"},
		{"explain -o yaml counts them", []string{"explain", "deployment/web", "-n", "shop", "-o", "yaml"}, false, "feasibleNodeCount"},
		{"status -o json keeps the zones", []string{"status", "-n", "shop", "-o", "json"}, false, "domains"},
		{"status -o yaml keeps the zones", []string{"status", "-n", "shop", "-o", "yaml"}, false, "domains"},
		{"plan -o json is refused", []string{"plan", "-f", exampleDeploymentAPI, "--cluster", exampleCluster, "-o", "json"}, true, ""},
		{"plan -o yaml is refused", []string{"plan", "-f", exampleDeploymentAPI, "--cluster", exampleCluster, "-o", "yaml"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runWith(append(tt.args, "--message-detail", "domains"), &stdout, &stderr, live)
			if strings.Contains(stdout.String()+stderr.String(), "node-") {
				t.Errorf("under domains the output names a node:\n%s%s", stdout.String(), stderr.String())
			}
			if tt.refused {
				const want = "--message-detail domains hides: use --message-detail nodes"
				if code != exitBadInput || stdout.Len() > 0 || !strings.Contains(stderr.String(), want) {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, nothing printed, and an error saying %q", code, stdout.String(), stderr.String(), want)
				}
			} else {
				if code == exitBadInput {
					t.Fatalf("exit 2: %s", stderr.String())
				}
				var doc any
				if err := yaml.Unmarshal(stdout.Bytes(), &doc); err != nil {
					t.Fatalf("not one document: %v\n%s", err, stdout.String())
				}
				if !strings.Contains(stdout.String(), tt.wantKey) {
					t.Errorf("the document holds no %s:\n%s", tt.wantKey, stdout.String())
				}
			}
			// Under nodes the same command names the nodes: the check above
			// finds them when they are there.
			stdout.Reset()
			stderr.Reset()
			if code := runWith(append(tt.args, "--message-detail", "nodes"), &stdout, &stderr, live); code == exitBadInput {
				t.Fatalf("under nodes: exit 2: %s", stderr.String())
			}
			if !strings.HasPrefix(tt.args[0], "status") && !strings.Contains(stdout.String(), "node-") {
				t.Errorf("under nodes the output names no node:\n%s", stdout.String())
			}
		})
	}
}
