//go:build integration

package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// zoneNodes are ensureZoneNodes' nodes, one per zone; the keeper's
// constraint leaves nodeTaintsPolicy unset (Ignore), so cordoned c1 counts.
var zoneNodes = []string{"a1", "b1", "c1"}

// webZone is the zone constraint of ReplicaSet web's template.
func webZone() v1.TopologySpreadConstraint {
	return spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()
}

// keptReplicaSet creates, in ns, ReplicaSet web whose template declares
// webZone, and n of its pods bound round-robin to zoneNodes; it returns
// the ReplicaSet.
func keptReplicaSet(t *testing.T, ns string, n int) client.Object {
	t.Helper()
	rs := replicaSet(ns, "web", map[string]string{"app": "web"})
	rs.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{webZone()}
	create(t, rs)
	for i := range n {
		create(t, webPodOf(rs, "web-"+strconv.Itoa(i), zoneNodes[i%len(zoneNodes)]))
	}
	return rs
}

// webPodOf is a pod of ReplicaSet rs bound to node, as the ReplicaSet
// controller creates it from the template.
func webPodOf(rs client.Object, name, node string) *v1.Pod {
	return controlledBy(podObj(spreadtest.MakePod().Namespace(rs.GetNamespace()).Name(name).Label("app", "web").
		Node(node).SpreadConstraint(webZone())), rs, "ReplicaSet")
}

// costsByZone reads ns's pods from the API server: the sorted costs of
// each zone's, and the pods without a cost.
func costsByZone(ctx context.Context, ns string) (map[string][]int, []string, error) {
	var pods v1.PodList
	if err := suite.client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, nil, err
	}
	costs, none := map[string][]int{}, []string{}
	for _, p := range pods.Items {
		v, ok := p.Annotations[spread.DeletionCostAnnotation]
		if !ok {
			none = append(none, p.Name)
			continue
		}
		c, err := strconv.Atoi(v)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s: cost %q: %w", p.Name, v, err)
		}
		costs[p.Spec.NodeName] = append(costs[p.Spec.NodeName], c)
	}
	for _, cs := range costs {
		slices.Sort(cs)
	}
	slices.Sort(none)
	return costs, none, nil
}

// TestDeletionCostKeeper runs a replica of the webhook with the keeper on,
// leading its Lease, against the real API server: the server-side applies,
// the field manager's conflicts and the policy's off switch are the API
// server's own.
func TestDeletionCostKeeper(t *testing.T) {
	ensureZoneNodes(t)
	leaseNS := newNamespace(t, "keeper-lease")
	kept := newNamespace(t, "keeper")
	off := newNamespace(t, "keeper-off")

	rs := keptReplicaSet(t, kept, 12)
	// A pod whose cost another manager set when it created it.
	foreignPod := webPodOf(rs, "web-foreign", "a1")
	foreignPod.Annotations = map[string]string{spread.DeletionCostAnnotation: "5"}
	if err := suite.client.Create(t.Context(), foreignPod, client.FieldOwner("cost-owner")); err != nil {
		t.Fatalf("creating the pod whose cost cost-owner owns: %v", err)
	}

	// The same workload under a policy that turns the costs off.
	create(t, zonePolicy(off).PodLabel("app", "web").DeletionCost(v1alpha1.DeletionCostDisabled).Obj())
	keptReplicaSet(t, off, 6)

	_, _, reg := runServer(t, "keeper", func(c *app.Config) {
		c.Health = false
		c.LeaderElectionNamespace = leaseNS
	})

	t.Run("ReplicaSet of 12 over 3 zones (4/4/4) and a 13th pod whose cost another manager owns -> each zone's pods cost -8 -6 -4 -2 but that one", func(t *testing.T) {
		want := map[string][]int{"a1": {-8, -6, -4, -2, 5}, "b1": {-8, -6, -4, -2}, "c1": {-8, -6, -4, -2}}
		var got map[string][]int
		var none []string
		eventually(t, "the keeper writes the costs of the 12 pods", func(ctx context.Context) (bool, error) {
			var err error
			got, none, err = costsByZone(ctx, kept)
			return err == nil && cmp.Equal(want, got), err
		})
		if len(none) != 0 {
			t.Errorf("pods without a cost: %v", none)
		}
		// About one apply per pod: 12 when the keeper's start sees every
		// pod and node at once; a few more when the informers' first events
		// reach it in more than one batch and a pod's first cost moves (a
		// loaded machine). The exact figure is BenchmarkKeeper's.
		if n := registryValue(t, reg, `spreadguard_deletion_cost_patches_total{result="applied"} `); n < 12 || n > 18 {
			t.Errorf("spreadguard_deletion_cost_patches_total{result=applied} = %v, want 12 to 18: about one per pod", n)
		}
	})

	t.Run("the pod whose cost cost-owner set -> its cost stays 5, the keeper's apply conflicts, counted once", func(t *testing.T) {
		eventually(t, "the foreign pod is counted", func(context.Context) (bool, error) {
			return registryValue(t, reg, "spreadguard_deletion_cost_foreign_pods ") == 1, nil
		})
		if got := storedPod(t, kept, "web-foreign").Annotations[spread.DeletionCostAnnotation]; got != "5" {
			t.Errorf("web-foreign's cost = %q, want cost-owner's 5", got)
		}
		if n := registryValue(t, reg, `spreadguard_deletion_cost_patches_total{result="foreign"} `); n != 1 {
			t.Errorf("spreadguard_deletion_cost_patches_total{result=foreign} = %v, want 1", n)
		}
		for _, f := range storedPod(t, kept, "web-1").ManagedFields {
			if f.Manager == "spreadguard-deletion-cost" && f.Operation != "Apply" {
				t.Errorf("the keeper's field manager wrote by %s, want Apply", f.Operation)
			}
		}
	})

	t.Run("a 14th pod created in zone b -> one patch, its own cost, on top of zone b", func(t *testing.T) {
		before := registryValue(t, reg, `spreadguard_deletion_cost_patches_total{result="applied"} `)
		create(t, webPodOf(rs, "web-new", "b1"))
		eventually(t, "the new pod's cost", func(ctx context.Context) (bool, error) {
			return storedPod(t, kept, "web-new").Annotations[spread.DeletionCostAnnotation] == "-10", nil
		})
		if n := registryValue(t, reg, `spreadguard_deletion_cost_patches_total{result="applied"} `) - before; n != 1 {
			t.Errorf("%v patches for one pod created, want 1", n)
		}
	})

	t.Run("the same ReplicaSet under a policy with deletionCost Disabled -> no pod gets a cost", func(t *testing.T) {
		eventually(t, "the keeper counts the workload disabled", func(context.Context) (bool, error) {
			return registryValue(t, reg, `spreadguard_deletion_cost_workloads{state="disabled"} `) == 1, nil
		})
		costs, _, err := costsByZone(t.Context(), off)
		if err != nil {
			t.Fatal(err)
		}
		if len(costs) != 0 {
			t.Errorf("costs written under a Disabled policy: %v", costs)
		}
	})
}
