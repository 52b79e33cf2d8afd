package spread_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

func TestLabelSetRoundTrips(t *testing.T) {
	long := strings.Repeat("v", 300) // a length that takes two varint bytes
	many := map[string]string{}
	for _, k := range strings.Split("a b c d e f g h i j k l m n o p q r s t", " ") {
		many[k] = strings.Repeat(k, 40)
	}
	tests := []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{name: "no labels -> none", in: nil, want: nil},
		{name: "empty map -> none", in: map[string]string{}, want: nil},
		{name: "one label -> the same", in: map[string]string{"app": "web"}, want: map[string]string{"app": "web"}},
		{name: "empty value -> kept empty", in: map[string]string{"canary": ""}, want: map[string]string{"canary": ""}},
		{
			name: "prefixed keys, a 300-byte value, bytes a label cannot hold -> the same",
			in:   map[string]string{"app.kubernetes.io/name": long, "k\x00=": "v,\xff", "z": "1"},
			want: map[string]string{"app.kubernetes.io/name": long, "k\x00=": "v,\xff", "z": "1"},
		},
		{name: "20 labels of 800 bytes, more than the stack buffers hold -> the same", in: many, want: many},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, spread.LabelSetOf(tt.in).Map()); diff != "" {
				t.Errorf("labels of the set (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLabelSetOfAnInternedSetAllocatesNothing(t *testing.T) {
	ls := map[string]string{
		"app": "svc-00042", "app.kubernetes.io/name": "svc-00042", "app.kubernetes.io/part-of": "product-02",
		"app.kubernetes.io/managed-by": "argocd", "team": "t2", "version": "v1.8.3", "pod-template-hash": "7c9d5b8f4q",
	}
	held := spread.LabelSetOf(ls)
	if got := testing.AllocsPerRun(100, func() { _ = spread.LabelSetOf(ls) }); got != 0 {
		t.Errorf("LabelSetOf of a Deployment's 7 labels, already interned: %v allocations, want 0", got)
	}
	if spread.LabelSetOf(ls) != held {
		t.Error("LabelSetOf of one set twice gives two LabelSets")
	}
}

// FuzzLabelSet checks the two properties the index and the pod cache rely
// on: a set decodes back to itself, and two sets are one LabelSet exactly
// when they are equal.
func FuzzLabelSet(f *testing.F) {
	f.Add("app=web,tier=fe", "tier=fe,app=web")
	f.Add("a=,b=1", "a=1,b=")
	f.Add("a=b=c", "a=b,=c")
	f.Add("", "=")
	f.Fuzz(func(t *testing.T, x, y string) {
		a, b := parsePairs(x), parsePairs(y)
		sa, sb := spread.LabelSetOf(a), spread.LabelSetOf(b)
		if got := sa.Map(); !maps.Equal(got, a) {
			t.Fatalf("LabelSetOf(%q).Map() = %q", a, got)
		}
		if (sa == sb) != maps.Equal(a, b) {
			t.Fatalf("sets %q and %q: LabelSets equal = %v, sets equal = %v", a, b, sa == sb, maps.Equal(a, b))
		}
	})
}

// parsePairs reads "k=v,k=v" loosely: any string gives some label set.
func parsePairs(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(pair, "=")
		m[k] = v
	}
	return m
}
