package lookup

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// TemplateOptions says where the templates of the nodes an autoscaler can
// add come from.
type TemplateOptions struct {
	// NodeTemplates reads the NodeTemplate objects.
	NodeTemplates bool
	// Karpenter reads Karpenter's NodePools, and the node classes that say
	// their zones.
	Karpenter bool
	// Zones are the zones new nodes may come up in where nothing in the
	// API says so (autoscale.Inputs.Zones).
	Zones []string
	// NodeGroupLabel is the node label naming a node's group; empty: no
	// node-group templates.
	NodeGroupLabel string
	// ClusterAutoscaler is cluster-autoscaler's status, parsed from its
	// ConfigMap by autoscale.ParseClusterAutoscalerStatus; nil without it.
	// When nil, Derive reads it from ClusterAutoscalerStatus.
	ClusterAutoscaler *autoscale.ClusterAutoscalerStatus
	// ClusterAutoscalerStatus names cluster-autoscaler's status ConfigMap,
	// which Derive reads from the reader it is given; zero: not read.
	ClusterAutoscalerStatus types.NamespacedName
}

// Templates returns Derive's templates.
func Templates(ctx context.Context, r client.Reader, o TemplateOptions) ([]spread.Template, error) {
	d, err := Derive(ctx, r, o)
	if err != nil {
		return nil, err
	}
	return d.Templates, nil
}

// Derived is what Derive finds: autoscale.Derived, and why
// cluster-autoscaler's status, when its ConfigMap is there, was not read.
type Derived struct {
	autoscale.Derived
	// ClusterAutoscalerStatusErr says why the ConfigMap
	// TemplateOptions.ClusterAutoscalerStatus names, found, was not read:
	// autoscale.ErrLegacyClusterAutoscalerStatus, or what is wrong with it.
	// The node groups are then judged as without it. Nil when it was read,
	// or is not there.
	ClusterAutoscalerStatusErr error
}

// Derive derives, from what r holds, the templates of the nodes an
// autoscaler can add and what the operator must hear of them
// (autoscale.Derived): the NodeTemplates (with o.NodeTemplates), the
// NodePools and the node classes their zones come from (with
// o.Karpenter) and the node groups (with o.NodeGroupLabel, judged by
// cluster-autoscaler's status when o names its ConfigMap and r holds it),
// with the topology keys of every policy. A cluster without the
// NodeTemplate, NodePool or node class APIs has none of them. The webhook
// asks only for the kinds it watches: its cache refuses a list of any
// other.
func Derive(ctx context.Context, r client.Reader, o TemplateOptions) (Derived, error) {
	var in autoscale.Inputs
	in.NodeGroupLabel = o.NodeGroupLabel
	in.Zones = o.Zones
	in.ClusterAutoscaler = o.ClusterAutoscaler
	var out Derived
	if in.ClusterAutoscaler == nil && o.ClusterAutoscalerStatus.Name != "" {
		status, err := clusterAutoscalerStatus(ctx, r, o.ClusterAutoscalerStatus)
		var unread *unreadStatus
		switch {
		case errors.As(err, &unread):
			out.ClusterAutoscalerStatusErr = err
		case err != nil:
			return Derived{}, err
		}
		in.ClusterAutoscaler = status
	}

	var nodes v1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return Derived{}, fmt.Errorf("listing the nodes: %w", err)
	}
	in.Nodes = workload.Pointers(nodes.Items)

	if o.NodeTemplates {
		var declared v1alpha1.NodeTemplateList
		if err := listOptional(ctx, r, &declared); err != nil {
			return Derived{}, fmt.Errorf("listing the NodeTemplates: %w", err)
		}
		for _, t := range declared.Items {
			in.Declared = append(in.Declared, autoscale.Declared{Name: t.Name, Labels: t.Spec.Labels, Taints: t.Spec.Taints})
		}
	}

	if o.Karpenter {
		var pools karpenterv1.NodePoolList
		if err := listOptional(ctx, r, &pools); err != nil {
			return Derived{}, fmt.Errorf("listing Karpenter's NodePools: %w", err)
		}
		in.NodePools = workload.Pointers(pools.Items)
		classes, err := nodeClasses(ctx, r)
		if err != nil {
			return Derived{}, err
		}
		in.NodeClasses = classes
	}

	keys, err := policyKeys(ctx, r)
	if err != nil {
		return Derived{}, err
	}
	in.SpreadKeys = keys
	out.Derived = autoscale.Derive(in)
	return out, nil
}

// unreadStatus is a status ConfigMap that is there but says nothing
// spreadguard reads.
type unreadStatus struct {
	key types.NamespacedName
	err error
}

func (e *unreadStatus) Error() string {
	return fmt.Sprintf("ConfigMap %s not read: %v", e.key, e.err)
}

func (e *unreadStatus) Unwrap() error { return e.err }

// clusterAutoscalerStatus reads cluster-autoscaler's status from the
// ConfigMap key names: nil when it is not there, or where the webhook's
// cache does not watch it (it could not, at start); an *unreadStatus when
// it holds no status spreadguard reads.
func clusterAutoscalerStatus(ctx context.Context, r client.Reader, key types.NamespacedName) (*autoscale.ClusterAutoscalerStatus, error) {
	cm, err := ReadStatusConfigMap(ctx, r, key)
	var notCached *crcache.ErrResourceNotCached
	switch {
	case errors.As(err, &notCached):
		return nil, nil
	case err != nil || cm == nil:
		return nil, err
	}
	text, ok := cm.Data[autoscale.ClusterAutoscalerStatusKey]
	if !ok {
		return nil, &unreadStatus{key, fmt.Errorf("it has no key %s", autoscale.ClusterAutoscalerStatusKey)}
	}
	status, err := autoscale.ParseClusterAutoscalerStatus(text)
	if err != nil {
		return nil, &unreadStatus{key, err}
	}
	return status, nil
}

// nodeClasses lists the node classes whose status names zones. Their
// kinds are watched only where the API server serves them, so a cache
// without their informer has none.
func nodeClasses(ctx context.Context, r client.Reader) ([]autoscale.NodeClass, error) {
	var out []autoscale.NodeClass
	var ec2 nodeclassv1.EC2NodeClassList
	if err := listNodeClasses(ctx, r, &ec2); err != nil {
		return nil, fmt.Errorf("listing the EC2NodeClasses: %w", err)
	}
	for _, c := range ec2.Items {
		out = append(out, autoscale.NodeClass{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: c.Name, Zones: c.Status.Zones(), ZoneIDs: c.Status.ZoneIDs()})
	}
	var eks nodeclassv1.NodeClassList
	if err := listNodeClasses(ctx, r, &eks); err != nil {
		return nil, fmt.Errorf("listing EKS Auto Mode's NodeClasses: %w", err)
	}
	for _, c := range eks.Items {
		out = append(out, autoscale.NodeClass{Group: nodeclassv1.EKSGroupName, Kind: nodeclassv1.KindNodeClass, Name: c.Name, Zones: c.Status.Zones(), ZoneIDs: c.Status.ZoneIDs()})
	}
	return out, nil
}

// listNodeClasses is listOptional, and also answers none where the
// webhook's cache does not watch the kind: it watches a node class only
// when the API server serves it.
func listNodeClasses(ctx context.Context, r client.Reader, l client.ObjectList) error {
	err := listOptional(ctx, r, l)
	var notCached *crcache.ErrResourceNotCached
	if errors.As(err, &notCached) {
		return nil
	}
	return err
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
