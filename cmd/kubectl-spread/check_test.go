package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/lookup"
)

const (
	exampleCluster = "../../examples/cluster.yaml"
	examplePodWeb  = "../../examples/pod-web.yaml"
	examplePinned  = "../../examples/pod-pinned.yaml"
	zoneKey        = "topology.kubernetes.io/zone"
	examplePolicy  = "shop/zone-spread"
)

// result is what one run of the command produced.
type result struct {
	code           int
	stdout, stderr string
}

func runCommand(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// decodeReport parses -o json output, first checking the contract's shape
// that a struct would hide: exactly its keys, and lists that are [] rather
// than null.
func decodeReport(t *testing.T, out string) report {
	t.Helper()
	checkKeys(t, out, []string{"action", "allowed", "constraints", "feasibleNodes", "feasibleTemplates", "message", "pod", "policy", "warnings"},
		"warnings", "feasibleNodes", "feasibleTemplates", "constraints")
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decoding the report: %v", err)
	}
	return r
}

// decodeDomainsReport is decodeReport under --message-detail domains: the
// feasible nodes and templates counted, not named.
func decodeDomainsReport(t *testing.T, out string) domainsReport {
	t.Helper()
	checkKeys(t, out, []string{"action", "allowed", "constraints", "feasibleNodeCount", "feasibleTemplateCount", "message", "pod", "policy", "warnings"},
		"warnings", "constraints")
	var r domainsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decoding the report: %v", err)
	}
	return r
}

// checkKeys holds the JSON object out to exactly keys, lists its lists.
func checkKeys(t *testing.T, out string, keys []string, lists ...string) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if diff := cmp.Diff(keys, slices.Sorted(maps.Keys(raw))); diff != "" {
		t.Errorf("JSON keys (-want +got):\n%s", diff)
	}
	for _, k := range lists {
		if !bytes.HasPrefix(bytes.TrimSpace(raw[k]), []byte("[")) {
			t.Errorf("JSON %q = %s, want a list", k, raw[k])
		}
	}
}

func loadPod(t *testing.T, path string) *v1.Pod {
	t.Helper()
	pod, err := lookup.LoadPod(path)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// webPodMutated is examples/pod-web.yaml as the webhook stores it: the
// policy's zone constraint with the selector of Service web and ReplicaSet
// web-abc, nodeTaintsPolicy Honor, and the policy annotation.
func webPodMutated(t *testing.T) *v1.Pod {
	t.Helper()
	pod := loadPod(t, examplePodWeb)
	honor := v1.NodeInclusionPolicyHonor
	pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       zoneKey,
		WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
			"app": "web", "pod-template-hash": "abc",
		}},
		NodeTaintsPolicy: &honor,
	}}
	pod.Annotations = map[string]string{v1alpha1.AnnotationPolicy: examplePolicy}
	return pod
}

