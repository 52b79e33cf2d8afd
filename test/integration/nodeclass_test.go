//go:build integration

package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// ec2NodeClass is an EC2NodeClass as a user applies it: the fields the
// real CRD requires, no status.
func ec2NodeClass(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"role":                       "KarpenterNodeRole-" + name,
			"amiSelectorTerms":           []any{map[string]any{"alias": "al2023@latest"}},
			"subnetSelectorTerms":        []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": name}}},
			"securityGroupSelectorTerms": []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": name}}},
		},
	}}
	u.SetGroupVersionKind(nodeclassv1.EC2GroupVersion.WithKind(nodeclassv1.KindEC2NodeClass))
	return u
}

// eksNodeClass is an EKS Auto Mode NodeClass.
func eksNodeClass(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"role": "eks-auto-node", "subnetSelectorTerms": []any{map[string]any{"id": "subnet-1"}}},
	}}
	u.SetGroupVersionKind(nodeclassv1.EKSGroupVersion.WithKind(nodeclassv1.KindNodeClass))
	return u
}

// setSubnets writes status.subnets of the node class c, one subnet per
// zone, as its cloud provider's controller does once it has resolved the
// subnet selectors.
func setSubnets(t *testing.T, c *unstructured.Unstructured, zones ...string) {
	t.Helper()
	subnets := []any{}
	for i, z := range zones {
		subnets = append(subnets, map[string]any{"id": "subnet-" + string(rune('a'+i)), "zone": z, "zoneID": z + "-id"})
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(c.GroupVersionKind())
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(c), cur); err != nil {
		t.Fatalf("reading %s %s: %v", c.GetKind(), c.GetName(), err)
	}
	if err := unstructured.SetNestedSlice(cur.Object, subnets, "status", "subnets"); err != nil {
		t.Fatal(err)
	}
	if err := suite.client.Status().Update(t.Context(), cur); err != nil {
		t.Fatalf("writing the subnets of %s %s: %v", c.GetKind(), c.GetName(), err)
	}
}

// nodePool is a NodePool of the test's pool on the node class ref, with
// requirements (key, operator, values...) given as maps.
func nodePool(name, pool string, ref map[string]any, requirements ...any) *unstructured.Unstructured {
	if len(requirements) == 0 {
		requirements = []any{map[string]any{"key": karpenterv1.CapacityTypeLabelKey, "operator": "In", "values": []any{"on-demand"}}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{poolLabel: pool}},
			"spec":     map[string]any{"nodeClassRef": ref, "requirements": requirements},
		}},
	}}
	u.SetGroupVersionKind(karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodePool))
	return u
}

func ref(group, kind, name string) map[string]any {
	return map[string]any{"group": group, "kind": kind, "name": name}
}

// cleanup deletes obj when the test ends.
func cleanup(t *testing.T, obj client.Object) {
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), obj) })
}

// TestANodePoolWithoutAZoneTakesTheZonesOfItsEC2NodeClass is the minDomains
// case on the clusters whose NodePools name no zone: two nodes of the pool,
// in the test's zones 1 and 2, hold one pod each, and a pod that wants 3
// zones fits neither. The NodePool requires no zone; its EC2NodeClass's
// subnets say where Karpenter adds nodes. While they are in zones 1 and 2
// the pod is denied; once the EC2NodeClass has a subnet in zone 3 it is
// admitted with the warning naming zone 3; once that
// subnet is gone it is denied again.
func TestANodePoolWithoutAZoneTakesTheZonesOfItsEC2NodeClass(t *testing.T) {
	ns := newNamespace(t, "nodeclass")
	zone := func(i int) string { return ns + "-" + string(rune('0'+i)) }
	for _, i := range []int{1, 2} {
		n := spreadtest.MakeNode().Name(zone(i)).Zone(zone(i)).Label(poolLabel, ns).Obj()
		createNode(t, n)
		cleanup(t, n)
		create(t, podObj(spreadtest.MakePod().Namespace(ns).Name("web-"+zone(i)).Label("app", "web").Node(n.Name)))
	}
	class := ec2NodeClass(ns)
	create(t, class)
	cleanup(t, class)
	setSubnets(t, class, zone(1), zone(2))
	pool := nodePool(ns, ns, ref(nodeclassv1.EC2GroupName, nodeclassv1.KindEC2NodeClass, ns))
	create(t, pool)
	cleanup(t, pool)

	incoming := podObj(spreadtest.MakePod().Namespace(ns).Name("web-new").Label("app", "web").NodeSelector(poolLabel, ns).
		SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MinDomains(3).Obj()))
	// denied holds once the pod is denied with the NodePool's templates
	// derived: under the suite's messageDetail (domains) the denial counts
	// them without naming them, and only the NodePool's 2 templates pass
	// the pod's node selector, so a denial before the derivation does not
	// count.
	denied := func(ctx context.Context) (bool, error) {
		err := suite.client.Create(ctx, incoming.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "reach only 2 domains of topology.kubernetes.io/zone") &&
			strings.Contains(err.Error(), ": 2 would exceed maxSkew)"), err
	}
	eventually(t, "with the EC2NodeClass's subnets in the nodes' two zones, the pod is denied", denied)

	setSubnets(t, class, zone(1), zone(2), zone(3))
	want := "admitted: no current node fits; a new node that an autoscaler can add in zone " + zone(3) + " would"
	c, warnings := clientWithWarnings(t)
	eventually(t, "once a subnet is in a third zone, the pod is admitted with the warning that names the zone", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, incoming.DeepCopy(), client.DryRunAll)
		return err == nil && warnings.contains(want), err
	})

	setSubnets(t, class, zone(1), zone(2))
	eventually(t, "once that subnet is gone, the pod is denied again", denied)
}

