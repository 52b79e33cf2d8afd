package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
)

func TestShutdownStopsBeingReadyBeforeItStopsServing(t *testing.T) {
	const delay = 5 * time.Second
	tests := []struct {
		name string
		// at is when the state is read, from the signal.
		at              time.Duration
		wantReady       bool
		wantServing     bool
		wantCloseHeader bool
	}{
		{name: "before the signal -> ready, serving, connections kept", at: -time.Second, wantReady: true, wantServing: true},
		{name: "at the signal -> not ready, still serving, every answer closes its connection", at: 0, wantServing: true, wantCloseHeader: true},
		{name: "just before the delay ends -> not ready, still serving", at: delay - time.Millisecond, wantServing: true, wantCloseHeader: true},
		{name: "once the delay has passed -> the serving context ends: listeners close, requests drain", at: delay, wantCloseHeader: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				signal, sendSignal := context.WithCancel(t.Context())
				defer sendSignal()
				s := newShutdown(delay)
				serving, cancel := s.serving(signal, logr.Discard())
				defer cancel()
				handler := s.closeWhenStopping(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

				if tc.at >= 0 {
					sendSignal()
					time.Sleep(tc.at)
				}
				synctest.Wait()

				if ready := s.readyz(nil) == nil; ready != tc.wantReady {
					t.Errorf("ready = %v, want %v", ready, tc.wantReady)
				}
				if stillServing := serving.Err() == nil; stillServing != tc.wantServing {
					t.Errorf("serving = %v, want %v", stillServing, tc.wantServing)
				}
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate-v1-pod", nil))
				if closing := rec.Header().Get("Connection") == "close"; closing != tc.wantCloseHeader {
					t.Errorf("answer says Connection: close = %v, want %v", closing, tc.wantCloseHeader)
				}
			})
		})
	}
}

func TestShutdownWithoutDelayStopsAtTheSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		signal, sendSignal := context.WithCancel(t.Context())
		defer sendSignal()
		serving, cancel := newShutdown(0).serving(signal, logr.Discard())
		defer cancel()
		sendSignal()
		synctest.Wait()
		if serving.Err() == nil {
			t.Errorf("with no delay the serving context outlives the signal")
		}
	})
}
