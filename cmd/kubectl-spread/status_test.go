package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestStatusTableOfTheExampleCluster(t *testing.T) {
	got := runCommand(t, "status", "--cluster", exampleCluster, "-n", "shop")
	want := result{code: exitAllowed, stdout: "" +
		"NAMESPACE  WORKLOAD            POLICY            PODS  TOPOLOGY KEY                 DOMAINS            SKEW/MAX  STATE\n" +
		"shop       ReplicaSet/web-abc  shop/zone-spread  5     topology.kubernetes.io/zone  zone-a=3,zone-b=2  1/1       uncovered\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestStatusOfALiveCluster(t *testing.T) {
	zoneResult := func(kind, name string, state health.State, pods int, domains map[string]int, minimum, maximum int) health.Result {
		return health.Result{
			Kind: kind, Namespace: "shop", Name: name, Policy: examplePolicy, PolicyKind: "SpreadPolicy", State: state, Pods: pods,
			Constraints: []spread.Spread{{
				TopologyKey: zoneKey, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule,
				Domains: domains, DomainCount: len(domains), Min: minimum, Max: maximum, Skew: maximum - minimum,
			}},
		}
	}
	// The StatefulSet's pods carry the policy's constraint, as the webhook
	// wrote it, and both run in zone-a.
	objs := exampleWithOwners(t)
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.Labels["app"] == "db" {
			p.Spec.TopologySpreadConstraints = injected(map[string]string{"app": "db"})
			if p.Name == "db-1" {
				p.Spec.NodeName = "node-a2"
			}
		}
	}
	tests := []struct {
		name string
		args []string
		want []health.Result
	}{
		{
			name: "a Deployment is audited through its newest ReplicaSet; pods that carry the policy's constraint piled in one zone are skewed",
			args: []string{"status", "-n", "shop", "-o", "json"},
			want: []health.Result{
				zoneResult("Deployment", "web", health.StateUncovered, 5, map[string]int{"zone-a": 3, "zone-b": 2}, 2, 3),
				zoneResult("StatefulSet", "db", health.StateSkewed, 2, map[string]int{"zone-a": 2, "zone-b": 0}, 0, 2),
			},
		},
		{
			name: "a namespace without a policy's workloads has none",
			args: []string{"status", "-n", "default", "-o", "json"},
			want: []health.Result{},
		},
		{
			name: "every namespace",
			args: []string{"status", "-A", "-o", "json"},
			want: []health.Result{
				zoneResult("Deployment", "web", health.StateUncovered, 5, map[string]int{"zone-a": 3, "zone-b": 2}, 2, 3),
				zoneResult("StatefulSet", "db", health.StateSkewed, 2, map[string]int{"zone-a": 2, "zone-b": 0}, 0, 2),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runLive(t, fakeCluster(t, objs...), tt.args...)
			if got.code != exitAllowed {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			var results []health.Result
			if err := json.Unmarshal([]byte(got.stdout), &results); err != nil {
				t.Fatalf("decoding %q: %v", got.stdout, err)
			}
			if diff := cmp.Diff(tt.want, results); diff != "" {
				t.Errorf("status -o json (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusRefusesConflictingScopes(t *testing.T) {
	got := runCommand(t, "status", "--cluster", exampleCluster, "-n", "shop", "-A")
	want := result{code: exitBadInput, stderr: "kubectl-spread: --namespace and --all-namespaces exclude each other\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// runLive runs the command against the cluster connect serves.
func runLive(t *testing.T, connect connectFunc, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runWith(args, &stdout, &stderr, connect)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestStatusSaysWhichPoliciesNoNodeCanReachTheMinDomainsOf(t *testing.T) {
	example, err := os.ReadFile(exampleCluster)
	if err != nil {
		t.Fatal(err)
	}
	const constraint = "    whenUnsatisfiable: DoNotSchedule\n  validation:"
	if !bytes.Contains(example, []byte(constraint)) {
		t.Fatalf("%s no longer holds the policy's constraint as %q", exampleCluster, constraint)
	}
	tests := []struct {
		name       string
		minDomains string
		want       string
	}{
		{
			name:       "the example's nodes in zones a, b and c, policy shop/zone-spread with minDomains 4 -> not Ready, the remedy asks for 1 more zone",
			minDomains: "4",
			want: "Policy shop/zone-spread is not Ready (MinDomainsOutOfReach): spec.constraints[0]: minDomains 4 over topology.kubernetes.io/zone, " +
				"but the nodes and every node an autoscaler can add reach only 3 domains (zone-a, zone-b, zone-c), so the global minimum stays 0 and the pods " +
				"beyond maxSkew per domain stay Pending. Remedy: let the autoscaler add nodes in 1 more zone (the zones of a NodePool or of its node class, " +
				"or the chart's autoscaler.zones), or lower minDomains to 3.\n",
		},
		{
			name:       "the same with minDomains 3 -> nothing more than the table",
			minDomains: "3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cluster.yaml")
			data := bytes.Replace(example, []byte(constraint), []byte("    whenUnsatisfiable: DoNotSchedule\n    minDomains: "+tt.minDomains+"\n  validation:"), 1)
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			got := runCommand(t, "status", "--cluster", file, "-n", "shop")
			if got.code != exitAllowed {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			_, after, _ := strings.Cut(got.stdout, "\n\n")
			if diff := cmp.Diff(tt.want, after); diff != "" {
				t.Errorf("status after the table (-want +got):\n%s", diff)
			}
		})
	}
}

// unservedZonePool is a NodePool that requires zone-a, zone-b and zone-d,
// and its EC2NodeClass, whose subnets are in zone-a, zone-b and zone-c.
const unservedZonePool = `
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: topology.kubernetes.io/zone, operator: In, values: [zone-a, zone-b, zone-d]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-prod
status:
  subnets:
  - {id: subnet-1, zone: zone-a}
  - {id: subnet-2, zone: zone-b}
  - {id: subnet-3, zone: zone-c}
`

func TestStatusSaysWhichPoliciesSpreadOverAZoneNoNodeComesUpIn(t *testing.T) {
	example, err := os.ReadFile(exampleCluster)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pool string
		args []string
		want string
	}{
		{
			name: "the example's zone policy, NodePool general requires zone-d its EC2NodeClass cannot serve, messageDetail nodes -> not Ready, the NodePool named",
			pool: unservedZonePool,
			want: "Policy shop/zone-spread is not Ready (ZoneNotServed): spec.constraints[0] spread over topology.kubernetes.io/zone. " +
				"Zone zone-d is required by NodePool general (EC2NodeClass default), whose node class cannot serve it: no node comes up there, so pods that need it stay Pending. " +
				"Remedy: remove zone-d from the topology.kubernetes.io/zone requirement of NodePool general, or give its node class a subnet there.\n",
		},
		{
			name: "the same under messageDetail domains -> the zone named, not the NodePool",
			pool: unservedZonePool,
			args: []string{"--message-detail", "domains"},
			want: "Policy shop/zone-spread is not Ready (ZoneNotServed): spec.constraints[0] spread over topology.kubernetes.io/zone. " +
				"Zone zone-d is required by an autoscaler's node pool whose node class cannot serve it: no node comes up there, so pods that need it stay Pending. " +
				"Remedy: ask the cluster's operator to remove zone-d from the node pool's zone requirement, or to let its node class serve it.\n",
		},
		{
			name: "the NodePool requires zone-c instead, which its EC2NodeClass serves -> nothing more than the table",
			pool: strings.Replace(unservedZonePool, "zone-d]", "zone-c]", 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cluster.yaml")
			if err := os.WriteFile(file, append(slices.Clone(example), tt.pool...), 0o644); err != nil {
				t.Fatal(err)
			}
			got := runCommand(t, append([]string{"status", "--cluster", file, "-n", "shop"}, tt.args...)...)
			if got.code != exitAllowed {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			_, after, _ := strings.Cut(got.stdout, "\n\n")
			if diff := cmp.Diff(tt.want, after); diff != "" {
				t.Errorf("status after the table (-want +got):\n%s", diff)
			}
		})
	}
}
