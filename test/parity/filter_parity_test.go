package parity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// maxReported bounds the cases printed per seed; the smallest failing cases
// are printed, as they are the easiest to read.
const maxReported = 3

// TestFilterParity generates random clusters and pods and requires that
// spreadguard's feasible nodes, verdict and per-constraint counting equal
// what the real kube-scheduler plugins compute, for the plain Snapshot, the
// Index built from it and the Index built from a stream of informer events.
func TestFilterParity(t *testing.T) {
	sched := newScheduler(t, nil)
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay with -parity.seed=%d)", seed, seed)
			var failures []failure
			stats := map[spread.Verdict]int{}
			indexes := caseIndexes(t)
			for _, i := range indexes {
				c := newGen(seed, i).clusterCase()
				verdict, diffs, err := compareFilter(t.Context(), sched, c, newGen(seed^eventStream, i))
				if err != nil {
					t.Fatalf("case %d: the scheduler failed: %v\n%s", i, err, formatCase(c))
				}
				stats[verdict]++
				if len(diffs) > 0 {
					failures = append(failures, failure{index: i, size: len(c.Nodes) + len(c.Pods), text: formatCase(c), diffs: diffs})
				}
			}
			report(t, "TestFilterParity", seed, len(indexes), failures)
			t.Logf("%d cases: %v", len(indexes), stats)
			// A generator that never reaches a verdict would make its
			// agreement meaningless.
			if len(indexes) >= 500 {
				for _, v := range []spread.Verdict{spread.VerdictNoHardConstraints, spread.VerdictFeasible, spread.VerdictUnsatisfiable, spread.VerdictNoCandidateNodes} {
					if stats[v] < len(indexes)/100 {
						t.Errorf("only %d of %d cases reached verdict %s; the generator no longer covers it", stats[v], len(indexes), v)
					}
				}
			}
		})
	}
}

// eventStream separates the random stream that orders informer events from
// the one that draws the case, so both replay from the same seed.
const eventStream uint64 = 0x9e3779b97f4a7c15

type failure struct {
	index int
	size  int
	text  string
	diffs []string
}

func report(t *testing.T, test string, seed uint64, total int, failures []failure) {
	t.Helper()
	if len(failures) == 0 {
		return
	}
	slices.SortStableFunc(failures, func(a, b failure) int { return a.size - b.size })
	t.Errorf("%d of %d cases differ from kube-scheduler v1.37.1 (seed %d); the %d smallest:", len(failures), total, seed, min(len(failures), maxReported))
	for _, f := range failures[:min(len(failures), maxReported)] {
		t.Errorf("case %d — replay: %s\n%s\ndifferences:\n  %s", f.index, replay(test, seed, f.index), f.text, strings.Join(f.diffs, "\n  "))
	}
	if len(failures) > maxReported {
		var rest []string
		for _, f := range failures[maxReported:] {
			rest = append(rest, fmt.Sprintf("%d (%s)", f.index, firstLine(f.diffs[0])))
		}
		t.Errorf("the other failing cases of seed %d (replay each with -parity.case): %s", seed, strings.Join(rest, "; "))
	}
}

// hardConstraints returns the indexes of pod's DoNotSchedule constraints.
func hardConstraints(pod *v1.Pod) []int {
	var out []int
	for i, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			out = append(out, i)
		}
	}
	return out
}

// expectedVerdict is the verdict the scheduler's outcome implies (SPEC,
// "Validation, exactly").
func expectedVerdict(pod *v1.Pod, out *schedulerOutcome) spread.Verdict {
	switch {
	case len(hardConstraints(pod)) == 0:
		return spread.VerdictNoHardConstraints
	case len(out.Feasible) > 0:
		return spread.VerdictFeasible
	case len(out.Candidates) > 0:
		return spread.VerdictUnsatisfiable
	}
	return spread.VerdictNoCandidateNodes
}

// compareFilter runs one case through the scheduler and every spreadguard
// checker and returns the expected verdict and every difference found.
func compareFilter(ctx context.Context, sched *scheduler, c *clusterCase, events *gen) (spread.Verdict, []string, error) {
	stored := storedPod(c.Pod)
	out, err := sched.run(ctx, c.Nodes, c.Pods, stored)
	if err != nil {
		return "", nil, err
	}
	// The webhook sees the pod as stored; the kubectl plugin may be given
	// the pod as written. Both must give the scheduler's answer.
	variants := []podVariant{{"as stored", stored}}
	if hasMatchLabelKeys(c.Pod) {
		variants = append(variants, podVariant{"as written", c.Pod})
	}
	want := expectedVerdict(stored, out)
	return want, compareCheckers(c, out, stored, want, variants, events), nil
}

