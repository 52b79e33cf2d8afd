package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spreadguard/spreadguard/pkg/forecast"
)

const exampleDeploymentAPI = "../../examples/deployment-api.yaml"

func TestPlan(t *testing.T) {
	_, write := tempFiles(t)
	two := write("two.yaml", "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: a}\n---\napiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: b}\n")
	node := write("node.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
	refused := "spreadguard: replica 3 of 9 would be refused: zone-c has no schedulable node; " +
		"zone: zone-a=1 zone-b=1 zone-c=0, maxSkew 1 (policy shop/zone-spread)\n"

	tests := []struct {
		name string
		args []string
		want result
	}{
		{
			name: "a Deployment of 9 over zones a and b with zone-c cordoned and minDomains 3, offline -> replica 3 refused, exit 1",
			args: []string{"plan", "-f", exampleDeploymentAPI, "--cluster", exampleCluster},
			want: result{code: exitDenied, stdout: "Deployment shop/api: replicas 1 to 9, policy shop/zone-spread (Deny)\n" +
				"  after replica 2  zone: zone-a=1 zone-b=1 zone-c=0\n" + refused},
		},
		{
			name: "the same Deployment at 2 replicas -> both placed, exit 0",
			args: []string{"plan", "-f", exampleDeploymentAPI, "--cluster", exampleCluster, "--replicas", "2"},
			want: result{code: exitAllowed, stdout: "Deployment shop/api: replicas 1 to 2, policy shop/zone-spread (Deny)\n" +
				"  after replica 2  zone: zone-a=1 zone-b=1 zone-c=0\nAll 2 replicas placed.\n"},
		},
		{
			name: "the existing ReplicaSet web-abc with 5 bound pods scaled to 8 -> replicas 6 to 8 placed, b then a then b",
			args: []string{"plan", "replicaset/web-abc", "-n", "shop", "--replicas", "8", "--cluster", exampleCluster},
			want: result{code: exitAllowed, stdout: "ReplicaSet shop/web-abc: replicas 6 to 8, policy shop/zone-spread (Deny)\n" +
				"  after replica 6  zone: zone-a=3 zone-b=3\n  after replica 8  zone: zone-a=4 zone-b=4\nAll 3 replicas placed.\n"},
		},
		{
			name: "the live Deployment web, whose newest ReplicaSet is web-abc, scaled to 12 -> forecast from its 5 pods",
			args: []string{"plan", "deployment/web", "-n", "shop", "--replicas", "12"},
			want: result{code: exitAllowed, stdout: "Deployment shop/web: replicas 6 to 12, policy shop/zone-spread (Deny)\n" +
				"  after replica 6  zone: zone-a=3 zone-b=3\n  after replica 8  zone: zone-a=4 zone-b=4\n" +
				"  after replica 10  zone: zone-a=5 zone-b=5\n  after replica 12  zone: zone-a=6 zone-b=6\nAll 7 replicas placed.\n"},
		},
		{
			name: "neither -f nor TYPE/NAME -> bad input",
			args: []string{"plan", "--cluster", exampleCluster},
			want: result{code: exitBadInput, stderr: "kubectl-spread: plan needs -f WORKLOAD.yaml or TYPE/NAME, one of them\n"},
		},
		{
			name: "a file of two workloads -> bad input naming the file",
			args: []string{"plan", "-f", two, "--cluster", exampleCluster},
			want: result{code: exitBadInput, stderr: "kubectl-spread: " + two + ": holds 2 workloads, want exactly one\n"},
		},
		{
			name: "a file holding a Node -> not a workload",
			args: []string{"plan", "-f", node, "--cluster", exampleCluster},
			want: result{code: exitBadInput, stderr: "kubectl-spread: " + node +
				": a Node is not a workload (want one Deployment, StatefulSet, ReplicaSet or ReplicationController)\n"},
		},
		{
			name: "a DaemonSet by name -> cannot plan",
			args: []string{"plan", "daemonset/agent", "--cluster", exampleCluster},
			want: result{code: exitBadInput, stderr: "kubectl-spread: cannot plan \"daemonset\": want deployment, statefulset, replicaset or replicationcontroller\n"},
		},
		{
			name: "--replicas -3 -> bad input",
			args: []string{"plan", "-f", exampleDeploymentAPI, "--cluster", exampleCluster, "--replicas", "-3"},
			want: result{code: exitBadInput, stderr: "kubectl-spread: invalid --replicas -3 (want 0 or more)\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runWith(tt.args, &stdout, &stderr, fakeCluster(t, exampleWithOwners(t)...))
			if diff := cmp.Diff(tt.want, result{code: code, stdout: stdout.String(), stderr: stderr.String()}, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("run() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanJSONCarriesTheForecastAndItsWarning(t *testing.T) {
	r := runCommand(t, "plan", "-f", exampleDeploymentAPI, "--cluster", exampleCluster, "-o", "json")
	if r.code != exitDenied {
		t.Fatalf("exit %d (stderr %q), want %d", r.code, r.stderr, exitDenied)
	}
	var got struct {
		forecast.Forecast
		Warning string `json:"warning"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("decoding %s: %v", r.stdout, err)
	}
	if got.Warning != got.Forecast.Warning() || got.Refused == nil || got.Refused.Replica != 3 {
		t.Errorf("warning %q, refused %+v: want replica 3 refused and the warning that says so", got.Warning, got.Refused)
	}
	var nodes []string
	for _, p := range got.Placements {
		nodes = append(nodes, p.Node)
	}
	if diff := cmp.Diff([]string{"node-a1", "node-b1"}, nodes); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
}
