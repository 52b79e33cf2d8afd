package spread_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

func mustRequirement(t testing.TB, key string, op selection.Operator, vals ...string) labels.Requirement {
	t.Helper()
	r, err := labels.NewRequirement(key, op, vals)
	if err != nil {
		t.Fatalf("NewRequirement(%q, %q, %q): %v", key, op, vals, err)
	}
	return *r
}

func TestSelectorToLabelSelector(t *testing.T) {
	tests := []struct {
		name    string
		sel     func(t *testing.T) labels.Selector
		want    *metav1.LabelSelector
		wantErr string
	}{
		{
			name: "labels.Nothing -> nil, the API's way to select nothing",
			sel:  func(*testing.T) labels.Selector { return labels.Nothing() },
			want: nil,
		},
		{
			name: "empty selector -> empty LabelSelector, which selects everything",
			sel:  func(*testing.T) labels.Selector { return labels.Everything() },
			want: &metav1.LabelSelector{},
		},
		{
			name: "equalities -> matchLabels",
			sel: func(*testing.T) labels.Selector {
				return labels.SelectorFromSet(labels.Set{"app": "a", "tier": "web"})
			},
			want: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a", "tier": "web"}},
		},
		{
			name: "second equality on a key -> matchExpressions In [v], so conflicting values still select nothing",
			sel: func(t *testing.T) labels.Selector {
				return labels.NewSelector().Add(mustRequirement(t, "app", selection.Equals, "a"), mustRequirement(t, "app", selection.DoubleEquals, "b"))
			},
			want: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"app": "a"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}},
			},
		},
		{
			name: "set-based requirements and != -> matchExpressions with sorted values",
			sel: func(t *testing.T) labels.Selector {
				return labels.NewSelector().Add(
					mustRequirement(t, "a", selection.In, "z", "x"),
					mustRequirement(t, "b", selection.NotIn, "y"),
					mustRequirement(t, "c", selection.NotEquals, "w"),
					mustRequirement(t, "d", selection.Exists),
					mustRequirement(t, "e", selection.DoesNotExist),
				)
			},
			want: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "z"}},
				{Key: "b", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"y"}},
				{Key: "c", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"w"}},
				{Key: "d", Operator: metav1.LabelSelectorOpExists},
				{Key: "e", Operator: metav1.LabelSelectorOpDoesNotExist},
			}},
		},
		{
			name: "Gt -> error naming the requirement",
			sel: func(t *testing.T) labels.Selector {
				return labels.NewSelector().Add(mustRequirement(t, "app", selection.Equals, "a"), mustRequirement(t, "gen", selection.GreaterThan, "3"))
			},
			wantErr: `requirement "gen>3"`,
		},
		{
			name: "Lt -> error naming the requirement",
			sel: func(t *testing.T) labels.Selector {
				return labels.NewSelector().Add(mustRequirement(t, "gen", selection.LessThan, "7"))
			},
			wantErr: `requirement "gen<7"`,
		},
		{
			name: "value the API refuses (from an unvalidated set) -> error",
			sel: func(*testing.T) labels.Selector {
				return labels.SelectorFromSet(labels.Set{"app": "not a valid value"})
			},
			wantErr: "not a valid value",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := spread.SelectorToLabelSelector(tc.sel(t))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SelectorToLabelSelector() error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SelectorToLabelSelector() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SelectorToLabelSelector() (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := spread.SelectorToLabelSelector(nil); err == nil {
		t.Error("SelectorToLabelSelector(nil) returned no error")
	}
}

// labelUniverse is every label set over keys, each key absent or set to one
// of vals: small enough to compare two selectors exhaustively.
func labelUniverse(keys, vals []string) []labels.Set {
	out := []labels.Set{{}}
	for _, k := range keys {
		var next []labels.Set
		for _, s := range out {
			next = append(next, s)
			for _, v := range vals {
				c := labels.Set{}
				for kk, vv := range s {
					c[kk] = vv
				}
				c[k] = v
				next = append(next, c)
			}
		}
		out = next
	}
	return out
}

// assertSameSelection fails unless want and the round trip of got through
// metav1.LabelSelectorAsSelector agree on every label set in universe.
func assertSameSelection(t testing.TB, want labels.Selector, got *metav1.LabelSelector, universe []labels.Set) {
	t.Helper()
	back, err := metav1.LabelSelectorAsSelector(got)
	if err != nil {
		t.Fatalf("LabelSelectorAsSelector(%v) error = %v", got, err)
	}
	for _, ls := range universe {
		if w, g := want.Matches(ls), back.Matches(ls); w != g {
			t.Fatalf("selector %q matches %v = %v, but its LabelSelector %v matches = %v", want.String(), ls, w, got, g)
		}
	}
}

func randomSelector(t testing.TB, rng *rand.Rand, keys, vals []string) labels.Selector {
	switch rng.IntN(20) {
	case 0:
		return labels.Nothing()
	case 1:
		return labels.Everything()
	}
	ops := []selection.Operator{selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn, selection.Exists, selection.DoesNotExist}
	sel := labels.NewSelector()
	for range rng.IntN(5) {
		// Keys repeat often on purpose: duplicate keys with conflicting
		// values are where a conversion can lose meaning.
		key := keys[rng.IntN(len(keys))]
		op := ops[rng.IntN(len(ops))]
		var vs []string
		switch op {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals:
			vs = []string{vals[rng.IntN(len(vals))]}
		case selection.In, selection.NotIn:
			for range 1 + rng.IntN(3) {
				vs = append(vs, vals[rng.IntN(len(vals))])
			}
		}
		sel = sel.Add(mustRequirement(t, key, op, vs...))
	}
	return sel
}

func TestSelectorToLabelSelectorSelectsTheSameLabelSets(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	keys, vals := []string{"a", "b", "c"}, []string{"", "x", "y"}
	universe := labelUniverse(keys, vals)
	for i := range 3000 {
		sel := randomSelector(t, rng, keys, vals)
		got, err := spread.SelectorToLabelSelector(sel)
		if err != nil {
			t.Fatalf("seed %d, selector %d %q: error = %v", seed, i, sel.String(), err)
		}
		assertSameSelection(t, sel, got, universe)
	}
}

// FuzzSelectorToLabelSelector parses arbitrary selector strings: the
// conversion either fails (Gt, Lt) or selects exactly what the parsed
// selector selects.
func FuzzSelectorToLabelSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "a=b,a=c", "a in (x,y),a notin (y)", "!a,b", "a!=b,a", "x>3", "a==b,b in (c,d),!e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := labels.Parse(s)
		if err != nil {
			return
		}
		reqs, _ := sel.Requirements()
		hasOrder := false
		keySet, valSet := map[string]bool{}, map[string]bool{"other-value": true}
		for _, r := range reqs {
			keySet[r.Key()] = true
			for _, v := range r.ValuesUnsorted() {
				valSet[v] = true
			}
			if r.Operator() == selection.GreaterThan || r.Operator() == selection.LessThan {
				hasOrder = true
			}
		}
		got, err := spread.SelectorToLabelSelector(sel)
		if hasOrder {
			if err == nil {
				t.Fatalf("selector %q has Gt/Lt but converted without error to %v", s, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("selector %q: error = %v", s, err)
		}
		var keys, vals []string
		for k := range keySet {
			keys = append(keys, k)
		}
		for v := range valSet {
			vals = append(vals, v)
		}
		if len(keys) > 4 || len(vals) > 4 {
			// Too many for an exhaustive check: sample instead.
			h := fnv.New64a()
			fmt.Fprint(h, s)
			rng := rand.New(rand.NewPCG(h.Sum64(), 1))
			var sample []labels.Set
			for range 2000 {
				ls := labels.Set{}
				for _, k := range keys {
					if rng.IntN(3) > 0 {
						ls[k] = vals[rng.IntN(len(vals))]
					}
				}
				sample = append(sample, ls)
			}
			assertSameSelection(t, sel, got, sample)
			return
		}
		assertSameSelection(t, sel, got, labelUniverse(keys, vals))
	})
}
