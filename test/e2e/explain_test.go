//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// explainReport is the part of kubectl-spread's JSON report (SPEC, "The
// offline contract") the suite checks.
type explainReport struct {
	Allowed       bool              `json:"allowed"`
	Policy        string            `json:"policy"`
	Pod           *v1.Pod           `json:"pod"`
	FeasibleNodes []string          `json:"feasibleNodes"`
	Constraints   []explainCounting `json:"constraints"`
}

// explainCounting is one hard constraint's counting in the report.
type explainCounting struct {
	TopologyKey string         `json:"topologyKey"`
	GlobalMin   int            `json:"globalMin"`
	Domains     map[string]int `json:"domains"`
}

func explainAgrees(t *testing.T) {
	f := newFramework(t)
	policy := zonePolicy("zones").Obj()
	f.create(policy)
	f.waitPolicyServed(policy.Name)
	f.create(makeDeployment("web").Replicas(9).Obj())
	pods := f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), 9, placeTimeout)
	placed, err := zoneCounts(t.Context(), pods)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), kubectlSpread(t), "explain", "deployment/web", "-n", f.ns, "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr: %s\nstdout: %s", cmd, err, stderr.String(), stdout.String())
	}
	var got explainReport
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%s printed no JSON report: %v\n%s", cmd, err, stdout.String())
	}

	if !got.Allowed || got.Policy != f.ns+"/"+policy.Name {
		t.Errorf("explain: allowed %v, policy %q; want allowed by %q", got.Allowed, got.Policy, f.ns+"/"+policy.Name)
	}
	// The next pod gets what the webhook gave the pods it admitted.
	if got.Pod == nil {
		t.Fatal("explain: the report has no pod")
	}
	if diff := cmp.Diff(sortedConstraints(pods[0].Spec.TopologySpreadConstraints), sortedConstraints(got.Pod.Spec.TopologySpreadConstraints)); diff != "" {
		t.Errorf("explain: the next pod's constraints differ from those the webhook injected (-webhook +explain):\n%s", diff)
	}
	// It counts what the scheduler placed, and every node stays feasible at
	// 3/3/3: 3 + 1 - 3 <= maxSkew 1.
	i := slices.IndexFunc(got.Constraints, func(c explainCounting) bool { return c.TopologyKey == zoneKey })
	if i < 0 {
		t.Fatalf("explain: no counting for %s in %+v", zoneKey, got.Constraints)
	}
	if diff := cmp.Diff(placed, got.Constraints[i].Domains); diff != "" {
		t.Errorf("explain: pods per zone differ from the scheduler's placement (-placed +explain):\n%s", diff)
	}
	if got.Constraints[i].GlobalMin != 3 {
		t.Errorf("explain: global minimum %d, want 3", got.Constraints[i].GlobalMin)
	}
	var nodes []string
	for _, z := range cluster.zones {
		nodes = append(nodes, cluster.nodesByZone[z]...)
	}
	slices.Sort(nodes)
	if diff := cmp.Diff(nodes, got.FeasibleNodes); diff != "" {
		t.Errorf("explain: feasible nodes (-want +got):\n%s", diff)
	}
}

// kubectlSpread is the plugin named by envKubectlSpread, or one built from
// this checkout.
func kubectlSpread(t *testing.T) string {
	t.Helper()
	if path := os.Getenv(envKubectlSpread); path != "" {
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s: %v", envKubectlSpread, err)
		}
		return path
	}
	out := filepath.Join(t.TempDir(), "kubectl-spread")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", out, "github.com/spreadguard/spreadguard/cmd/kubectl-spread")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-spread: %v\n%s", err, msg)
	}
	return out
}
