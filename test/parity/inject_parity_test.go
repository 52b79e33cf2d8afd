package parity

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// injectDefaults are cluster-wide default constraints as a SpreadPolicy
// would carry them: without labelSelector, with and without the inclusion
// policies and minDomains.
var injectDefaults = map[string][]v1.TopologySpreadConstraint{
	"zone, maxSkew 1, policies unset": {
		{MaxSkew: 1, TopologyKey: labelZone, WhenUnsatisfiable: v1.DoNotSchedule},
	},
	"hostname hard with taints ignored, zone soft": {
		{MaxSkew: 1, TopologyKey: labelHostname, WhenUnsatisfiable: v1.DoNotSchedule, NodeTaintsPolicy: ptr.To(v1.NodeInclusionPolicyIgnore)},
		{MaxSkew: 2, TopologyKey: labelZone, WhenUnsatisfiable: v1.ScheduleAnyway},
	},
	"zone hard narrowed by matchLabelKeys": {
		{MaxSkew: 1, TopologyKey: labelZone, WhenUnsatisfiable: v1.DoNotSchedule, MatchLabelKeys: []string{"pod-template-hash", "version"}},
	},
	"zone minDomains 3 affinity ignored, rack hard": {
		{MaxSkew: 2, TopologyKey: labelZone, WhenUnsatisfiable: v1.DoNotSchedule, MinDomains: ptr.To[int32](3),
			NodeAffinityPolicy: ptr.To(v1.NodeInclusionPolicyIgnore), NodeTaintsPolicy: ptr.To(v1.NodeInclusionPolicyHonor)},
		{MaxSkew: 1, TopologyKey: labelRack, WhenUnsatisfiable: v1.DoNotSchedule},
	},
}

// TestInjectedConstraintsParity checks the mutation path end to end.
// spreadguard derives the selector, injects the defaults and checks the
// mutated pod; that must agree with
//   - the scheduler filtering the mutated pod as the apiserver stores it,
//     which is what enforces the injected constraints in a cluster, and
//   - the scheduler's own defaulting: configured with the defaults as
//     List-defaulted constraints, it derives the selector with
//     helper.DefaultSelector from its informers and filters the pod as
//     written. spreadguard's nodeTaintsPolicy Honor where a default leaves
//     it unset (SPEC, "Mutation, exactly") is configured there too. The
//     scheduler ignores matchLabelKeys in default constraints, which a
//     SpreadPolicy may carry, so defaults that have some skip this check.
func TestInjectedConstraintsParity(t *testing.T) {
	t.Parallel()
	for name, defaults := range injectDefaults {
		t.Run(name, func(t *testing.T) {
			// A scheduler serves one case at a time (it swaps its
			// snapshot), so each configuration, run beside the others, has
			// its own.
			t.Parallel()
			explicit := newScheduler(t, nil)
			var listDefaulting *scheduler
			if !slices.ContainsFunc(defaults, func(c v1.TopologySpreadConstraint) bool { return len(c.MatchLabelKeys) > 0 }) {
				listDefaulting = newScheduler(t, schedulerDefaults(defaults))
			}
			for _, seed := range seeds(t) {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					t.Logf("seed %d (replay with -parity.seed=%d)", seed, seed)
					var failures []failure
					injected := 0
					indexes := caseIndexes(t)
					// A quarter of the filter parity's cases per defaults
					// configuration keeps the run short; -parity.n scales it.
					if len(indexes) > 1 {
						indexes = indexes[:max(1, len(indexes)/4)]
					}
					for _, i := range indexes {
						c, sc := newGen(seed^injectStream, i).injectCase()
						got, diffs, err := compareInjected(t.Context(), explicit, listDefaulting, c, sc, defaults, newGen(seed^eventStream, i))
						if err != nil {
							t.Fatalf("case %d: %v\n%s", i, err, formatCase(c))
						}
						if got {
							injected++
						}
						if len(diffs) > 0 {
							failures = append(failures, failure{index: i, size: len(c.Nodes) + len(c.Pods), text: formatCase(c) + "\n" + formatSelectorCase(sc, nil), diffs: diffs})
						}
					}
					report(t, "TestInjectedConstraintsParity", seed, len(indexes), failures)
					t.Logf("%d cases, %d with injected constraints", len(indexes), injected)
					if len(indexes) >= 100 && injected < len(indexes)/5 {
						t.Errorf("only %d of %d cases got constraints injected; the generator no longer exercises injection", injected, len(indexes))
					}
				})
			}
		})
	}
}

// injectStream keeps these cases apart from the other tests' cases.
const injectStream uint64 = 0x1a7ec7

// schedulerDefaults is defaults as spreadguard injects them, for the
// scheduler's configuration: nodeTaintsPolicy Honor where unset.
func schedulerDefaults(defaults []v1.TopologySpreadConstraint) []v1.TopologySpreadConstraint {
	out := make([]v1.TopologySpreadConstraint, len(defaults))
	for i, d := range defaults {
		out[i] = *d.DeepCopy()
		if out[i].NodeTaintsPolicy == nil {
			out[i].NodeTaintsPolicy = ptr.To(v1.NodeInclusionPolicyHonor)
		}
	}
	return out
}

