//go:build integration

package integration

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// poolLabel marks the nodes, templates and pods of one scenario, so that
// its templates take part in no other test's checks.
const poolLabel = "integration.spreadguard.io/pool"

// TestANewNodeTurnsADenialIntoAWarning is the minDomains case on a pool of
// nodes of the test's own: two nodes of the pool, in zone-a and zone-b, hold
// one pod each, and a pod that wants 3 zones fits neither. It is denied
// until something can add a node of the pool in zone-c (a NodeTemplate, a
// Karpenter NodePool), then admitted with the warning that names zone-c
// (not the template: messageDetail domains is the default), and denied
// again once that is deleted.
func TestANewNodeTurnsADenialIntoAWarning(t *testing.T) {
	tests := []struct {
		name string
		// source returns the object that can add the node, and what it is.
		source func(pool string) (client.Object, string)
	}{
		{
			name: "a NodeTemplate of the pool in zone-c",
			source: func(pool string) (client.Object, string) {
				return &v1alpha1.NodeTemplate{
					ObjectMeta: metav1.ObjectMeta{Name: pool + "-zone-c"},
					Spec:       v1alpha1.NodeTemplateSpec{Labels: map[string]string{v1.LabelTopologyZone: "zone-c", poolLabel: pool}},
				}, "NodeTemplate " + pool + "-zone-c"
			},
		},
		{
			name: "a Karpenter NodePool of the pool allowing zone-c",
			source: func(pool string) (client.Object, string) {
				np := &unstructured.Unstructured{Object: map[string]any{
					"metadata": map[string]any{"name": pool},
					"spec": map[string]any{"template": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{poolLabel: pool}},
						"spec": map[string]any{
							"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
							"requirements": []any{map[string]any{"key": v1.LabelTopologyZone, "operator": "In", "values": []any{"zone-c"}}},
						},
					}},
				}}
				np.SetGroupVersionKind(karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodePool))
				return np, "NodePool " + pool
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t, "template")
			for _, zone := range []string{"zone-a", "zone-b"} {
				name := ns + "-" + zone
				n := spreadtest.MakeNode().Name(name).Zone(zone).Label(poolLabel, ns).Obj()
				createNode(t, n)
				t.Cleanup(func() { _ = suite.client.Delete(context.Background(), n) })
				create(t, podObj(spreadtest.MakePod().Namespace(ns).Name("web-"+zone).Label("app", "web").Node(name)))
			}
			incoming := podObj(spreadtest.MakePod().Namespace(ns).Name("web-new").Label("app", "web").NodeSelector(poolLabel, ns).
				SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MinDomains(3).Obj()))

			eventually(t, "with nothing to add a node, a dry run of the pod is denied", func(ctx context.Context) (bool, error) {
				err := suite.client.Create(ctx, incoming.DeepCopy(), client.DryRunAll)
				return apierrors.IsForbidden(err), err
			})

			source, named := tt.source(ns)
			create(t, source)
			want := "admitted: no current node fits; a new node that an autoscaler can add in zone zone-c would"
			c, warnings := clientWithWarnings(t)
			eventually(t, "with "+named+", the pod is admitted with the warning that names zone-c", func(ctx context.Context) (bool, error) {
				err := c.Create(ctx, incoming.DeepCopy(), client.DryRunAll)
				return err == nil && warnings.contains(want), err
			})

			if err := suite.client.Delete(t.Context(), source); err != nil {
				t.Fatalf("deleting %s: %v", named, err)
			}
			eventually(t, "once it is deleted, the pod is denied again", func(ctx context.Context) (bool, error) {
				err := suite.client.Create(ctx, incoming.DeepCopy(), client.DryRunAll)
				return apierrors.IsForbidden(err), err
			})
		})
	}
}
