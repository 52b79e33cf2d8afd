package leader

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestNamespace(t *testing.T) {
	dir := t.TempDir()
	inPod := filepath.Join(dir, "namespace")
	if err := os.WriteFile(inPod, []byte("spreadguard\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		configured string
		file       string
		want       string
		wantErr    error
	}{
		{name: "configured, in a pod of another namespace -> the configured one", configured: "leases", file: inPod, want: "leases"},
		{name: "none configured, in a pod -> the pod's namespace, trimmed", file: inPod, want: "spreadguard"},
		{name: "none configured, outside a pod -> ErrNoNamespace", file: filepath.Join(dir, "missing"), wantErr: ErrNoNamespace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			namespaceFile = tt.file
			got, err := Namespace(tt.configured)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("Namespace(%q) = %q, %v; want %q, %v", tt.configured, got, err, tt.want, tt.wantErr)
			}
		})
	}
	t.Run("none configured, the pod's namespace unreadable -> an error that is not ErrNoNamespace", func(t *testing.T) {
		namespaceFile = dir // a directory: reading it fails
		if _, err := Namespace(""); err == nil || errors.Is(err, ErrNoNamespace) {
			t.Errorf("Namespace() error = %v, want a read error", err)
		}
	})
}

func TestKeepLeadingTriesAgainWhileItLeads(t *testing.T) {
	retryAfter = time.Millisecond
	tests := []struct {
		name string
		// fails is how many calls fail before one returns nil; -1: all.
		fails int
		// stopAfter cancels the leadership after this many calls.
		stopAfter int
		want      int
	}{
		{name: "work that fails twice then runs to its end is called 3 times", fails: 2, want: 3},
		{name: "work that fails until the Lease is lost is called until then", fails: -1, stopAfter: 4, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			calls := 0
			keepLeading(ctx, logr.Discard(), func(context.Context) error {
				calls++
				if calls == tt.stopAfter {
					cancel()
				}
				if tt.fails < 0 || calls <= tt.fails {
					return errors.New("informers not started")
				}
				return nil
			})
			if calls != tt.want {
				t.Errorf("lead called %d times, want %d", calls, tt.want)
			}
		})
	}
}
