package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitSynced(t *testing.T) {
	cases := []struct {
		name string
		// syncedAfter is how many calls of synced report false first; -1:
		// never synced.
		syncedAfter int
		cancel      bool
		want        bool
		wantCalls   int32
	}{
		{name: "synced already -> true at the first ask", syncedAfter: 0, want: true, wantCalls: 1},
		{name: "synced at the second ask -> true after one poll", syncedAfter: 1, want: true, wantCalls: 2},
		{name: "never synced and the context is done -> false", syncedAfter: -1, cancel: true, want: false, wantCalls: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if c.cancel {
				cancel()
			}
			var calls atomic.Int32
			synced := func() bool {
				n := calls.Add(1)
				return c.syncedAfter >= 0 && int(n) > c.syncedAfter
			}
			start := time.Now()
			if got := WaitSynced(ctx, synced); got != c.want {
				t.Errorf("WaitSynced = %v, want %v", got, c.want)
			}
			if got := calls.Load(); got != c.wantCalls {
				t.Errorf("synced was asked %d times, want %d", got, c.wantCalls)
			}
			if c.syncedAfter == 1 && time.Since(start) < syncPoll {
				t.Errorf("WaitSynced asked again after %v, before the poll of %v", time.Since(start), syncPoll)
			}
		})
	}
}
