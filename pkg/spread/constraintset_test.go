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
// constraints users write (the index property test's) and holds the two
// properties the index relies on: a set decodes back to its list, and two
// sets are one exactly when their lists are equal.
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
	}
}