func TestCheckExamples(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// wantMessage lists what the message must mention; the wording
		// belongs to pkg/spread.
		wantMessage []string
		want        func(t *testing.T) report
		wantCode    int
	}{
		{
			name: "pod-web: a ReplicaSet pod gets zone maxSkew 1 with nodeTaintsPolicy Honor, counts [3,2] without cordoned zone-c -> allowed on zone-b",
			args: []string{"check", "--cluster", exampleCluster, "--pod", examplePodWeb, "-o", "json"},
			want: func(t *testing.T) report {
				return report{
					Allowed:           true,
					Warnings:          []string{},
					Policy:            examplePolicy,
					Pod:               webPodMutated(t),
					FeasibleNodes:     []string{"node-b1", "node-b2"},
					FeasibleTemplates: []string{},
					Constraints: []constraintCounted{{
						TopologyKey: zoneKey, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule,
						GlobalMin: 2, Domains: map[string]int{"zone-a": 3, "zone-b": 2},
					}},
				}
			},
			wantCode: exitAllowed,
		},
		{
			name: "pod-pinned: its own zone constraint with nodeTaintsPolicy Ignore, counts [3,2,0], zone-c cordoned -> denied by the policy's Deny",
			args: []string{"check", "--cluster", exampleCluster, "--pod", examplePinned, "-o", "json"},
			want: func(t *testing.T) report {
				return report{
					Allowed:           false,
					Action:            string(v1alpha1.ActionDeny),
					Warnings:          []string{},
					Policy:            examplePolicy,
					Pod:               loadPod(t, examplePinned),
					FeasibleNodes:     []string{},
					FeasibleTemplates: []string{},
					Constraints: []constraintCounted{{
						TopologyKey: zoneKey, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule,
						GlobalMin: 0, Domains: map[string]int{"zone-a": 3, "zone-b": 2, "zone-c": 0},
					}},
				}
			},
			wantMessage: []string{"spec.topologySpreadConstraints[0]", "zone-c", "node-c1"},
			wantCode:    exitDenied,
		},
		{
			name: "pod-pinned in an excluded namespace -> allowed unchecked, nothing counted",
			args: []string{"check", "--cluster", exampleCluster, "--pod", examplePinned, "-o", "json", "--excluded-namespaces", "shop"},
			want: func(t *testing.T) report {
				return report{
					Allowed:           true,
					Warnings:          []string{},
					Pod:               loadPod(t, examplePinned),
					FeasibleNodes:     []string{},
					FeasibleTemplates: []string{},
					Constraints:       []constraintCounted{},
				}
			},
			wantCode: exitAllowed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCommand(t, tt.args...)
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", got.code, tt.wantCode, got.stderr)
			}
			if got.stderr != "" {
				t.Errorf("stderr = %q, want nothing", got.stderr)
			}
			r := decodeReport(t, got.stdout)
			for _, s := range tt.wantMessage {
				if !strings.Contains(r.Message, s) {
					t.Errorf("message does not mention %q: %s", s, r.Message)
				}
			}
			if len(tt.wantMessage) == 0 && r.Message != "" {
				t.Errorf("message = %q, want none", r.Message)
			}
			if diff := cmp.Diff(tt.want(t), r, cmpopts.IgnoreFields(report{}, "Message")); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckReadable(t *testing.T) {
	tests := []struct {
		name     string
		pod      string
		want     []string // lines, in order, that the report must hold
		wantCode int
	}{
		{
			name: "pod-web -> allowed, the injected constraint, zone-b within maxSkew, zone-a beyond",
			pod:  examplePodWeb,
			want: []string{
				"Pod shop/web-abc-6: ALLOWED",
				"Policy:    SpreadPolicy shop/zone-spread (priority 0)",
				"  [0] topology.kubernetes.io/zone maxSkew 1 DoNotSchedule, nodeTaintsPolicy Honor, selector app=web,pod-template-hash=abc",
				"zone-a 3 3 + 1 - 2 = 2 exceeded",
				"zone-b 2 2 + 1 - 2 = 1 ok",
				"  global minimum: 2",
				"Feasible nodes (2): node-b1, node-b2",
			},
			wantCode: exitAllowed,
		},
		{
			name: "pod-pinned -> denied, its own constraint kept, zone-c counted at 0",
			pod:  examplePinned,
			want: []string{
				"Pod shop/web-pinned: DENIED (action Deny)",
				"Policy:    shop/zone-spread",
				"Injected:  nothing (pod declares its own topologySpreadConstraints)",
				"zone-a 3 3 + 1 - 0 = 4 exceeded",
				"zone-b 2 2 + 1 - 0 = 3 exceeded",
				"zone-c 0 0 + 1 - 0 = 1 ok",
				"  global minimum: 0",
				"Feasible nodes: none",
				"Message: ",
			},
			wantCode: exitDenied,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCommand(t, "check", "--cluster", exampleCluster, "--pod", tt.pod)
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", got.code, tt.wantCode, got.stderr)
			}
			// Columns are aligned with spaces; compare words, not widths.
			rest := collapseSpaces(got.stdout)
			for _, line := range tt.want {
				line = collapseSpaces(line)
				i := strings.Index(rest, line)
				if i < 0 {
					t.Fatalf("report lacks %q after the lines before it:\n%s", line, got.stdout)
				}
				rest = rest[i+len(line):]
			}
		})
	}
}

