package spread_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestConstraintSetRoundTrips(t *testing.T) {
	long := strings.Repeat("v", 300) // a length that takes two varint bytes
	many := st.Constraint(1, v1.LabelTopologyZone)
	for _, k := range strings.Split("a b c d e f g h i j k l m n o p q r s t", " ") {
		many.MatchLabel(k, strings.Repeat(k, 60))
	}
	tests := []struct {
		name string
		in   []v1.TopologySpreadConstraint
	}{
		{name: "no constraint"},
		{name: "the zone constraint the webhook injects", in: []v1.TopologySpreadConstraint{
			st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MatchLabel("pod-template-hash", "7d9f").
				NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()}},
		{name: "every field set, a set-based selector, minDomains and matchLabelKeys", in: []v1.TopologySpreadConstraint{
			st.Constraint(2, "rack").ScheduleAnyway().MatchExpression("tier", metav1.LabelSelectorOpIn, "web", "").
				MatchExpression("canary", metav1.LabelSelectorOpDoesNotExist).MinDomains(3).
				NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore).NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).
				MatchLabelKeys("pod-template-hash", "version").Obj(),
			st.Constraint(1, v1.LabelHostname).MatchLabel("app", long).Obj()}},
		{name: "an empty selector, and none", in: []v1.TopologySpreadConstraint{
			st.Constraint(1, v1.LabelTopologyZone).Selector(&metav1.LabelSelector{}).Obj(),
			st.Constraint(1, v1.LabelHostname).Obj()}},
		{name: "a value the API server stopped accepting, and maxSkew 0 stored past validation", in: []v1.TopologySpreadConstraint{
			st.Constraint(0, v1.LabelTopologyZone).MatchExpression("tier", metav1.LabelSelectorOpIn, "front end").Obj()}},
		{name: "20 matchLabels of 1,200 bytes, more than the stack buffers hold", in: []v1.TopologySpreadConstraint{many.Obj()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.in, spread.ConstraintSetOf(tt.in).Constraints(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("constraints of the set (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConstraintSetOfAnInternedSetAllocatesNothing(t *testing.T) {
	cs := []v1.TopologySpreadConstraint{
		st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "svc-00042").MatchLabel("pod-template-hash", "7c9d5b8f4q").
			NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj(),
		st.Constraint(1, v1.LabelHostname).ScheduleAnyway().MatchLabel("app", "svc-00042").
			MatchLabel("pod-template-hash", "7c9d5b8f4q").Obj(),
	}
	held := spread.ConstraintSetOf(cs)
	if got := testing.AllocsPerRun(100, func() { _ = spread.ConstraintSetOf(cs) }); got != 0 {
		t.Errorf("ConstraintSetOf of a Deployment pod's two constraints, already interned: %v allocations, want 0", got)
	}
	if spread.ConstraintSetOf(cs) != held {
		t.Error("ConstraintSetOf of one list twice gives two ConstraintSets")
	}
}

// TestConstraintSetsAreEqualExactlyWhenTheConstraintsAre draws lists of the
// constraints users write (the index property test's) and holds the
// properties the index and the pod cache rely on: a set decodes back to
// its list, two sets are one exactly when their lists are equal, and a set
// matches exactly the lists it is the set of.
func TestConstraintSetsAreEqualExactlyWhenTheConstraintsAre(t *testing.T) {
	seed, rounds := randomRounds(t, 500, 100)
	w := newWorld(rngChooser{rand.New(rand.NewPCG(seed, 0))})
	draw := func() []v1.TopologySpreadConstraint {
		var cs []v1.TopologySpreadConstraint
		for range w.c.intn(3) {
			cs = append(cs, w.randomConstraint())
		}
		return cs
	}
	for range rounds {
		a, b := draw(), draw()
		sa, sb := spread.ConstraintSetOf(a), spread.ConstraintSetOf(b)
		if diff := cmp.Diff(a, sa.Constraints(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("seed %d: constraints of the set (-want +got):\n%s", seed, diff)
		}
		if equal := equality.Semantic.DeepEqual(sa.Constraints(), sb.Constraints()); (sa == sb) != equal {
			t.Fatalf("seed %d: lists %v and %v: sets equal = %v, lists equal = %v", seed, a, b, sa == sb, equal)
		}
		if !sa.Matches(a) || sa.Matches(b) != (sa == sb) {
			t.Fatalf("seed %d: lists %v and %v: the set of the first matches the first %v, the second %v; sets equal = %v",
				seed, a, b, sa.Matches(a), sa.Matches(b), sa == sb)
		}
	}
}

func TestConstraintSetMatchesOnlyItsOwnList(t *testing.T) {
	base := func() *st.ConstraintWrapper {
		return st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").MatchLabel("pod-template-hash", "h1").
			MatchExpression("tier", metav1.LabelSelectorOpIn, "fe", "be").MinDomains(2).
			NodeAffinityPolicy(v1.NodeInclusionPolicyHonor).NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).MatchLabelKeys("version")
	}
	set := spread.ConstraintSetOf([]v1.TopologySpreadConstraint{base().Obj()})
	variant := func(edit func(c *v1.TopologySpreadConstraint)) []v1.TopologySpreadConstraint {
		c := base().Obj()
		edit(&c)
		return []v1.TopologySpreadConstraint{c}
	}
	ignore := v1.NodeInclusionPolicyIgnore
	three := int32(3)
	tests := []struct {
		name string
		cs   []v1.TopologySpreadConstraint
		want bool
	}{
		{"the same list, its matchLabels built in another order -> matches", variant(func(c *v1.TopologySpreadConstraint) {
			c.LabelSelector.MatchLabels = map[string]string{"pod-template-hash": "h1", "app": "web"}
		}), true},
		{"no constraint -> no", nil, false},
		{"the constraint twice -> no", append(variant(func(*v1.TopologySpreadConstraint) {}), base().Obj()), false},
		{"maxSkew 2 -> no", variant(func(c *v1.TopologySpreadConstraint) { c.MaxSkew = 2 }), false},
		{"another key -> no", variant(func(c *v1.TopologySpreadConstraint) { c.TopologyKey = v1.LabelHostname }), false},
		{"ScheduleAnyway -> no", variant(func(c *v1.TopologySpreadConstraint) { c.WhenUnsatisfiable = v1.ScheduleAnyway }), false},
		{"no selector -> no", variant(func(c *v1.TopologySpreadConstraint) { c.LabelSelector = nil }), false},
		{"another matchLabels value -> no", variant(func(c *v1.TopologySpreadConstraint) { c.LabelSelector.MatchLabels["app"] = "api" }), false},
		{"one more matchLabels key -> no", variant(func(c *v1.TopologySpreadConstraint) { c.LabelSelector.MatchLabels["canary"] = "" }), false},
		{"a matchLabels key renamed -> no", variant(func(c *v1.TopologySpreadConstraint) {
			c.LabelSelector.MatchLabels = map[string]string{"app": "web", "pod-template-hash2": "h1"}
		}), false},
		{"expression values in another order -> no", variant(func(c *v1.TopologySpreadConstraint) {
			c.LabelSelector.MatchExpressions[0].Values = []string{"be", "fe"}
		}), false},
		{"NotIn instead of In -> no", variant(func(c *v1.TopologySpreadConstraint) {
			c.LabelSelector.MatchExpressions[0].Operator = metav1.LabelSelectorOpNotIn
		}), false},
		{"minDomains 3 -> no", variant(func(c *v1.TopologySpreadConstraint) { c.MinDomains = &three }), false},
		{"minDomains unset -> no", variant(func(c *v1.TopologySpreadConstraint) { c.MinDomains = nil }), false},
		{"nodeAffinityPolicy Ignore -> no", variant(func(c *v1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &ignore }), false},
		{"nodeTaintsPolicy Ignore -> no", variant(func(c *v1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &ignore }), false},
		{"nodeTaintsPolicy unset -> no", variant(func(c *v1.TopologySpreadConstraint) { c.NodeTaintsPolicy = nil }), false},
		{"matchLabelKeys of another key -> no", variant(func(c *v1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"release"} }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := set.Matches(tt.cs); got != tt.want {
				t.Errorf("Matches() = %v, want %v", got, tt.want)
			}
			if got := spread.ConstraintSetOf(tt.cs) == set; got != tt.want {
				t.Errorf("ConstraintSetOf() == the set: %v, want %v", got, tt.want)
			}
		})
	}
	if !(spread.ConstraintSet{}).Matches(nil) || (spread.ConstraintSet{}).Matches([]v1.TopologySpreadConstraint{base().Obj()}) {
		t.Error("the zero set must match no constraint, and only that")
	}
}
