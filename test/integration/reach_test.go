//go:build integration

package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// rackKey is a topology key only TestHealthReportsAMinDomainsNoNodeCanReach
// labels nodes with: what it reaches does not depend on the other tests'
// nodes.
const rackKey = "reach.integration.spreadguard.io/rack"

// TestHealthReportsAMinDomainsNoNodeCanReach holds the audit to what it
// says of a policy whose hard constraint asks for minDomains 3 over a key
// the nodes carry 2 values of, with no template adding a third: its pods
// beyond the first per domain would stay Pending. The policy's Ready
// condition is False, MinDomainsOutOfReach, naming spec.constraints[0],
// and the namespace's Report holds a failed result for the policy; a node
// with a third value puts both right.
func TestHealthReportsAMinDomainsNoNodeCanReach(t *testing.T) {
	ensureZoneNodes(t)
	installReportCRD(t)
	ns := newNamespace(t, "reach")
	leases := newNamespace(t, "reach-leases")
	for _, rack := range []string{"r1", "r2"} {
		n := spreadtest.MakeNode().Name(ns+"-"+rack).Label(rackKey, ns+"-"+rack).Obj()
		createNode(t, n)
		cleanup(t, n)
	}
	create(t, policytest.MakeSpreadPolicy().Namespace(ns).Name("zones").
		Constraint(policytest.MakeConstraint().TopologyKey(rackKey).MaxSkew(1).DoNotSchedule().MinDomains(3).Obj()).Obj())
	create(t, replicaSet(ns, "web", map[string]string{"app": "web"}))
	create(t, boundPod(ns, "web-1", "a1"))
	startHealthControllers(t, leases, 1)

	t.Run("racks r1 and r2 only, minDomains 3 -> Ready False, MinDomainsOutOfReach, and a failed result for the policy", func(t *testing.T) {
		wantMsg := "spec.constraints[0]: minDomains 3 over " + rackKey + ", but the nodes and every node an autoscaler can add reach only 2 domains (" +
			ns + "-r1, " + ns + "-r2)"
		var got string
		eventually(t, "the policy's Ready condition says minDomains is out of reach", func(ctx context.Context) (bool, error) {
			c, err := readyOf(ctx, ns)
			if err != nil || c == nil {
				return false, err
			}
			got = string(c.Status) + " " + c.Reason + ": " + c.Message
			return c.Status == "False" && c.Reason == v1alpha1.ReasonMinDomainsOutOfReach && strings.HasPrefix(c.Message, wantMsg), nil
		})
		if !strings.Contains(got, "Remedy: let the autoscaler add nodes in 1 more domain of "+rackKey+", or lower minDomains to 2.") {
			t.Errorf("Ready = %q, want the remedy", got)
		}
		waitForReport(t, ns, []reportResult{{"web", health.ResultPass}, {"zones", health.ResultFail}}, health.ReportSummary{Pass: 1, Fail: 1})
	})

	t.Run("a node in rack r3 -> Ready True, Audited, and the policy's result gone", func(t *testing.T) {
		n := spreadtest.MakeNode().Name(ns+"-r3").Label(rackKey, ns+"-r3").Obj()
		createNode(t, n)
		cleanup(t, n)
		waitForHealthPassAgain(t, ns)
	})
}

