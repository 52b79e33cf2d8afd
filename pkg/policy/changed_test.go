package policy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spreadguard/spreadguard/pkg/policy"
	pt "github.com/spreadguard/spreadguard/pkg/policy/policytest"
)

func TestSpecChanged(t *testing.T) {
	type result struct{ Changed, IsPolicy bool }
	cases := []struct {
		name     string
		old, cur any
		want     result
	}{
		{"a SpreadPolicy whose status was written keeps its generation -> unchanged",
			pt.MakeSpreadPolicy().Name("p").Generation(3).Obj(), pt.MakeSpreadPolicy().Name("p").Generation(3).Label("k", "v").Obj(),
			result{Changed: false, IsPolicy: true}},
		{"a SpreadPolicy whose spec was edited moves to generation 4 -> changed",
			pt.MakeSpreadPolicy().Name("p").Generation(3).Obj(), pt.MakeSpreadPolicy().Name("p").Generation(4).Obj(),
			result{Changed: true, IsPolicy: true}},
		{"a ClusterSpreadPolicy at the same generation -> unchanged",
			pt.MakeClusterSpreadPolicy().Name("c").Generation(2).Obj(), pt.MakeClusterSpreadPolicy().Name("c").Generation(2).Obj(),
			result{Changed: false, IsPolicy: true}},
		{"a ClusterSpreadPolicy moved to generation 3 -> changed",
			pt.MakeClusterSpreadPolicy().Name("c").Generation(2).Obj(), pt.MakeClusterSpreadPolicy().Name("c").Generation(3).Obj(),
			result{Changed: true, IsPolicy: true}},
		{"a SpreadPolicy followed by an object of another kind -> changed",
			pt.MakeSpreadPolicy().Name("p").Generation(1).Obj(), pt.MakeClusterSpreadPolicy().Name("p").Generation(1).Obj(),
			result{Changed: true, IsPolicy: true}},
		{"a namespace is no policy -> left to the caller",
			pt.MakeNamespace("shop").Obj(), pt.MakeNamespace("shop").Label("team", "a").Obj(),
			result{Changed: false, IsPolicy: false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got result
			got.Changed, got.IsPolicy = policy.SpecChanged(tc.old, tc.cur)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SpecChanged (-want +got):\n%s", diff)
			}
		})
	}
}
