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

// TestFilterParity generates random clusters, node templates and pods and
// requires that spreadguard's feasible nodes, feasible and excluded
// templates, verdict and per-constraint counting equal what the real
// kube-scheduler plugins compute, for the plain Snapshot, the Index built
// from it and the Index built from a stream of informer events.
func TestFilterParity(t *testing.T) {
	t.Parallel()
	sched := newScheduler(t, nil)
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay with -parity.seed=%d)", seed, seed)
			var failures []failure
			var stats filterStats
			indexes := caseIndexes(t)
			for _, i := range indexes {
				c := newGen(seed, i).clusterCase()
				out, verdict, diffs, err := compareFilter(t.Context(), sched, c, newGen(seed^eventStream, i))
				if err != nil {
					t.Fatalf("case %d: the scheduler failed: %v\n%s", i, err, formatCase(c))
				}
				stats.add(c, out, verdict)
				if len(diffs) > 0 {
					failures = append(failures, failure{index: i, size: len(c.Nodes) + len(c.Pods) + len(c.Templates), text: formatCase(c), diffs: diffs})
				}
			}
			report(t, "TestFilterParity", seed, len(indexes), failures)
			t.Logf("%d cases, %s", len(indexes), &stats)
			// A generator that never reaches a verdict, or seldom draws
			// templates, would make its agreement meaningless.
			if len(indexes) >= 500 {
				for _, v := range []spread.Verdict{spread.VerdictNoHardConstraints, spread.VerdictFeasible, spread.VerdictFeasibleOnNewNode, spread.VerdictUnsatisfiable, spread.VerdictNoCandidateNodes} {
					if stats.verdicts[v] < len(indexes)/100 {
						t.Errorf("only %d of %d cases reached verdict %s; the generator no longer covers it", stats.verdicts[v], len(indexes), v)
					}
				}
				if stats.withTemplates*3 < len(indexes) {
					t.Errorf("only %d of %d cases have templates, want at least a third", stats.withTemplates, len(indexes))
				}
				if z := stats.zoneless; z.cases*20 < len(indexes) || z.feasible == 0 || z.feasible == z.templates {
					t.Errorf("only %d of %d cases have templates of a NodePool that leaves the zone open (%d templates, %d feasible), want at least a twentieth, some feasible and some not",
						z.cases, len(indexes), z.templates, z.feasible)
				}
			}
		})
	}
}

// filterStats tells how much of the ground the generated cases covered.
type filterStats struct {
	verdicts      map[spread.Verdict]int
	withTemplates int
	// templates counts the templates that count (the last of each name)
	// by the scheduler's outcome on their fresh node.
	templates struct{ feasible, candidate, rejected int }
	// zoneless counts the cases with templates of a NodePool that leaves
	// the zone open, those templates, and the feasible ones.
	zoneless struct{ cases, templates, feasible int }
}

func (s *filterStats) add(c *clusterCase, out *schedulerOutcome, verdict spread.Verdict) {
	if s.verdicts == nil {
		s.verdicts = map[spread.Verdict]int{}
	}
	s.verdicts[verdict]++
	if len(c.Templates) > 0 {
		s.withTemplates++
	}
	zoneless := 0
	for _, t := range out.Templates {
		switch {
		case t.Feasible:
			s.templates.feasible++
		case t.Candidate:
			s.templates.candidate++
		default:
			s.templates.rejected++
		}
		if strings.HasPrefix(t.Name, zonelessPoolPrefix) {
			zoneless++
			s.zoneless.templates++
			if t.Feasible {
				s.zoneless.feasible++
			}
		}
	}
	if zoneless > 0 {
		s.zoneless.cases++
	}
}

