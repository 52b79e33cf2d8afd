package e2e

import (
	"fmt"
	"time"
)

// waitClosed polls open every poll until it reports no connection, and
// fails when some are still open after within. A scenario that bounds what
// a killed replica may cost by the creates sent until its connections
// closed holds only when they did close: otherwise the bound would grow
// with the wait, by the rate times within.
func waitClosed(open func() int64, within, poll time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		n := open()
		if n == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%d connections still open %s after the replica ended", n, within)
		}
		time.Sleep(poll)
	}
}