// collapseSpaces turns every run of spaces into one, line by line.
func collapseSpaces(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// tempFiles returns a function that writes a file of a test's temporary
// directory and returns its path.
func tempFiles(t *testing.T) (dir string, write func(name, content string) string) {
	t.Helper()
	dir = t.TempDir()
	return dir, func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func TestCheckBadInput(t *testing.T) {
	dir, write := tempFiles(t)
	badYAML := write("bad.yaml", "apiVersion: v1\nkind: Node\nmetadata:\n  name n1\n  labels: {}\n")
	daemonSet := write("daemonset.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: web}\n")
	twoPods := write("two.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n")
	missing := filepath.Join(dir, "missing.yaml")

	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{
			name:       "a cluster file with a YAML syntax error -> the file, document and line",
			args:       []string{"check", "--cluster", badYAML, "--pod", examplePodWeb},
			wantStderr: "kubectl-spread: " + badYAML + ": document 1: error converting YAML to JSON: yaml: line 5: mapping values are not allowed in this context\n",
		},
		{
			name:       "a missing cluster file -> the open error",
			args:       []string{"check", "--cluster", missing, "--pod", examplePodWeb, "-o", "json"},
			wantStderr: "kubectl-spread: open " + missing + ": no such file or directory\n",
		},
		{
			name: "a DaemonSet in the cluster file -> unknown kind, with the kinds wanted",
			args: []string{"check", "--cluster", daemonSet, "--pod", examplePodWeb},
			wantStderr: "kubectl-spread: " + daemonSet + `: document 2: unknown kind "DaemonSet" (want one of Node, Pod, Service, ` +
				"ReplicationController, ReplicaSet, StatefulSet, Namespace, SpreadPolicy, ClusterSpreadPolicy, NodeTemplate, NodePool, EC2NodeClass, NodeClass, ConfigMap, Deployment, or a v1 List)\n",
		},
		{
			name:       "two pods in the pod file -> exactly one wanted",
			args:       []string{"check", "--cluster", exampleCluster, "--pod", twoPods},
			wantStderr: "kubectl-spread: " + twoPods + ": want exactly one Pod, found 2 objects\n",
		},
		{
			name:       "no --pod -> both flags named",
			args:       []string{"check", "--cluster", exampleCluster},
			wantStderr: "kubectl-spread: check needs --cluster CLUSTER.yaml and --pod POD.yaml\n",
		},
		{
			name:       "--default-action Block -> the three actions named",
			args:       []string{"check", "--cluster", exampleCluster, "--pod", examplePodWeb, "--default-action", "Block"},
			wantStderr: `kubectl-spread: invalid --default-action (defaultAction): Unsupported value: "Block": supported values: "Deny", "Warn", "Audit"` + "\n",
		},
		{
			name: "--message-detail all and a node group label with a space -> both named, on one line",
			args: []string{"check", "--cluster", exampleCluster, "--pod", examplePodWeb, "--message-detail", "all", "--node-group-label", "node group"},
			wantStderr: `kubectl-spread: invalid --message-detail (messageDetail): Unsupported value: "all": supported values: "domains", "nodes"; ` +
				`invalid --node-group-label (nodeGroupLabel): Invalid value: "node group": name part must consist of alphanumeric characters, '-', '_' or '.', ` +
				`and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')` + "\n",
		},
		{
			name:       "-o xml -> the formats named",
			args:       []string{"check", "--cluster", exampleCluster, "--pod", examplePodWeb, "-o", "xml"},
			wantStderr: "kubectl-spread: invalid --output \"xml\" (want json, yaml, or nothing for a readable report)\n",
		},
		{
			name:       "an unknown flag -> the flag named",
			args:       []string{"check", "--clusters", exampleCluster},
			wantStderr: "kubectl-spread: unknown flag: --clusters\n",
		},
		{
			name:       "no command -> the commands named",
			args:       []string{},
			wantStderr: "kubectl-spread: a command is required: check, explain or plan (see --help)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCommand(t, tt.args...)
			want := result{code: exitBadInput, stderr: tt.wantStderr}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("run() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckDefaultAction(t *testing.T) {
	// The example's policy without its action: --default-action decides.
	data, err := os.ReadFile(exampleCluster)
	if err != nil {
		t.Fatal(err)
	}
	const action = "  validation:\n    action: Deny\n"
	if !strings.Contains(string(data), action) {
		t.Fatalf("%s no longer sets %q; update this test", exampleCluster, action)
	}
	cluster := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(cluster, []byte(strings.Replace(string(data), action, "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		flags       []string
		wantAllowed bool
		wantAction  v1alpha1.ValidationAction
		wantCode    int
	}{
		{"pod-pinned, a policy without action, no flag -> Deny, exit 1", nil, false, v1alpha1.ActionDeny, exitDenied},
		{"pod-pinned, a policy without action, --default-action Warn -> allowed with the message as a warning, exit 0", []string{"--default-action", "Warn"}, true, v1alpha1.ActionWarn, exitAllowed},
		{"pod-pinned, a policy without action, --default-action Audit -> allowed silently, exit 0", []string{"--default-action=Audit"}, true, v1alpha1.ActionAudit, exitAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCommand(t, append([]string{"check", "--cluster", cluster, "--pod", examplePinned, "-o", "json"}, tt.flags...)...)
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", got.code, tt.wantCode, got.stderr)
			}
			r := decodeReport(t, got.stdout)
			wantWarnings := []string{}
			if tt.wantAction == v1alpha1.ActionWarn {
				wantWarnings = []string{r.Message}
			}
			type verdict struct {
				Allowed  bool
				Action   string
				Warnings []string
				Policy   string
			}
			want := verdict{tt.wantAllowed, string(tt.wantAction), wantWarnings, examplePolicy}
			if diff := cmp.Diff(want, verdict{r.Allowed, r.Action, r.Warnings, r.Policy}); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
			if !strings.Contains(r.Message, "zone-c") {
				t.Errorf("message does not name zone-c: %s", r.Message)
			}
		})
	}
}

func TestCheckCountsTheNodesAnAutoscalerCanAdd(t *testing.T) {
	const karpenterCluster = "../../examples/cluster-karpenter.yaml"
	const minDomainsPod = "../../examples/pod-mindomains.yaml"
	data, err := os.ReadFile(karpenterCluster)
	if err != nil {
		t.Fatal(err)
	}
	// The same cluster without its NodePool: nothing can add a node.
	var kept []string
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		if !strings.Contains(doc, "kind: NodePool") {
			kept = append(kept, doc)
		}
	}
	withoutPool := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(withoutPool, []byte(strings.Join(kept, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		cluster      string
		wantCode     int
		wantAllowed  bool
		wantFeasible []string
		wantWarnings []string
	}{
		{
			name:     "minDomains 3, nodes in 2 full zones, a NodePool allowing zone-c -> admitted with a warning, the template listed",
			cluster:  karpenterCluster,
			wantCode: exitAllowed, wantAllowed: true,
			wantFeasible: []string{"nodepool/default/zone-c,on-demand"},
			wantWarnings: []string{"admitted: no current node fits; a new node from NodePool default in zone zone-c would"},
		},
		{
			name:         "the same cluster without the NodePool -> denied",
			cluster:      withoutPool,
			wantCode:     exitDenied,
			wantFeasible: []string{},
			wantWarnings: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCommand(t, "check", "--cluster", tt.cluster, "--pod", minDomainsPod, "-o", "json")
			if got.code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr %q", got.code, tt.wantCode, got.stderr)
			}
			r := decodeReport(t, got.stdout)
			if r.Allowed != tt.wantAllowed {
				t.Errorf("allowed = %v, want %v", r.Allowed, tt.wantAllowed)
			}
			if diff := cmp.Diff(tt.wantFeasible, r.FeasibleTemplates); diff != "" {
				t.Errorf("feasibleTemplates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarnings, r.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
