package spread

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// labelSyntaxSeeds are keys and values people write, and the near misses.
var labelSyntaxSeeds = []string{
	"", "a", "A", "0", "-", "_", ".", "/", "a/", "/a", "a/b/c",
	"app", "app.kubernetes.io/name", "pod-template-hash", "topology.kubernetes.io/zone",
	"kubernetes.io/hostname", "Example.com/key", "example.com/Key", "example..com/key", "-example.com/key",
	"example-.com/key", "example.com-/key", "ex_ample.com/key", "my_value", "my.value", "value-", "_value",
	"7d9f8c6b5", "1.42.0", "web_01", "ünicode", "tab\there", "new\nline", "trailing\n", " space",
	strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253) + "/k",
	strings.Repeat("a", 254) + "/k", strings.Repeat("a.", 126) + "a/k", "k/" + strings.Repeat("b", 64),
}

func TestLabelSyntaxMatchesApimachinery(t *testing.T) {
	for _, s := range labelSyntaxSeeds {
		checkLabelSyntax(t, s)
	}
}

func FuzzLabelSyntax(f *testing.F) {
	for _, s := range labelSyntaxSeeds {
		f.Add(s)
	}
	f.Fuzz(checkLabelSyntax)
}

// checkLabelSyntax holds the regular-expression-free checks equal to
// apimachinery's, labelSelectorValid to LabelSelectorAsSelector's verdict
// wherever it says yes, and parseLabelSelector to LabelSelectorAsSelector.
func checkLabelSyntax(t *testing.T, s string) {
	t.Helper()
	if got, want := labelKeyValid(s), len(content.IsLabelKey(s)) == 0; got != want {
		t.Errorf("labelKeyValid(%q) = %v, apimachinery says %v: %q", s, got, want, content.IsLabelKey(s))
	}
	if got, want := labelValueValid(s), len(validation.IsValidLabelValue(s)) == 0; got != want {
		t.Errorf("labelValueValid(%q) = %v, apimachinery says %v: %q", s, got, want, validation.IsValidLabelValue(s))
	}
	for _, sel := range []*metav1.LabelSelector{
		{MatchLabels: map[string]string{s: "v"}},
		{MatchLabels: map[string]string{"app": s}},
		{MatchLabels: map[string]string{"app": "web", "pod-template-hash": s, s: "v"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: s, Operator: metav1.LabelSelectorOpExists}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a", s}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist, Values: []string{s}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOperator(s), Values: []string{"a"}}}},
	} {
		want, err := metav1.LabelSelectorAsSelector(sel)
		if got := labelSelectorValid(sel); got != (err == nil) {
			t.Errorf("labelSelectorValid(%v) = %v, LabelSelectorAsSelector says %v", sel, got, err)
		}
		got, gotErr := parseLabelSelector(sel)
		if (gotErr == nil) != (err == nil) || err == nil && got.String() != want.String() {
			t.Errorf("parseLabelSelector(%v) = %v, %v; LabelSelectorAsSelector says %v, %v", sel, got, gotErr, want, err)
		}
	}
}
