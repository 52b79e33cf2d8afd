package lookup

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// TemplateOptions says where the templates of the nodes an autoscaler can
// add come from.
type TemplateOptions struct {
	// NodeTemplates reads the NodeTemplate objects.
	NodeTemplates bool
	// Karpenter reads Karpenter's NodePools.
	Karpenter bool
	// NodeGroupLabel is the node label naming a node's group; empty: no
	// node-group templates.
	NodeGroupLabel string
}

// Templates derives, from what r holds, the templates of the nodes an
// autoscaler can add: the NodeTemplates (with o.NodeTemplates), the
// NodePools (with o.Karpenter) and the node groups (with
// o.NodeGroupLabel), with the topology keys of every policy. A cluster
// without the NodeTemplate or NodePool API has none of them. The webhook
// asks only for the kinds it watches: its cache refuses a list of any
// other.
func Templates(ctx context.Context, r client.Reader, o TemplateOptions) ([]spread.Template, error) {
	var in autoscale.Inputs
	in.NodeGroupLabel = o.NodeGroupLabel

	var nodes v1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	in.Nodes = pointers(nodes.Items)

	if o.NodeTemplates {
		var declared v1alpha1.NodeTemplateList
		if err := listOptional(ctx, r, &declared); err != nil {
			return nil, fmt.Errorf("listing the NodeTemplates: %w", err)
		}
		for _, t := range declared.Items {
			in.Declared = append(in.Declared, autoscale.Declared{Name: t.Name, Labels: t.Spec.Labels, Taints: t.Spec.Taints})
		}
	}

	if o.Karpenter {
		var pools karpenterv1.NodePoolList
		if err := listOptional(ctx, r, &pools); err != nil {
			return nil, fmt.Errorf("listing Karpenter's NodePools: %w", err)
		}
		in.NodePools = pointers(pools.Items)
	}

	keys, err := policyKeys(ctx, r)
	if err != nil {
		return nil, err
	}
	in.SpreadKeys = keys
	return autoscale.Templates(in), nil
}

// listOptional lists a kind whose API may not be installed.
func listOptional(ctx context.Context, r client.Reader, l client.ObjectList) error {
	err := r.List(ctx, l)
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// policyKeys returns the topology keys the policies spread on, sorted,
// without duplicates.
func policyKeys(ctx context.Context, r client.Reader) ([]string, error) {
	seen := map[string]bool{}
	var keys []string
	add := func(cs []v1alpha1.Constraint) {
		for _, c := range cs {
			if !seen[c.TopologyKey] {
				seen[c.TopologyKey] = true
				keys = append(keys, c.TopologyKey)
			}
		}
	}
	var policies v1alpha1.SpreadPolicyList
	if err := listOptional(ctx, r, &policies); err != nil {
		return nil, fmt.Errorf("listing the SpreadPolicies: %w", err)
	}
	for _, p := range policies.Items {
		add(p.Spec.Constraints)
	}
	var cluster v1alpha1.ClusterSpreadPolicyList
	if err := listOptional(ctx, r, &cluster); err != nil {
		return nil, fmt.Errorf("listing the ClusterSpreadPolicies: %w", err)
	}
	for _, p := range cluster.Items {
		add(p.Spec.Constraints)
	}
	slices.Sort(keys)
	return keys, nil
}
