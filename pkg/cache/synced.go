package cache

import (
	"context"
	"time"
)

// syncPoll is how often WaitSynced asks whether the caches have synced.
const syncPoll = time.Second

// WaitSynced returns true once synced reports true (Tracker.Synced: the
// caches and the index are complete), asking every second, and false if
// ctx is done first. The controllers that lead (the keeper, spread health)
// wait here before their first pass.
func WaitSynced(ctx context.Context, synced func() bool) bool {
	for !synced() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(syncPoll):
		}
	}
	return true
}
