//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
)

// healthTimeout bounds a change reaching the policy's status and the
// namespace's Report: the controller and the scheduler place the pods, the
// leader's next pass (10 s after the changes) writes.
const healthTimeout = 2 * time.Minute

// TestSpreadHealth is the audit end to end: a Deployment the cluster skews
// shows in `kubectl get spreadpolicies` and `kubectl get reports`, and both
// clear once it is spread again.
func TestSpreadHealth(t *testing.T) {
	if len(cluster.zones) < 2 {
		t.Skipf("the cluster has %d zones; the scenario needs two", len(cluster.zones))
	}
	ensureReportsCRD(t)
	f := newFramework(t)
	// A soft zone spread whose domains are every zone, whatever the pods'
	// nodeSelector: pinned to one zone, the pods are placed (a soft
	// constraint never leaves a pod Pending) and skewed.
	f.create(policytest.MakeSpreadPolicy().Namespace(f.ns).Name("zones").Constraint(
		policytest.MakeConstraint().MaxSkew(1).TopologyKey(zoneKey).ScheduleAnyway().
			NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj())
	f.waitPolicyServed("zones")
	const replicas = 6
	d := makeDeployment("web").Replicas(replicas).Obj()
	d.Namespace = f.ns
	d.Spec.Template.Spec.NodeSelector = map[string]string{zoneKey: cluster.zones[0]}
	f.create(d)
	f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), replicas, placeTimeout)

	t.Run("six pods pinned to one zone make the Deployment skewed", func(t *testing.T) {
		eventually(t, healthTimeout, "kubectl get spreadpolicies shows the skewed Deployment", func(ctx context.Context) error {
			return wantPolicyRow(ctx, f.ns, "True", "1", "1", "0")
		})
		eventually(t, healthTimeout, "kubectl get reports shows the Deployment's warning", func(ctx context.Context) error {
			return wantReportResults(ctx, f.ns, "Deployment/web warn")
		})
	})

	t.Run("unpinned, the rollout spreads the pods and both clear", func(t *testing.T) {
		eventually(t, time.Minute, "the Deployment is unpinned", func(ctx context.Context) error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			d.Spec.Template.Spec.NodeSelector = nil
			return k8s.Update(ctx, d)
		})
		eventually(t, healthTimeout, "kubectl get spreadpolicies shows the Deployment spread", func(ctx context.Context) error {
			return wantPolicyRow(ctx, f.ns, "True", "1", "0", "0")
		})
		eventually(t, healthTimeout, "kubectl get reports shows the Deployment passing", func(ctx context.Context) error {
			return wantReportResults(ctx, f.ns, "Deployment/web pass")
		})
	})
}

// kubectlOut runs kubectl against the suite's cluster and returns its
// output, with its standard error in the error when it fails.
func kubectlOut(ctx context.Context, args ...string) (string, error) {
	out, stderr, err := kubectl(ctx, nil, args...)
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr)
	}
	return out, nil
}

// wantPolicyRow checks the row of policy "zones" in `kubectl get
// spreadpolicies`: the printer columns Ready, Workloads, Skewed and
// Uncovered.
func wantPolicyRow(ctx context.Context, ns string, ready, workloads, skewed, uncovered string) error {
	out, err := kubectlOut(ctx, "get", "spreadpolicies", "-n", ns)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME ") {
		return fmt.Errorf("want a header and one row, got:\n%s", out)
	}
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	wantHeader := []string{"NAME", "READY", "WORKLOADS", "SKEWED", "UNCOVERED", "AGE"}
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") || len(row) != len(header) {
		return fmt.Errorf("want the columns %v, got:\n%s", wantHeader, out)
	}
	if got, want := strings.Join(row[:5], " "), strings.Join([]string{"zones", ready, workloads, skewed, uncovered}, " "); got != want {
		return fmt.Errorf("row %q, want %q", got, want)
	}
	return nil
}

// wantReportResults checks the results of the namespace's Report, one
// "Kind/name result" per line.
func wantReportResults(ctx context.Context, ns string, want ...string) error {
	out, err := kubectlOut(ctx, "get", "reports.openreports.io", "spreadguard", "-n", ns, "-o",
		`jsonpath={range .results[*]}{.resources[0].kind}/{.resources[0].name} {.result}{"\n"}{end}`)
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(out); got != strings.Join(want, "\n") {
		return fmt.Errorf("results:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	return nil
}

// ensureReportsCRD installs the openreports Report CRD when the cluster has
// none (Kyverno and Policy Reporter install the real one): the stand-in of
// the integration tests, which holds the fields spreadguard writes.
func ensureReportsCRD(t *testing.T) {
	t.Helper()
	resources, err := clientset.Discovery().ServerResourcesForGroupVersion("openreports.io/v1alpha1")
	switch {
	case err == nil && slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "reports" }):
		return
	case err != nil && !apierrors.IsNotFound(err):
		t.Fatalf("looking for the openreports API: %v", err)
	}
	if _, err := envtest.InstallCRDs(restConfig, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join("..", "integration", "testdata", "openreports")},
		ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("installing the openreports CRD: %v", err)
	}
	t.Log("installed a stand-in openreports Report CRD")
}
