// Package policies is the controller that makes a policy spreadguard
// rejects visible. The schema and the validating webhook refuse most bad
// policies, but one can still be stored (while the webhook was down, or
// under an older CRD); policy.Resolve then passes over it, never
// half-applying it, and a policy of lower priority applies instead. The
// Watcher sees each policy as it enters the informer cache and, once per
// generation, logs why it is rejected, records a Warning event on it and
// keeps the count of rejected policies per kind. Admission requests never
// pay for this: policy.Resolve reads the watcher's verdict on a policy
// (PolicyVerdict) instead of validating it again.
package policies

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// ReasonInvalidPolicy is the reason of the Warning event on a policy that
// reached the cluster but that spreadguard rejects.
const ReasonInvalidPolicy = "InvalidPolicy"

var (
	_ manager.Runnable               = (*Watcher)(nil)
	_ manager.LeaderElectionRunnable = (*Watcher)(nil)
	_ policy.Verdicts                = (*Watcher)(nil)
	_ state.Subscriber               = (*Watcher)(nil)
)

// Changes is the stream the watcher subscribes to: state.Cluster.
type Changes interface {
	Subscribe(s state.Subscriber, kinds ...state.Kind) (unsubscribe func())
}

// Watcher judges every stored policy once per generation. It is a
// manager.Runnable on every replica: each replica's requests read its
// verdicts.
type Watcher struct {
	log      logr.Logger
	recorder events.EventRecorder
	// invalid is spreadguard_invalid_policies{kind}.
	invalid *prometheus.GaugeVec

	mu sync.Mutex
	// verdicts holds, for each policy, the generation last validated and
	// whether it passed.
	verdicts map[types.UID]verdict
}

type verdict struct {
	kind       string
	generation int64
	valid      bool
}

// New returns a watcher of the policies that changes tells of, subscribed
// to it (before the informers start, it hears of every stored policy),
// that reports through log and recorder (nil records no event), and
// registers its gauge spreadguard_invalid_policies with reg.
func New(changes Changes, log logr.Logger, recorder events.EventRecorder, reg prometheus.Registerer) (*Watcher, error) {
	w := &Watcher{
		log: log, recorder: recorder, verdicts: map[types.UID]verdict{},
		invalid: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spreadguard_invalid_policies",
			Help: "Stored SpreadPolicies and ClusterSpreadPolicies that spreadguard rejects and passes over, by kind.",
		}, []string{"kind"}),
	}
	if err := reg.Register(w.invalid); err != nil {
		return nil, fmt.Errorf("registering the policy metrics: %w", err)
	}
	changes.Subscribe(w, state.SpreadPolicy, state.ClusterSpreadPolicy)
	return w, nil
}

// Start returns when ctx is done: the watcher judges the policies as the
// stream tells of them, on the goroutine that tells.
func (w *Watcher) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: every replica resolves policies.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Changed judges a policy added or updated, and forgets a deleted one.
func (w *Watcher) Changed(c state.Change) {
	if c.Kind != state.SpreadPolicy && c.Kind != state.ClusterSpreadPolicy {
		return
	}
	old, cur := c.Objects()
	if c.Op == state.Deleted {
		w.Forget(old)
		return
	}
	w.Observe(cur)
}

// Observe validates a policy as it is now.
func (w *Watcher) Observe(obj any) {
	kind, name, meta, errs, ok := validate(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	prev, known := w.verdicts[meta.UID]
	wasRejected := known && !prev.valid
	w.verdicts[meta.UID] = verdict{kind: kind, generation: meta.Generation, valid: len(errs) == 0}
	n := w.countLocked(kind)
	w.mu.Unlock()
	w.invalid.WithLabelValues(kind).Set(float64(n))
	switch {
	case len(errs) == 0 && wasRejected:
		w.log.Info("policy accepted again", "kind", kind, "policy", name, "generation", meta.Generation)
	case len(errs) > 0 && (!wasRejected || prev.generation != meta.Generation):
		msg := fmt.Sprintf("spreadguard ignores this %s: %s. Pods it would select get the next policy by priority, or none.",
			kind, errs.ToAggregate().Error())
		w.log.Error(errs.ToAggregate(), "policy rejected; it is passed over until fixed",
			"kind", kind, "policy", name, "generation", meta.Generation)
		if w.recorder != nil {
			w.recorder.Eventf(obj.(runtime.Object), nil, "Warning", ReasonInvalidPolicy, "Validate", "%s", msg)
		}
	}
}

// Forget drops a deleted policy.
func (w *Watcher) Forget(obj any) {
	kind, _, meta, _, ok := validate(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	delete(w.verdicts, meta.UID)
	n := w.countLocked(kind)
	w.mu.Unlock()
	w.invalid.WithLabelValues(kind).Set(float64(n))
}

func (w *Watcher) countLocked(kind string) int {
	n := 0
	for _, v := range w.verdicts {
		if v.kind == kind && !v.valid {
			n++
		}
	}
	return n
}

// PolicyVerdict reports whether the policy uid passed validation at
// generation; known is false when the watcher has not validated that
// generation (not yet observed, or changed since), and the caller validates
// it itself.
func (w *Watcher) PolicyVerdict(uid types.UID, generation int64) (valid, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.verdicts[uid]
	if !ok || v.generation != generation {
		return false, false
	}
	return v.valid, true
}

type objectMeta struct {
	UID        types.UID
	Generation int64
}

// validate returns obj's kind, its namespace/name and what is wrong with
// it; ok is false for an object that is not a policy.
func validate(obj any) (kind, name string, meta objectMeta, errs field.ErrorList, ok bool) {
	switch p := obj.(type) {
	case *v1alpha1.SpreadPolicy:
		return v1alpha1.KindSpreadPolicy, p.Namespace + "/" + p.Name, objectMeta{p.UID, p.Generation},
			policy.ValidateSpreadPolicy(p), true
	case *v1alpha1.ClusterSpreadPolicy:
		return v1alpha1.KindClusterSpreadPolicy, p.Name, objectMeta{p.UID, p.Generation},
			policy.ValidateClusterSpreadPolicy(p), true
	}
	return "", "", objectMeta{}, nil, false
}