func (s *filterStats) String() string {
	total := 0
	for _, n := range s.verdicts {
		total += n
	}
	ts := s.templates
	return fmt.Sprintf("%d (%.1f%%) with templates; %d templates: %d feasible, %d passing affinity, taints and cordons only, %d not; "+
		"%d cases with a NodePool that leaves the zone open: %d templates, %d feasible; verdicts %v",
		s.withTemplates, 100*float64(s.withTemplates)/float64(max(total, 1)), ts.feasible+ts.candidate+ts.rejected, ts.feasible, ts.candidate, ts.rejected,
		s.zoneless.cases, s.zoneless.templates, s.zoneless.feasible, s.verdicts)
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
// "Validation, exactly" and "Autoscalers: node templates").
func expectedVerdict(pod *v1.Pod, out *schedulerOutcome) spread.Verdict {
	switch {
	case len(hardConstraints(pod)) == 0:
		return spread.VerdictNoHardConstraints
	case len(out.Feasible) > 0:
		return spread.VerdictFeasible
	case slices.ContainsFunc(out.Templates, func(t templateOutcome) bool { return t.Feasible }):
		return spread.VerdictFeasibleOnNewNode
	case len(out.Candidates) > 0 || slices.ContainsFunc(out.Templates, func(t templateOutcome) bool { return t.Candidate }):
		return spread.VerdictUnsatisfiable
	}
	return spread.VerdictNoCandidateNodes
}

// compareFilter runs one case through the scheduler and every spreadguard
// checker and returns the scheduler's outcome, the expected verdict and
// every difference found.
func compareFilter(ctx context.Context, sched *scheduler, c *clusterCase, events *gen) (*schedulerOutcome, spread.Verdict, []string, error) {
	stored := storedPod(c.Pod)
	out, err := sched.decide(ctx, c, stored)
	if err != nil {
		return nil, "", nil, err
	}
	// The webhook sees the pod as stored; the kubectl plugin may be given
	// the pod as written. Both must give the scheduler's answer.
	variants := []podVariant{{"as stored", stored}}
	if hasMatchLabelKeys(c.Pod) {
		variants = append(variants, podVariant{"as written", c.Pod})
	}
	want := expectedVerdict(stored, out)
	return out, want, compareCheckers(c, out, stored, want, variants, events), nil
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
	before := &clusterCase{Nodes: deepCopyNodes(c.Nodes), Pods: deepCopyPods(c.Pods), Templates: deepCopyTemplates(c.Templates), Pod: c.Pod.DeepCopy()}
	snap := spread.Snapshot{Nodes: c.Nodes, Pods: c.Pods, Templates: c.Templates}
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
	diffs = append(diffs, compareTemplates(where, pod, out, want, res, true)...)
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
	diffs = append(diffs, compareTemplates(where, pod, out, want, res, false)...)
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
		if d := wrongReason(e, out.Rejections[e.Name], out.Labels[e.Name]); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s: node %s %s", where, e.Name, d))
		}
	}
	for n := range out.Rejections {
		if !seen[n] && !slices.Contains(out.Feasible, n) {
			diffs = append(diffs, fmt.Sprintf("%s: node %s is neither feasible nor excluded", where, n))
		}
	}
	return diffs
}

// wrongReason returns why e's reason is not one the real plugins reject the
// node for, alone, given the plugins' rejections of it and its labels; ""
// when it is.
func wrongReason(e spread.ExcludedNode, rejections map[string]string, labels map[string]string) string {
	want, ok := reasonPlugin[e.Reason]
	if !ok {
		return fmt.Sprintf("excluded for unknown reason %q", e.Reason)
	}
	got, rejected := rejections[want.plugin]
	if e.Reason == spread.ReasonMissingTopologyKey {
		// PodTopologySpread reports the first constraint that fails,
		// which may be a skew before the missing key.
		_, has := labels[e.Detail]
		rejected = rejected && !has
		got = want.message
	}
	if !rejected || !strings.HasPrefix(got, want.message) {
		return fmt.Sprintf("excluded because it %s (%s), but %s accepts it on that ground (plugins rejecting it: %v)", e.Reason, e.Detail, want.plugin, rejections)
	}
	return ""
}

// compareTemplates compares FeasibleTemplates and ExcludedTemplates with
// the scheduler's outcome on each template's fresh node. With Explain both
// are filled; without, FeasibleTemplates is filled for FeasibleOnNewNode.
// Without hard constraints spreadguard need not check templates. Whatever
// is reported must be right.
func compareTemplates(where string, pod *v1.Pod, out *schedulerOutcome, want spread.Verdict, res *spread.Result, explain bool) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, where+": "+fmt.Sprintf(format, args...)) }
	hard := len(hardConstraints(pod)) > 0
	var feasible, excluded []string
	byName := map[string]templateOutcome{}
	for _, t := range out.Templates {
		byName[t.Name] = t
		if t.Feasible {
			feasible = append(feasible, t.Name)
		} else {
			excluded = append(excluded, t.Name)
		}
	}
	if (hard && (explain || want == spread.VerdictFeasibleOnNewNode)) || res.FeasibleTemplates != nil {
		if d := cmp.Diff(feasible, res.FeasibleTemplates, cmpopts.EquateEmpty()); d != "" {
			add("feasible templates differ from the scheduler's (-scheduler +spreadguard):\n%s", d)
		}
	}
	if (hard && explain) || res.ExcludedTemplates != nil {
		var names []string
		for _, e := range res.ExcludedTemplates {
			names = append(names, e.Name)
			t, ok := byName[e.Name]
			if !ok {
				add("excluded template %s is not a template of the case", e.Name)
				continue
			}
			if d := wrongReason(e, t.Rejections, t.Labels); d != "" {
				add("the fresh node of template %s %s", e.Name, d)
			}
		}
		slices.Sort(names)
		if d := cmp.Diff(excluded, names, cmpopts.EquateEmpty()); d != "" {
			add("excluded templates differ from those the scheduler rejects (-scheduler +spreadguard):\n%s", d)
		}
	}
	if res.Verdict == spread.VerdictFeasibleOnNewNode && want == spread.VerdictFeasibleOnNewNode && !namesFeasibleTemplate(res.Message, out.Templates) {
		add("the message %q names no feasible template (feasible: %v)", res.Message, feasible)
	}
	return diffs
}

// namesFeasibleTemplate reports whether message names a template whose
// fresh node is feasible, by its Source or, without one, its name.
func namesFeasibleTemplate(message string, ts []templateOutcome) bool {
	return slices.ContainsFunc(ts, func(t templateOutcome) bool {
		name := t.Source
		if name == "" {
			name = t.Name
		}
		return t.Feasible && strings.Contains(message, name)
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
