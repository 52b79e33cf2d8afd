package e2e

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Built without the e2e tag too, so that `go test ./...` in test/e2e runs
// it with no cluster.
func TestSanitize(t *testing.T) {
	t.Parallel()
	long := "TestE2E/one_of_two_webhook_replicas_killed,_then_one_stopped,_under_20_creates/s/" +
		"killed_with_SIGKILL,_as_a_crash_->_none_fails,_none_misses_the_webhook_beyond_the_creates_in_flight_at_the_kill"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "a short name keeps its safe characters and the rest become one underscore", in: "TestE2E/a StatefulSet, 9/3", want: "TestE2E_a_StatefulSet_9_3"},
		{name: "unsafe characters at either end are trimmed", in: "/x y/", want: "x_y"},
		{name: "a name of exactly the limit is kept whole", in: strings.Repeat("a", maxArtifactName), want: strings.Repeat("a", maxArtifactName)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, sanitize(tc.in)); diff != "" {
				t.Errorf("sanitize(%q) (-want,+got):\n%s", tc.in, diff)
			}
		})
	}

	t.Run("a long name is cut to the limit, safe, and told apart from another with the same start by its hash", func(t *testing.T) {
		t.Parallel()
		a, b := sanitize(long), sanitize(long+"_2")
		for _, got := range []string{a, b} {
			if len(got) > maxArtifactName {
				t.Errorf("sanitize gave %d bytes, want at most %d: %q", len(got), maxArtifactName, got)
			}
			if unsafeChars.MatchString(got) {
				t.Errorf("sanitize gave %q, which holds characters a file name should not", got)
			}
			if !strings.HasPrefix(got, "TestE2E_one_of_two_webhook_replicas_killed") {
				t.Errorf("sanitize gave %q, want the start of the test's name kept", got)
			}
		}
		if a == b {
			t.Errorf("two long names with the same start both became %q", a)
		}
		if again := sanitize(long); again != a {
			t.Errorf("sanitize is not stable: %q then %q", a, again)
		}
	})
}
