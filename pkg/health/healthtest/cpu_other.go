//go:build !linux

package healthtest

import "time"

// processCPU is unavailable off Linux; the benchmarks then report wall
// time only.
func processCPU() (time.Duration, bool) { return 0, false }
