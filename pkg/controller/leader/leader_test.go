package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/leaderelection"
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

// lostWhileLeading is an election as client-go runs one: it starts the
// lead on a goroutine of its own, and on losing the Lease (lose closed)
// ends the lead's context and returns at once, without waiting for it.
func lostWhileLeading(lose <-chan struct{}) Elect {
	return func(ctx context.Context, cb leaderelection.LeaderCallbacks) error {
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go cb.OnStartedLeading(lctx)
		select {
		case <-lose:
		case <-ctx.Done():
		}
		return nil
	}
}

func TestRunElectionsNeverOverlapsLeads(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lose := make(chan struct{})
	inside := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	elections := 0
	elect := func(ctx context.Context, cb leaderelection.LeaderCallbacks) error {
		elections++
		if elections == 1 {
			return lostWhileLeading(lose)(ctx, cb)
		}
		return lostWhileLeading(nil)(ctx, cb) // holds the Lease until ctx is done
	}
	leads := 0
	second := make(chan struct{})
	lead := func(ctx context.Context) error {
		mu.Lock()
		leads++
		n := leads
		mu.Unlock()
		record(fmt.Sprintf("lead %d starts", n))
		defer record(fmt.Sprintf("lead %d returns", n))
		if n == 1 {
			close(inside)
			<-release // inside its work, past the loss of the Lease
			return nil
		}
		close(second)
		<-ctx.Done()
		return nil
	}
	done := make(chan error)
	go func() { done <- RunElections(ctx, elect, "test", logr.Discard(), lead) }()
	<-inside
	close(lose) // the Lease is lost and retaken while lead 1 works
	time.Sleep(50 * time.Millisecond)
	close(release)
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the lead of the second election never started")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunElections() = %v", err)
	}
	want := []string{"lead 1 starts", "lead 1 returns", "lead 2 starts", "lead 2 returns"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("leads (-want +got):\n%s", diff)
	}
}
