// Package leader runs the part of a controller that one replica alone may
// run (writing status, Reports, deletion costs) on the replica that holds
// a Lease, while every replica serves admission.
//
// It is client-go's leader election (k8s.io/client-go/tools/leaderelection)
// on a Lease of its own, not the manager's: the manager's election stops
// the whole process when the Lease cannot be renewed (an API server
// restarting), and losing a Lease must stop the leader's work, never
// admission. A controller built on it is a manager.Runnable whose
// NeedLeaderElection is false, so that the manager starts it on every
// replica, and whose Start calls Run.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The Lease timing: client-go's and controller-runtime's defaults.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// retryAfter is how long a leader whose work failed waits before it tries
// again, holding the Lease; a variable for the tests.
var retryAfter = 30 * time.Second

// namespaceFile is where a pod reads its own namespace; a variable for the
// tests.
var namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ErrNoNamespace says that no namespace was configured for a Lease and the
// process does not run in a pod that could hold one in its own.
var ErrNoNamespace = errors.New("no namespace for the Lease: outside a cluster, one must be configured")

// Namespace returns the namespace of a Lease: configured when it is set,
// else the namespace of the pod this process runs in.
func Namespace(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	data, err := os.ReadFile(namespaceFile)
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNoNamespace
	}
	if err != nil {
		return "", fmt.Errorf("reading the pod's namespace: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// Lease names the Lease the replicas compete for.
type Lease struct {
	Namespace, Name string
}

// Run competes for lease until ctx is done and calls lead while this
// replica holds it, with a context that ends when the Lease is lost. A
// replica that loses the Lease competes again; one whose lead returns an
// error keeps the Lease and calls lead again after 30 s, rather than hold
// the Lease doing nothing. Stopping (ctx done) releases the Lease, so that
// another replica takes over within seconds.
func Run(ctx context.Context, cfg *rest.Config, lease Lease, log logr.Logger, lead func(ctx context.Context) error) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("naming this replica for the Lease %s/%s: %w", lease.Namespace, lease.Name, err)
	}
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, lease.Namespace, lease.Name,
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())}, cfg, renewDeadline)
	if err != nil {
		return fmt.Errorf("creating the lock of the Lease %s/%s: %w", lease.Namespace, lease.Name, err)
	}
	elect := func(ctx context.Context, callbacks leaderelection.LeaderCallbacks) error {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, Name: lease.Name, ReleaseOnCancel: true,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Callbacks: callbacks,
		})
		if err != nil {
			return fmt.Errorf("creating the election of the Lease %s/%s: %w", lease.Namespace, lease.Name, err)
		}
		elector.Run(ctx)
		return nil
	}
	return RunElections(ctx, elect, lease.Name, log, lead)
}

// Elect runs one election: it calls callbacks.OnStartedLeading on a
// goroutine of its own once it holds the Lease, and returns once the Lease
// is lost or ctx is done, as client-go's LeaderElector.Run does: without
// waiting for that goroutine, whose context it ends.
type Elect func(ctx context.Context, callbacks leaderelection.LeaderCallbacks) error

// RunElections is Run over elect, one election after another until ctx is
// done. Leads never overlap: client-go returns on losing the Lease while
// the lead it started may still be inside its work (a sync, its deferred
// shutdown), so the lead of the next election waits until the last one
// has returned, and RunElections returns only once every lead has.
func RunElections(ctx context.Context, elect Elect, name string, log logr.Logger, lead func(ctx context.Context) error) error {
	// turn is held by the lead that runs: one at a time.
	turn := make(chan struct{}, 1)
	callbacks := leaderelection.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context) {
			select {
			case turn <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-turn }()
			if ctx.Err() != nil {
				return
			}
			keepLeading(ctx, log, lead)
		},
		OnStoppedLeading: func() { log.Info("not leading: waiting for the Lease", "lease", name) },
	}
	defer func() { turn <- struct{}{} }() // the last lead has returned
	for ctx.Err() == nil {
		if err := elect(ctx, callbacks); err != nil {
			return err
		}
	}
	return nil
}

// keepLeading calls lead until it returns nil or ctx is done, waiting
// retryAfter after each error.
func keepLeading(ctx context.Context, log logr.Logger, lead func(ctx context.Context) error) {
	for {
		err := lead(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		log.Error(err, "the leader's work stopped; it starts again later", "after", retryAfter)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryAfter):
		}
	}
}
