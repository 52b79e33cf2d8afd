package spreadhealth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/health"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// policyCondition is the Ready condition a pass computed for a policy.
type policyCondition struct {
	kind, namespace, name string
	cond                  metav1.Condition
}

// writeStatus patches the status of each policy whose status the tally
// and the reach of its constraints change, adds the results of the
// constraints out of reach to reports, and returns every policy's Ready
// condition. A policy whose status cannot be patched is counted and passed
// over; the errors are returned together.
func (c *Controller) writeStatus(ctx context.Context, tally map[health.PolicyKey]health.Counts, reports map[string]*health.Report, p *Pass) ([]policyCondition, error) {
	var conds []policyCondition
	var errs []error
	// Read only, labels alone: the cache's objects, not copies of 5,000
	// nodes per pass.
	var nodes v1.NodeList
	if err := c.reader.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	reach := reachInputs{nodes: workload.Pointers(nodes.Items), templates: c.cfg.State.Templates(), unserved: c.cfg.State.UnservedZones(), reports: reports}
	var sps v1alpha1.SpreadPolicyList
	if err := c.reader.List(ctx, &sps); err != nil {
		return nil, fmt.Errorf("listing SpreadPolicies: %w", err)
	}
	for i := range sps.Items {
		sp := &sps.Items[i]
		counts := tally[health.PolicyKey{Kind: v1alpha1.KindSpreadPolicy, Name: sp.Namespace + "/" + sp.Name}]
		ready := health.Ready(&sp.Spec, policy.ValidateSpreadPolicy(sp), []string{sp.Namespace}, counts, c.cfg.Index)
		ready = c.reach(ready, &sp.Spec, sp.Namespace+"/"+sp.Name, policyRef(v1alpha1.KindSpreadPolicy, sp.Namespace, sp.Name), []string{sp.Namespace}, reach)
		conds = append(conds, policyCondition{v1alpha1.KindSpreadPolicy, sp.Namespace, sp.Name, ready})
		errs = append(errs, c.patchStatus(ctx, sp, &sp.Status, sp.Generation, ready, counts, p))
	}
	var csps v1alpha1.ClusterSpreadPolicyList
	if err := c.reader.List(ctx, &csps); err != nil {
		return conds, errors.Join(append(errs, fmt.Errorf("listing ClusterSpreadPolicies: %w", err))...)
	}
	namespaces := c.cfg.Index.Namespaces()
	for i := range csps.Items {
		csp := &csps.Items[i]
		scope, err := health.ClusterScope(csp, namespaces, c.cfg.Sources)
		if err != nil {
			c.metrics.failed(objectStatus)
			errs = append(errs, fmt.Errorf("ClusterSpreadPolicy %s: %w", csp.Name, err))
			continue
		}
		counts := tally[health.PolicyKey{Kind: v1alpha1.KindClusterSpreadPolicy, Name: csp.Name}]
		ready := health.Ready(&csp.Spec.PolicySpec, policy.ValidateClusterSpreadPolicy(csp), scope, counts, c.cfg.Index)
		ready = c.reach(ready, &csp.Spec.PolicySpec, csp.Name, policyRef(v1alpha1.KindClusterSpreadPolicy, "", csp.Name), scope, reach)
		conds = append(conds, policyCondition{v1alpha1.KindClusterSpreadPolicy, "", csp.Name, ready})
		errs = append(errs, c.patchStatus(ctx, csp, &csp.Status, csp.Generation, ready, counts, p))
	}
	return conds, errors.Join(errs...)
}

// reachInputs are what reach reads, the same for every policy of a pass.
type reachInputs struct {
	nodes     []*v1.Node
	templates []spread.Template
	unserved  []spread.UnservedZone
	reports   map[string]*health.Report
}

// reach returns ready as health.Reach words the constraints of spec that
// the nodes and the templates cannot reach, and health.Unserved the zones
// it spreads over that a node pool requires but cannot serve, and adds
// their results to the Reports of namespaces, the policy's scope, that
// have one: a namespace without an audited workload has no pod Pending
// for it.
func (c *Controller) reach(ready metav1.Condition, spec *v1alpha1.PolicySpec, name string, ref v1.ObjectReference, namespaces []string, in reachInputs) metav1.Condition {
	out := autoscale.ConstraintsOutOfReach(spec.Constraints, in.nodes, in.templates)
	ready, results := health.Reach(ready, name, ref, out, c.cfg.Engine.MessageDetail)
	ready, unserved := health.Unserved(ready, name, ref, spec.Constraints, in.unserved, c.cfg.Engine.MessageDetail)
	results = append(results, unserved...)
	for _, ns := range namespaces {
		if rep := in.reports[ns]; rep != nil && len(results) > 0 {
			rep.Results = append(rep.Results, results...)
			rep.Summary.Fail += len(results)
		}
	}
	return ready
}

func policyRef(kind, namespace, name string) v1.ObjectReference {
	return v1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind, Namespace: namespace, Name: name}
}

// patchStatus patches obj's status (st, a field of obj, which the cache
// shares: neither is modified) when it changes. A policy deleted since the
// cache listed it is passed over: there is no status left to write.
func (c *Controller) patchStatus(ctx context.Context, obj client.Object, st *v1alpha1.PolicyStatus, generation int64,
	ready metav1.Condition, counts health.Counts, p *Pass) error {
	next := st.DeepCopy()
	if !health.SetStatus(next, generation, ready, counts) {
		return nil
	}
	// The whole status, as a merge patch: a diff against the cached object
	// would leave out the counts that are 0 in both, and a count the API
	// server never stored shows as an empty column.
	data, err := json.Marshal(map[string]any{"status": next})
	if err != nil {
		return fmt.Errorf("encoding the status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	patched := obj.DeepCopyObject().(client.Object)
	if err := c.writes.Wait(ctx); err != nil {
		return err
	}
	err = c.cfg.Client.Status().Patch(ctx, patched, client.RawPatch(types.MergePatchType, data))
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		c.metrics.failed(objectStatus)
		return fmt.Errorf("patching the status of %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	p.Writes = append(p.Writes, client.ObjectKeyFromObject(obj).String())
	return nil
}
