package fallback

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWorkload(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const hysteresis = 2 * time.Minute

	type step struct {
		start    string // a domain to start, or
		observe  string // a domain observed, with
		capacity bool
		at       time.Duration
		want     string // Start's outcome, or "ended"/"" for Observe
	}
	for _, tc := range []struct {
		name       string
		maxDomains int
		steps      []step
		wantActive []string
	}{
		{
			name:       "one full zone starts, a second waits at maxDomains 1",
			maxDomains: 1,
			steps: []step{
				{start: "zone-c", want: Started},
				{start: "zone-b", at: time.Minute, want: AtMaxDomains},
				{start: "zone-c", at: 2 * time.Minute, want: AlreadyActive},
			},
			wantActive: []string{"zone-c"},
		},
		{
			name:       "two full zones with maxDomains 2 both fall back",
			maxDomains: 2,
			steps: []step{
				{start: "zone-c", want: Started},
				{start: "zone-a", want: Started},
				{start: "zone-b", want: AtMaxDomains},
			},
			wantActive: []string{"zone-a", "zone-c"},
		},
		{
			name:       "capacity back for the whole hysteresis ends the fallback",
			maxDomains: 1,
			steps: []step{
				{start: "zone-c", want: Started},
				{observe: "zone-c", capacity: true, at: 5 * time.Minute},
				{observe: "zone-c", capacity: true, at: 6 * time.Minute},
				{observe: "zone-c", capacity: true, at: 7 * time.Minute, want: "ended"},
			},
		},
		{
			name:       "capacity that flaps restarts the hysteresis",
			maxDomains: 1,
			steps: []step{
				{start: "zone-c", want: Started},
				{observe: "zone-c", capacity: true, at: 5 * time.Minute},
				{observe: "zone-c", capacity: false, at: 6 * time.Minute},
				{observe: "zone-c", capacity: true, at: 6*time.Minute + 30*time.Second},
				{observe: "zone-c", capacity: true, at: 8 * time.Minute},
			},
			wantActive: []string{"zone-c"},
		},
		{
			name:       "a replica stranded again during the hysteresis restarts it",
			maxDomains: 1,
			steps: []step{
				{start: "zone-c", want: Started},
				{observe: "zone-c", capacity: true, at: 5 * time.Minute},
				{start: "zone-c", at: 6 * time.Minute, want: AlreadyActive},
				{observe: "zone-c", capacity: true, at: 7 * time.Minute},
			},
			wantActive: []string{"zone-c"},
		},
		{
			name:       "a domain that ended frees the place for another",
			maxDomains: 1,
			steps: []step{
				{start: "zone-c", want: Started},
				{observe: "zone-c", capacity: true, at: time.Minute},
				{observe: "zone-c", capacity: true, at: 3 * time.Minute, want: "ended"},
				{start: "zone-b", at: 4 * time.Minute, want: Started},
			},
			wantActive: []string{"zone-b"},
		},
		{
			name:       "observing a domain not in fallback does nothing",
			maxDomains: 1,
			steps:      []step{{observe: "zone-a", capacity: true, at: time.Hour}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Workload
			for i, s := range tc.steps {
				var got string
				if s.start != "" {
					got = w.Start(s.start, at(s.at), tc.maxDomains)
				} else if w.Observe(s.observe, s.capacity, at(s.at), hysteresis) {
					got = "ended"
				}
				if got != s.want {
					t.Errorf("step %d: %q, want %q", i, got, s.want)
				}
			}
			if diff := cmp.Diff(tc.wantActive, w.Values(), cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("domains in fallback (-want,+got):\n%s", diff)
			}
			if w.Active() != (len(tc.wantActive) > 0) {
				t.Errorf("Active() = %v with %v in fallback", w.Active(), w.Values())
			}
		})
	}
}