type podVariant struct {
	name string
	pod  *v1.Pod
}

// compareCheckers asks the Snapshot, the Index built from it and the Index
// built from events about every variant of the pod, and compares each
// answer with the scheduler's outcome for reference, the pod as the
// scheduler saw it (or, for injected constraints, as spreadguard stores it).
func compareCheckers(c *clusterCase, out *schedulerOutcome, reference *v1.Pod, want spread.Verdict, variants []podVariant, events *gen) []string {
	before := &clusterCase{Nodes: deepCopyNodes(c.Nodes), Pods: deepCopyPods(c.Pods), Pod: c.Pod.DeepCopy()}
	snap := spread.Snapshot{Nodes: c.Nodes, Pods: c.Pods}
	checkers := []struct {
		name    string
		checker spread.Checker
	}{
		{"Snapshot", snap},
		{"IndexFromSnapshot", spread.IndexFromSnapshot(snap)},
		{"Index from informer events", indexFromEvents(events, c)},
	}
	var diffs []string
	for _, ch := range checkers {
		for _, variant := range variants {
			where := fmt.Sprintf("%s, pod %s", ch.name, variant.name)
			pod := variant.pod.DeepCopy()
			res, err := ch.checker.Check(pod, spread.Options{Explain: true})
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("%s: Check returned error %v, want a result", where, err))
				continue
			}
			if d := cmp.Diff(variant.pod, pod); d != "" {
				diffs = append(diffs, fmt.Sprintf("%s: Check modified the pod (-before +after):\n%s", where, d))
			}
			diffs = append(diffs, compareResult(where, reference, out, want, res)...)

			fast, err := ch.checker.Check(variant.pod.DeepCopy(), spread.Options{})
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("%s without Explain: Check returned error %v, want a result", where, err))
				continue
			}
			diffs = append(diffs, compareFast(where, reference, out, want, fast)...)
		}
	}
	if d := cmp.Diff(before, c); d != "" {
		diffs = append(diffs, fmt.Sprintf("the checks modified their inputs (-before +after):\n%s", d))
	}
	return diffs
}

func hasMatchLabelKeys(pod *v1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.TopologySpreadConstraints, func(c v1.TopologySpreadConstraint) bool { return len(c.MatchLabelKeys) > 0 })
}

// compareResult compares an Explain result with the scheduler's outcome.
func compareResult(where string, pod *v1.Pod, out *schedulerOutcome, want spread.Verdict, res *spread.Result) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, where+": "+fmt.Sprintf(format, args...)) }
	if res.Verdict != want {
		add("verdict %s, want %s (scheduler: feasible %v, passing affinity/taints/cordon %v)", res.Verdict, want, out.Feasible, out.Candidates)
	}
	// Without hard constraints the scheduler's feasible set is the set of
	// nodes passing affinity, taints and cordons; spreadguard may report it
	// or not, but what it reports must be right.
	if len(hardConstraints(pod)) > 0 || res.FeasibleNodes != nil {
		if d := cmp.Diff(out.Feasible, res.FeasibleNodes, cmpopts.EquateEmpty()); d != "" {
			add("feasible nodes differ from the scheduler's (-scheduler +spreadguard):\n%s", d)
		}
	}
	diffs = append(diffs, compareExcluded(where, out, res)...)
	if res.FeasibleCount != len(res.FeasibleNodes) && len(hardConstraints(pod)) > 0 {
		add("FeasibleCount %d, but %d FeasibleNodes listed", res.FeasibleCount, len(res.FeasibleNodes))
	}
	hard := hardConstraints(pod)
	if out.Spread != nil && len(out.Spread.Domains) != len(hard) {
		add("the scheduler counts %d hard constraints, the pod checked has %d", len(out.Spread.Domains), len(hard))
	}
	if len(res.Constraints) != len(hard) {
		add("%d constraint results, want one per hard constraint (%d)", len(res.Constraints), len(hard))
		return diffs
	}
	for k, i := range hard {
		c, got := pod.Spec.TopologySpreadConstraints[i], res.Constraints[k]
		if got.Index != i || got.TopologyKey != c.TopologyKey || got.MaxSkew != c.MaxSkew {
			add("constraint result %d is {index %d, key %s, maxSkew %d}, want {index %d, key %s, maxSkew %d}", k, got.Index, got.TopologyKey, got.MaxSkew, i, c.TopologyKey, c.MaxSkew)
		}
		if out.Spread == nil || k >= len(out.Spread.Domains) {
			continue // the scheduler stopped before counting (e.g. conflicting matchFields)
		}
		if got.SelfMatch != out.Spread.SelfMatch[k] {
			add("spec.topologySpreadConstraints[%d]: selfMatch %d, scheduler %d", i, got.SelfMatch, out.Spread.SelfMatch[k])
		}
		if d := cmp.Diff(out.Spread.Domains[k], got.Domains, cmpopts.EquateEmpty()); d != "" {
			add("spec.topologySpreadConstraints[%d]: domain counts %s, scheduler counts %s (-scheduler +spreadguard):\n%s", i, formatCounts(got.Domains), formatCounts(out.Spread.Domains[k]), d)
		}
		if got.GlobalMin != out.Spread.GlobalMin[k] {
			add("spec.topologySpreadConstraints[%d]: global minimum %d, scheduler %d", i, got.GlobalMin, out.Spread.GlobalMin[k])
		}
	}
	return diffs
}