// injectCase draws a cluster and, for its incoming pod, the Services and
// owners that DefaultSelector consults. The incoming pod declares no
// constraint, and half of the existing pods of its namespace carry its
// labels, as the other replicas of its workload do.
func (g *gen) injectCase() (*clusterCase, *selectorCase) {
	c := g.clusterCase()
	sc := g.selectorCase()
	c.Pod.Spec.TopologySpreadConstraints = nil
	c.Pod.Labels = maps.Clone(sc.Pod.Labels)
	c.Pod.OwnerReferences = sc.Pod.OwnerReferences
	sc.Pod = c.Pod
	for _, p := range c.Pods {
		if p.Namespace == c.Pod.Namespace && g.chance(0.5) {
			p.Labels = maps.Clone(c.Pod.Labels)
		}
	}
	return c, sc
}

// compareInjected returns whether spreadguard injected constraints, and
// every difference from the scheduler, filtering the stored mutated pod
// (explicit) and, when not nil, defaulting the pod itself (listDefaulting).
func compareInjected(ctx context.Context, explicit, listDefaulting *scheduler, c *clusterCase, sc *selectorCase, defaults []v1.TopologySpreadConstraint, events *gen) (bool, []string, error) {
	src, err := sc.sources()
	if err != nil {
		return false, nil, fmt.Errorf("storing the Services and owners: %w", err)
	}
	sel, err := spread.DefaultSelector(c.Pod, src)
	if err != nil {
		return false, []string{fmt.Sprintf("DefaultSelector returned error %v", err)}, nil
	}
	constraints, err := spread.InjectConstraints(c.Pod, sel, defaults)
	if err != nil {
		return false, []string{fmt.Sprintf("InjectConstraints returned error %v", err)}, nil
	}
	mutated := c.Pod.DeepCopy()
	mutated.Spec.TopologySpreadConstraints = constraints
	stored := storedPod(mutated)
	var diffs []string
	if again, err := spread.InjectConstraints(mutated, sel, defaults); err != nil || again != nil {
		diffs = append(diffs, fmt.Sprintf("a second InjectConstraints over the mutated pod returned %v, %v; want nil, nil", again, err))
	}
	if err := validatePod(stored); err != nil {
		diffs = append(diffs, fmt.Sprintf("the mutated pod is refused by the apiserver's validation: %v", err))
	}
	variants := []podVariant{{"as stored", stored}}
	if hasMatchLabelKeys(mutated) {
		variants = append(variants, podVariant{"as mutated", mutated})
	}

	out, err := explicit.decide(ctx, c, stored)
	if err != nil {
		return false, nil, err
	}
	for _, d := range compareCheckers(c, out, stored, expectedVerdict(stored, out), variants, events) {
		diffs = append(diffs, "scheduler filtering the stored mutated pod: "+d)
	}
	if listDefaulting != nil {
		if err := listDefaulting.setSelectorObjects(sc); err != nil {
			return false, nil, err
		}
		out, err := listDefaulting.decide(ctx, c, c.Pod)
		if err != nil {
			return false, nil, err
		}
		for _, d := range compareCheckers(c, out, stored, expectedVerdict(stored, out), variants[:1], events) {
			diffs = append(diffs, "scheduler defaulting the pod as written: "+d)
		}
	}
	if len(diffs) > 0 {
		diffs = append(diffs, fmt.Sprintf("derived selector %q; injected:\n%s", sel, formatIncoming(mutated)))
	}
	return len(constraints) > 0, diffs, nil
}

// sources answers DefaultSelector's lookups for sc through the webhook's
// own lookup code (lookup.Sources over a Store), as kubectl-spread check
// does.
func (sc *selectorCase) sources() (*lookup.Sources, error) {
	store, err := lookup.NewStore(sc.objects()...)
	if err != nil {
		return nil, err
	}
	return lookup.NewSources(store), nil
}

func (sc *selectorCase) objects() []runtime.Object {
	var objs []runtime.Object
	for _, o := range sc.Services {
		objs = append(objs, o)
	}
	for _, o := range sc.RCs {
		objs = append(objs, o)
	}
	for _, o := range sc.RSs {
		objs = append(objs, o)
	}
	for _, o := range sc.SSs {
		objs = append(objs, o)
	}
	return objs
}

// setSelectorObjects replaces what the scheduler's informers hold with the
// Services and owners of sc.
func (s *scheduler) setSelectorObjects(sc *selectorCase) error {
	replace := func(inf cache.SharedIndexInformer, objs []runtime.Object) error {
		list := make([]any, len(objs))
		for i, o := range objs {
			list[i] = o
		}
		return inf.GetIndexer().Replace(list, "")
	}
	var svc, rc, rs, ss []runtime.Object
	for _, o := range sc.Services {
		svc = append(svc, o)
	}
	for _, o := range sc.RCs {
		rc = append(rc, o)
	}
	for _, o := range sc.RSs {
		rs = append(rs, o)
	}
	for _, o := range sc.SSs {
		ss = append(ss, o)
	}
	core, apps := s.informers.Core().V1(), s.informers.Apps().V1()
	for _, r := range []struct {
		inf  cache.SharedIndexInformer
		objs []runtime.Object
	}{
		{core.Services().Informer(), svc},
		{core.ReplicationControllers().Informer(), rc},
		{apps.ReplicaSets().Informer(), rs},
		{apps.StatefulSets().Informer(), ss},
	} {
		if err := replace(r.inf, r.objs); err != nil {
			return fmt.Errorf("filling the scheduler's informers: %w", err)
		}
	}
	return nil
}
