package spread_test

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time the calling OS thread has used. Reported next
// to wall time, it shows an operation's own cost on a machine shared with
// other work, where wall time also counts the time spent waiting for a core.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