// compareFast compares a result computed without Explain: the verdict must
// not depend on Explain.
func compareFast(where string, pod *v1.Pod, out *schedulerOutcome, want spread.Verdict, res *spread.Result) []string {
	where += " without Explain"
	var diffs []string
	if res.Verdict != want {
		diffs = append(diffs, fmt.Sprintf("%s: verdict %s, want %s", where, res.Verdict, want))
	}
	if len(hardConstraints(pod)) == 0 {
		return diffs
	}
	if len(out.Feasible) == 0 && res.FeasibleCount != 0 {
		diffs = append(diffs, fmt.Sprintf("%s: FeasibleCount %d, but the scheduler finds no feasible node", where, res.FeasibleCount))
	}
	if len(out.Feasible) > 0 && (res.FeasibleCount < 1 || res.FeasibleCount > len(out.Feasible)) {
		diffs = append(diffs, fmt.Sprintf("%s: FeasibleCount %d, want 1..%d", where, res.FeasibleCount, len(out.Feasible)))
	}
	return diffs
}

func deepCopyNodes(in []*v1.Node) []*v1.Node {
	if in == nil {
		return nil
	}
	out := make([]*v1.Node, len(in))
	for i, n := range in {
		out[i] = n.DeepCopy()
	}
	return out
}

func deepCopyPods(in []*v1.Pod) []*v1.Pod {
	if in == nil {
		return nil
	}
	out := make([]*v1.Pod, len(in))
	for i, p := range in {
		out[i] = p.DeepCopy()
	}
	return out
}

// reasonPlugin is the filter plugin that must reject a node spreadguard
// excludes for a reason, and the start of the plugin's message.
var reasonPlugin = map[spread.ExclusionReason]struct{ plugin, message string }{
	spread.ReasonUnschedulable:      {names.NodeUnschedulable, ""},
	spread.ReasonUntoleratedTaint:   {names.TaintToleration, ""},
	spread.ReasonNodeAffinity:       {names.NodeAffinity, ""},
	spread.ReasonMissingTopologyKey: {names.PodTopologySpread, podtopologyspread.ErrReasonNodeLabelNotMatch},
	spread.ReasonSkew:               {names.PodTopologySpread, podtopologyspread.ErrReasonConstraintsNotMatch},
}

// compareExcluded checks Result.Excluded: every node is either feasible or
// excluded, once, and the reason given is one the real plugin rejects the
// node for.
func compareExcluded(where string, out *schedulerOutcome, res *spread.Result) []string {
	if res.FeasibleNodes == nil && res.Excluded == nil {
		return nil
	}
	var diffs []string
	seen := map[string]bool{}
	for _, n := range res.FeasibleNodes {
		seen[n] = true
	}
	for _, e := range res.Excluded {
		if seen[e.Name] {
			diffs = append(diffs, fmt.Sprintf("%s: node %s is listed twice among feasible and excluded nodes", where, e.Name))
		}
		seen[e.Name] = true
		want, ok := reasonPlugin[e.Reason]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: node %s excluded for unknown reason %q", where, e.Name, e.Reason))
			continue
		}
		got, rejected := out.Rejections[e.Name][want.plugin]
		if e.Reason == spread.ReasonMissingTopologyKey {
			// PodTopologySpread reports the first constraint that fails,
			// which may be a skew before the missing key.
			_, has := out.Labels[e.Name][e.Detail]
			rejected = rejected && !has
			got = want.message
		}
		if !rejected || !strings.HasPrefix(got, want.message) {
			diffs = append(diffs, fmt.Sprintf("%s: node %s excluded because it %s (%s), but %s accepts it on that ground (plugins rejecting it: %v)",
				where, e.Name, e.Reason, e.Detail, want.plugin, out.Rejections[e.Name]))
		}
	}
	for n := range out.Rejections {
		if !seen[n] && !slices.Contains(out.Feasible, n) {
			diffs = append(diffs, fmt.Sprintf("%s: node %s is neither feasible nor excluded", where, n))
		}
	}
	return diffs
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
