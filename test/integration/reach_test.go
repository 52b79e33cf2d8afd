//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// rackKey is a topology key only TestAuditReportsAMinDomainsNoNodeCanReach
// labels nodes with: what it reaches does not depend on the other tests'
// nodes.
const rackKey = "reach.integration.spreadguard.io/rack"

// TestAuditReportsAMinDomainsNoNodeCanReach holds the audit to what it
// says of a policy whose hard constraint asks for minDomains 3 over a key
// the nodes carry 2 values of, with no template adding a third: its pods
// beyond the first per domain would stay Pending. The policy's Ready
// condition is False, MinDomainsOutOfReach, naming spec.constraints[0],
// and the namespace's Report holds a failed result for the policy; a node
// with a third value puts both right.
func TestAuditReportsAMinDomainsNoNodeCanReach(t *testing.T) {
	ensureZoneNodes(t)
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
	startAuditors(t, leases, 1)

	ready := func(ctx context.Context) (*metav1.Condition, error) {
		p, err := policyStatus(ctx, ns)
		if err != nil {
			return nil, err
		}
		return meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady), nil
	}
	t.Run("racks r1 and r2 only, minDomains 3 -> Ready False, MinDomainsOutOfReach, and a failed result for the policy", func(t *testing.T) {
		wantMsg := "spec.constraints[0]: minDomains 3 over " + rackKey + ", but the nodes and every node an autoscaler can add reach only 2 domains (" +
			ns + "-r1, " + ns + "-r2)"
		var got string
		eventually(t, "the policy's Ready condition says minDomains is out of reach", func(ctx context.Context) (bool, error) {
			c, err := ready(ctx)
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
		var diff string
		eventually(t, "the policy is Ready again", func(ctx context.Context) (bool, error) {
			c, err := ready(ctx)
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
	})
}
