package cache

import (
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
)

// ReasonInvalidPolicy is the reason of the Warning event on a policy that
// reached the cluster but that spreadguard rejects.
const ReasonInvalidPolicy = "InvalidPolicy"

// InvalidPolicyGauge is set to the number of rejected policies of a kind
// (v1alpha1.KindSpreadPolicy or KindClusterSpreadPolicy).
type InvalidPolicyGauge func(kind string, n int)

// PolicyWatcher makes a policy that spreadguard rejects visible. The
// schema and the validating webhook refuse most bad policies, but one can
// still be stored (while the webhook was down, or under an older CRD);
// policy.Resolve then passes over it, never half-applying it, and a policy
// of lower priority applies instead. The watcher sees each policy as it
// enters the cache and, once per generation, logs why it is rejected,
// records a Warning event on it and keeps the count of rejected policies
// per kind. Admission requests never pay for this: policy.Resolve reads the
// watcher's verdict on a policy (PolicyVerdict) instead of validating it again.
type PolicyWatcher struct {
	log      logr.Logger
	recorder events.EventRecorder
	gauge    InvalidPolicyGauge

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

// NewPolicyWatcher returns a watcher that reports through log, recorder
// and gauge; recorder and gauge may be nil.
func NewPolicyWatcher(log logr.Logger, recorder events.EventRecorder, gauge InvalidPolicyGauge) *PolicyWatcher {
	return &PolicyWatcher{log: log, recorder: recorder, gauge: gauge, verdicts: map[types.UID]verdict{}}
}

// Handler returns the informer event handler for SpreadPolicies and
// ClusterSpreadPolicies.
func (w *PolicyWatcher) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.Observe(obj) },
		UpdateFunc: func(_, obj any) { w.Observe(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			w.Forget(obj)
		},
	}
}

// Observe validates a policy as it is now.
func (w *PolicyWatcher) Observe(obj any) {
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
	if w.gauge != nil {
		w.gauge(kind, n)
	}
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
func (w *PolicyWatcher) Forget(obj any) {
	kind, _, meta, _, ok := validate(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	delete(w.verdicts, meta.UID)
	n := w.countLocked(kind)
	w.mu.Unlock()
	if w.gauge != nil {
		w.gauge(kind, n)
	}
}

func (w *PolicyWatcher) countLocked(kind string) int {
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
func (w *PolicyWatcher) PolicyVerdict(uid types.UID, generation int64) (valid, known bool) {
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
