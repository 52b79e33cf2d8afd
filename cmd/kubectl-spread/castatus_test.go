package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spreadguard/spreadguard/pkg/lookup"
)

// nodeGroupCluster is a cluster of the EKS managed node group web: web-a in
// zone a, cordoned during an upgrade, and web-b in zone b holding a pod of
// app web. The pending pod web-2 spreads app web over zones with maxSkew
// 1, counting the cordoned node (nodeTaintsPolicy Ignore): zone b is full,
// zone a takes it only on a new node of the group. status, when not empty,
// is the status key of cluster-autoscaler's ConfigMap in kube-system.
func nodeGroupCluster(status string) string {
	file := `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Node
metadata: {name: web-a, labels: {kubernetes.io/hostname: web-a, topology.kubernetes.io/zone: a, eks.amazonaws.com/nodegroup: web}}
spec: {unschedulable: true}
---
apiVersion: v1
kind: Node
metadata: {name: web-b, labels: {kubernetes.io/hostname: web-b, topology.kubernetes.io/zone: b, eks.amazonaws.com/nodegroup: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec: {nodeName: web-b, containers: [{name: web, image: nginx:1.29}]}
status: {phase: Running}
---
` + pendingPod
	if status == "" {
		return file
	}
	return file + `---
apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-autoscaler-status, namespace: kube-system}
data:
  status: |
    ` + strings.ReplaceAll(strings.TrimSpace(status), "\n", "\n    ") + "\n"
}

// pendingPod is the pod web-2 of nodeGroupCluster, not bound yet.
const pendingPod = `apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: shop, labels: {app: web}}
spec:
  containers: [{name: web, image: nginx:1.29}]
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Ignore, labelSelector: {matchLabels: {app: web}}}
`

// webAtMax is cluster-autoscaler's status with the Auto Scaling group of
// node group web at its maximum size.
const webAtMax = `time: "2026-11-24 04:28:19.546750398 +0000 UTC"
autoscalerStatus: "Running"
nodeGroups:
- name: "eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70"
  health: {status: "Healthy", cloudProviderTarget: 4, minSize: 2, maxSize: 4}`

const legacyStatus = `Cluster-autoscaler status at 2023-09-14 08:13:52.118283426 +0000 UTC:
Cluster-wide:
  Health: Healthy`

func TestCheckAndExplainReadClusterAutoscalersStatus(t *testing.T) {
	newNode := []string{"nodegroup/web/a"}
	const fullNote = "kubectl-spread: note: cluster-autoscaler's node group eks-web-7ec2a5b4-1d5e-4d5a-b3b0-2c6a1b4c9f70 is at its maximum size (4 of max 4), " +
		"so it adds no node and a pod only a new node of it could take is refused. Remedy: raise the group's maximum size.\n"
	const legacyNote = "kubectl-spread: note: ConfigMap kube-system/cluster-autoscaler-status not read: cluster-autoscaler's status is in the plain-text format of versions before 1.30, which spreadguard does not read; every node group is taken to be able to grow\n"
	tests := []struct {
		name          string
		status        string
		args          []string
		wantCode      int
		wantTemplates []string
		wantStderr    string
	}{
		{
			name:          "no status ConfigMap -> allowed: a new node of group web in zone a would take it",
			wantCode:      exitAllowed,
			wantTemplates: newNode,
		},
		{
			name:       "the status says web is at its maximum -> denied: the group can add no node, and a note says so",
			status:     webAtMax,
			wantCode:   exitDenied,
			wantStderr: fullNote,
		},
		{
			name:          "the same, --cluster-autoscaler-status= -> allowed: the status is not read",
			status:        webAtMax,
			args:          []string{"--cluster-autoscaler-status="},
			wantCode:      exitAllowed,
			wantTemplates: newNode,
		},
		{
			name:          "the same under another name, --cluster-autoscaler-status kube-system/other -> allowed: not that ConfigMap",
			status:        webAtMax,
			args:          []string{"--cluster-autoscaler-status", "kube-system/other"},
			wantCode:      exitAllowed,
			wantTemplates: newNode,
		},
		{
			name:          "the plain text of cluster-autoscaler 1.29 -> allowed, with a note that it was not read",
			status:        legacyStatus,
			wantCode:      exitAllowed,
			wantTemplates: newNode,
			wantStderr:    legacyNote,
		},
	}
	for _, tt := range tests {
		file := nodeGroupCluster(tt.status)
		assert := func(t *testing.T, args []string, connect connectFunc) {
			t.Helper()
			var stdout, stderr bytes.Buffer
			code := runWith(append(args, tt.args...), &stdout, &stderr, connect)
			if code != tt.wantCode || stderr.String() != tt.wantStderr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, stderr.String(), tt.wantCode, tt.wantStderr)
			}
			if diff := cmp.Diff(tt.wantTemplates, decodeReport(t, stdout.String()).FeasibleTemplates, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("feasibleTemplates (-want +got):\n%s", diff)
			}
		}
		t.Run("check: "+tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cluster, pod := filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "pod.yaml")
			for path, data := range map[string]string{cluster: file, pod: pendingPod} {
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			assert(t, []string{"check", "-o", "json", "--node-group-label", "eks.amazonaws.com/nodegroup", "--cluster", cluster, "--pod", pod}, nil)
		})
		t.Run("explain: "+tt.name, func(t *testing.T) {
			store, err := lookup.Decode("cluster.yaml", strings.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			assert(t, []string{"explain", "pod/web-2", "-n", "shop", "-o", "json", "--node-group-label", "eks.amazonaws.com/nodegroup"},
				fakeCluster(t, store.Objects()...))
		})
	}
}
