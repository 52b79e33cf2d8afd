package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
)

// errStopping is what /readyz says from the signal to stop on.
var errStopping = errors.New("stopping: this replica takes no new requests")

// shutdown is how a replica stops without losing a request. On the signal
// it stops being ready at once, while the admission endpoints keep
// answering for delay: the Service's endpoints (kube-proxy, or the API
// server's own resolver) drop a pod that is terminating or not ready only a
// moment later, and a connection opened meanwhile must still find a
// listener. Its answers close their connections, so that the API server
// opens new ones to the replicas that stay. Then the serving context ends,
// and controller-runtime's manager closes the listeners and waits for the
// requests in flight.
type shutdown struct {
	delay    time.Duration
	stopping chan struct{}
}

func newShutdown(delay time.Duration) *shutdown {
	return &shutdown{delay: delay, stopping: make(chan struct{})}
}

// serving returns the context the manager runs under: it ends delay after
// signal does. cancel ends it at once (the manager failed on its own).
func (s *shutdown) serving(signal context.Context, log logr.Logger) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(context.WithoutCancel(signal))
	go func() {
		select {
		case <-signal.Done():
		case <-ctx.Done():
			return
		}
		close(s.stopping)
		log.Info("stopping: not ready any more, answering requests until the Service has dropped this replica", "delay", s.delay)
		t := time.NewTimer(s.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

func (s *shutdown) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// readyz is the readiness check that fails from the signal on.
func (s *shutdown) readyz(*http.Request) error {
	if s.isStopping() {
		return errStopping
	}
	return nil
}

// closeWhenStopping has every answer given after the signal close its
// connection ("Connection: close", which net/http honours), so that no
// keep-alive connection is left idle for the listener's closing to cut
// under a request the client is already writing.
func (s *shutdown) closeWhenStopping(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.isStopping() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