// TestHealthReportsAZoneANodePoolRequiresButCannotServe holds the audit to
// what it says of a policy spreading over zones while a NodePool requires
// a zone its EC2NodeClass has no subnet in (kubernetes-sigs/karpenter#3272),
// through the real NodePool and EC2NodeClass CRDs: the policy's Ready
// condition is False, ZoneNotServed, naming the zone and not the NodePool
// (the suite's messageDetail is domains), and the namespace's Report holds
// a failed result for the policy; a subnet in that zone puts both right.
func TestHealthReportsAZoneANodePoolRequiresButCannotServe(t *testing.T) {
	ensureZoneNodes(t)
	installReportCRD(t)
	ns := newNamespace(t, "unserved")
	leases := newNamespace(t, "unserved-leases")
	unserved := ns + "-z"
	class := ec2NodeClass(ns)
	create(t, class)
	cleanup(t, class)
	setSubnets(t, class, "zone-a")
	pool := nodePool(ns, ns, ref(nodeclassv1.EC2GroupName, nodeclassv1.KindEC2NodeClass, ns),
		map[string]any{"key": v1.LabelTopologyZone, "operator": "In", "values": []any{"zone-a", unserved}})
	create(t, pool)
	cleanup(t, pool)
	create(t, policytest.MakeSpreadPolicy().Namespace(ns).Name("zones").
		Constraint(policytest.MakeConstraint().TopologyKey(v1.LabelTopologyZone).MaxSkew(1).DoNotSchedule().Obj()).Obj())
	create(t, replicaSet(ns, "web", map[string]string{"app": "web"}))
	create(t, boundPod(ns, "web-1", "a1"))
	startHealthControllers(t, leases, 1)

	t.Run("the NodePool requires zone-a and a zone its EC2NodeClass has no subnet in -> Ready False, ZoneNotServed, and a failed result for the policy", func(t *testing.T) {
		want := "False " + v1alpha1.ReasonZoneNotServed + ": spec.constraints[0] spread over topology.kubernetes.io/zone. Zone " + unserved +
			" is required by an autoscaler's node pool whose node class cannot serve it: no node comes up there, so pods that need it stay Pending. " +
			"Remedy: ask the cluster's operator to remove " + unserved + " from the node pool's zone requirement, or to let its node class serve it."
		var got string
		eventually(t, "the policy's Ready condition names the unserved zone", func(ctx context.Context) (bool, error) {
			c, err := readyOf(ctx, ns)
			if err != nil || c == nil {
				return false, err
			}
			got = string(c.Status) + " " + c.Reason + ": " + c.Message
			return got == want, nil
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Ready (-want +got):\n%s", diff)
		}
		waitForReport(t, ns, []reportResult{{"web", health.ResultPass}, {"zones", health.ResultFail}}, health.ReportSummary{Pass: 1, Fail: 1})
	})

	t.Run("a subnet in that zone -> Ready True, Audited, and the policy's result gone", func(t *testing.T) {
		setSubnets(t, class, "zone-a", unserved)
		// A change of the templates alone waits for the audit's next full
		// pass (docs/autoscaler.md); a change to a pod of the policy's
		// starts one sooner, once the templates are derived again.
		eventually(t, "a pass after the subnet was added finds the policy Ready", func(ctx context.Context) (bool, error) {
			touchPod(t, ns, "web-1")
			c, err := readyOf(ctx, ns)
			return c != nil && c.Status == metav1.ConditionTrue, err
		})
		waitForHealthPassAgain(t, ns)
	})
}

// readyOf is the Ready condition of the namespace's policy "zones".
func readyOf(ctx context.Context, ns string) (*metav1.Condition, error) {
	p, err := policyStatus(ctx, ns)
	if err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady), nil
}

// waitForHealthPassAgain waits until the namespace's policy "zones" is Ready,
// Audited, and its Report holds only workload web's pass.
func waitForHealthPassAgain(t *testing.T, ns string) {
	t.Helper()
	var diff string
	eventually(t, "the policy is Ready again", func(ctx context.Context) (bool, error) {
		c, err := readyOf(ctx, ns)
		if err != nil || c == nil {
			return false, err
		}
		diff = cmp.Diff("True "+v1alpha1.ReasonAudited, string(c.Status)+" "+c.Reason)
		return diff == "", nil
	})
	if diff != "" {
		t.Fatalf("Ready (-want +got):\n%s", diff)
	}
	waitForReport(t, ns, []reportResult{{"web", health.ResultPass}}, health.ReportSummary{Pass: 1})
}

// installReportCRD installs the openreports CRD, which a test that waits
// for a Report needs whichever tests ran before it.
func installReportCRD(t *testing.T) {
	t.Helper()
	if _, err := envtest.InstallCRDs(suite.restConfig, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("testdata", "openreports")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("installing the openreports CRD: %v", err)
	}
}
