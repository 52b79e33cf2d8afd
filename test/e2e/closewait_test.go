package e2e

import (
	"sync/atomic"
	"testing"
	"time"
)

// Built without the e2e tag too, so that `go test ./...` in test/e2e runs
// it with no cluster.
func TestWaitClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// open is the connections open at the start; closeAfter, when
		// they all close (never if zero).
		open       int64
		closeAfter time.Duration
		wantErr    bool
	}{
		{name: "no connection open -> nil at once", open: 0},
		{name: "connections that close within the wait -> nil", open: 3, closeAfter: 50 * time.Millisecond},
		{name: "connections that never close -> an error naming how many stay open", open: 2, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var open atomic.Int64
			open.Store(tc.open)
			if tc.closeAfter > 0 {
				time.AfterFunc(tc.closeAfter, func() { open.Store(0) })
			}
			start := time.Now()
			err := waitClosed(open.Load, 500*time.Millisecond, 5*time.Millisecond)
			took := time.Since(start)
			if got := err != nil; got != tc.wantErr {
				t.Fatalf("waitClosed = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if want := "2 connections still open 500ms after the replica ended"; err.Error() != want {
					t.Errorf("error = %q, want %q", err, want)
				}
				if took < 500*time.Millisecond {
					t.Errorf("gave up after %s, before the 500ms it was given", took)
				}
				return
			}
			if took > 400*time.Millisecond {
				t.Errorf("returned after %s, long after the connections closed", took)
			}
		})
	}
}