// TestDeriveReadsNodeClassesThroughARealAPIServer holds lookup.Derive,
// reading from a real API server with the real EC2NodeClass CRD (and the
// stand-in of EKS Auto Mode's), to the zones each source gives a NodePool
// that leaves the zone open, and to the zones a NodePool requires that its
// node class does not serve.
func TestDeriveReadsNodeClassesThroughARealAPIServer(t *testing.T) {
	ns := newNamespace(t, "derive")
	zone := func(s string) string { return ns + "-" + s }
	ec2, eks := ec2NodeClass(ns), eksNodeClass(ns)
	for _, c := range []*unstructured.Unstructured{ec2, eks} {
		create(t, c)
		cleanup(t, c)
	}
	setSubnets(t, ec2, zone("a"), zone("b"), zone("c"))
	setSubnets(t, eks, zone("d"))
	pools := []*unstructured.Unstructured{
		nodePool(ns+"-ec2", ns, ref(nodeclassv1.EC2GroupName, nodeclassv1.KindEC2NodeClass, ns)),
		nodePool(ns+"-eks", ns, ref(nodeclassv1.EKSGroupName, nodeclassv1.KindNodeClass, ns)),
		nodePool(ns+"-kwok", ns, ref("karpenter.kwok.sh", "KWOKNodeClass", "default")),
		nodePool(ns+"-unserved", ns, ref(nodeclassv1.EC2GroupName, nodeclassv1.KindEC2NodeClass, ns),
			map[string]any{"key": v1.LabelTopologyZone, "operator": "In", "values": []any{zone("a"), zone("z")}},
			map[string]any{"key": karpenterv1.CapacityTypeLabelKey, "operator": "In", "values": []any{"spot"}}),
	}
	for _, p := range pools {
		create(t, p)
		cleanup(t, p)
	}

	d, err := lookup.Derive(t.Context(), suite.client, lookup.TemplateOptions{Karpenter: true, Zones: []string{zone("x"), zone("y")}})
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	var got []string
	for _, tm := range d.Templates {
		if strings.HasPrefix(tm.Name, "nodepool/"+ns+"-") {
			got = append(got, tm.Name)
		}
	}
	want := []string{
		"nodepool/" + ns + "-ec2/" + zone("a") + ",on-demand",
		"nodepool/" + ns + "-ec2/" + zone("b") + ",on-demand",
		"nodepool/" + ns + "-ec2/" + zone("c") + ",on-demand",
		"nodepool/" + ns + "-eks/" + zone("d") + ",on-demand",
		"nodepool/" + ns + "-kwok/" + zone("x") + ",on-demand",
		"nodepool/" + ns + "-kwok/" + zone("y") + ",on-demand",
		"nodepool/" + ns + "-unserved/" + zone("a") + ",spot",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the test's NodePool templates (-want +got):\n%s", diff)
	}
	i := slices.IndexFunc(d.UnservedZones, func(u autoscale.UnservedZones) bool { return u.NodePool == ns+"-unserved" })
	if i < 0 {
		t.Fatalf("no unserved zone reported for NodePool %s-unserved: %+v", ns, d.UnservedZones)
	}
	wantUnserved := autoscale.UnservedZones{
		NodePool:  ns + "-unserved",
		NodeClass: karpenterv1.NodeClassReference{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: ns},
		Zones:     []string{zone("z")}, Served: []string{zone("a"), zone("b"), zone("c")},
	}
	if diff := cmp.Diff(wantUnserved, d.UnservedZones[i]); diff != "" {
		t.Errorf("unserved zones (-want +got):\n%s", diff)
	}
}
