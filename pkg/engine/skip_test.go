package engine

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// metricLabel is what a Prometheus label value of a closed set looks like
// here: lower case words joined by underscores.
var metricLabel = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

func TestEverySkipReasonHasOneLabelAndOneMessage(t *testing.T) {
	labels, messages := map[string]SkipReason{}, map[string]SkipReason{}
	for r := NotSkipped + 1; r < skipReasonCount; r++ {
		label, message := r.Label(), r.String()
		if !metricLabel.MatchString(label) {
			t.Errorf("reason %d: label %q is not a metric label", r, label)
		}
		if message == "" {
			t.Errorf("reason %d (%s): no message", r, label)
		}
		if other, ok := labels[label]; ok {
			t.Errorf("reasons %d and %d share the label %q", other, r, label)
		}
		if other, ok := messages[message]; ok {
			t.Errorf("reasons %d and %d share the message %q", other, r, message)
		}
		labels[label], messages[message] = r, r
	}
	if NotSkipped.Label() != "" || NotSkipped.String() != "" {
		t.Errorf("NotSkipped = label %q, message %q; want neither", NotSkipped.Label(), NotSkipped.String())
	}
	// The labels are what dashboards and alerts select on: a change of one
	// is a change of the metric's contract.
	want := []string{"excluded_namespace", "annotation", "own_constraints", "up_to_date", "no_policy", "no_selector",
		"bound", "other_scheduler", "gated", "daemonset", "mirror", "pinned_node"}
	var got []string
	for _, r := range SkipReasons() {
		got = append(got, r.Label())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SkipReasons() labels (-want +got):\n%s", diff)
	}
}
