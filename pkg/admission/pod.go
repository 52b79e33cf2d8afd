package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Messages a client may see.
const (
	// WarningNotSynced is returned with every pod allowed before the
	// caches have synced.
	WarningNotSynced = "spreadguard has not finished loading the cluster's nodes and pods, " +
		"so this pod's topology spread constraints were not checked; the scheduler still enforces them."
	// MessageNotSynced denies a pod before the caches have synced when the
	// server runs with --refuse-until-synced.
	MessageNotSynced = "spreadguard has not finished loading the cluster's nodes and pods and is configured " +
		"to refuse pods until it has (--refuse-until-synced); retry in a few seconds."
)

// verbosityNodeDetail is the log verbosity of per-node detail: the result of
// a check lists every excluded node, which is only worth logging on demand.
const verbosityNodeDetail = 4

// SourcesFunc returns the lookups for one request, bound to its context so
// that a live read stops when the request is abandoned.
type SourcesFunc func(ctx context.Context) engine.Sources

var (
	_ admission.Handler = (*PodMutator)(nil)
	_ admission.Handler = (*PodValidator)(nil)
)

// PodMutator injects the default topology spread constraints of a pod's
// namespace into the pod, on CREATE.
type PodMutator struct {
	Decoder admission.Decoder
	Sources SourcesFunc
	Config  engine.Config
	Metrics *Metrics
}

// Handle answers one request to /mutate-v1-pod.
func (h *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, result := h.handle(ctx, req)
	h.Metrics.observe(WebhookMutatePod, result, start)
	return resp
}

func (h *PodMutator) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	log := logf.FromContext(ctx)
	if reason := notPodCreate(req); reason != "" {
		return admission.Allowed(reason), ResultSkipped
	}
	pod, err := decodePod(h.Decoder, req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), ResultInvalid
	}
	m, err := engine.Mutate(pod, h.Sources(ctx), h.Config)
	if err != nil {
		log.Error(err, "computing the default constraints failed")
		return admission.Errored(http.StatusInternalServerError,
			fmt.Errorf("spreadguard could not compute the pod's default topology spread constraints: %w", err)), ResultErrored
	}
	if m.Pod == nil {
		log.V(1).Info("pod left unchanged", "reason", m.Skipped)
		return admission.Allowed(m.Skipped), ResultSkipped
	}
	mutated, err := applyToRaw(req.Object.Raw, pod, m.Pod)
	if err != nil {
		log.Error(err, "building the patch failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("building the patch: %w", err)), ResultErrored
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, mutated)
	if !resp.Allowed {
		// PatchResponseFromRaw reports its own failure as Errored(500).
		return resp, ResultErrored
	}
	if h.Metrics != nil {
		h.Metrics.Injected.Add(float64(len(m.Injected)))
	}
	log.V(1).Info("injected topology spread constraints", "policy", m.Policy.Name, "constraints", len(m.Injected))
	return resp, ResultPatched
}

// applyToRaw carries the engine's changes (from decoded to mutated) over to
// the raw object the apiserver sent. A patch computed from the typed pod
// alone would remove every field these Go types do not know; this one
// touches only what the engine changed.
func applyToRaw(raw []byte, decoded, mutated *v1.Pod) ([]byte, error) {
	before, err := json.Marshal(decoded)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod: %w", err)
	}
	after, err := json.Marshal(mutated)
	if err != nil {
		return nil, fmt.Errorf("encoding the mutated pod: %w", err)
	}
	changes, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, fmt.Errorf("diffing the mutated pod: %w", err)
	}
	return jsonpatch.MergePatch(raw, changes)
}

// PodValidator refuses, warns about or audits a pod whose hard topology
// spread constraints cannot be met on any node, on CREATE.
type PodValidator struct {
	Decoder admission.Decoder
	Sources SourcesFunc
	// Checker holds the cluster's node and pod counts (the informer-fed
	// spread.Index).
	Checker spread.Checker
	Config  engine.Config
	// Synced reports whether the caches behind Checker and Sources are
	// complete.
	Synced            func() bool
	RefuseUntilSynced bool
	Metrics           *Metrics
}

// Handle answers one request to /validate-v1-pod.
func (h *PodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, result := h.handle(ctx, req)
	h.Metrics.observe(WebhookValidatePod, result, start)
	return resp
}

// errNotSynced stops engine.Validate at the count, after it has decided
// whether the pod is to be checked at all: an excluded or skipped pod is
// allowed silently even before the caches have synced.
var errNotSynced = errors.New("caches not synced")

// syncGate is a Checker that refuses to count until the caches have synced.
type syncGate struct {
	spread.Checker
	synced func() bool
}

func (g syncGate) Check(pod *v1.Pod, opts spread.Options) (*spread.Result, error) {
	if g.synced != nil && !g.synced() {
		return nil, errNotSynced
	}
	return g.Checker.Check(pod, opts)
}

func (h *PodValidator) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	log := logf.FromContext(ctx)
	if reason := notPodCreate(req); reason != "" {
		return admission.Allowed(reason), ResultSkipped
	}
	pod, err := decodePod(h.Decoder, req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), ResultInvalid
	}
	v, err := engine.Validate(pod, h.Sources(ctx), syncGate{h.Checker, h.Synced}, h.Config, false)
	switch {
	case errors.Is(err, errNotSynced) && h.RefuseUntilSynced:
		h.Metrics.denied(DenialNotSynced)
		return admission.Denied(MessageNotSynced), ResultDenied
	case errors.Is(err, errNotSynced):
		return admission.Allowed("").WithWarnings(WarningNotSynced), ResultUnsynced
	case err != nil:
		log.Error(err, "checking the pod failed")
		return admission.Errored(http.StatusInternalServerError,
			fmt.Errorf("spreadguard could not check the pod's topology spread constraints: %w", err)), ResultErrored
	}
	if v.Skipped != "" {
		log.V(1).Info("pod not checked", "reason", v.Skipped)
		return admission.Allowed(v.Skipped), ResultSkipped
	}
	if v.Result != nil && log.V(verbosityNodeDetail).Enabled() {
		log.V(verbosityNodeDetail).Info("spread check", "verdict", v.Result.Verdict,
			"constraints", v.Result.Constraints, "excluded", v.Result.Excluded)
	}
	if !v.Allowed {
		h.Metrics.denied(DenialUnsatisfiable)
		log.Info("denied pod: hard topology spread constraints cannot be met", "policy", v.Policy)
		return admission.Denied(v.Message), ResultDenied
	}
	resp := admission.Allowed("").WithWarnings(v.Warnings...)
	switch v.Action {
	case "":
		return resp, ResultAllowed
	case v1alpha1.ActionAudit:
		if h.Metrics != nil {
			h.Metrics.Audits.Inc()
		}
		log.Info("audit: hard topology spread constraints cannot be met; pod admitted", "policy", v.Policy, "message", v.Message)
		return resp, ResultAudited
	default:
		log.V(1).Info("warned about pod: hard topology spread constraints cannot be met", "policy", v.Policy)
		return resp, ResultWarned
	}
}

// notPodCreate says why a request is not one to review, or "" for the CREATE
// of a pod. The webhook configurations send only those; this guards against
// a configuration that sends more (pods/binding, pods/eviction, UPDATE).
func notPodCreate(req admission.Request) string {
	switch {
	case req.Operation != admissionv1.Create:
		return "only CREATE is reviewed, not " + string(req.Operation)
	case req.SubResource != "":
		return "subresource " + req.SubResource + " is not reviewed"
	}
	return ""
}

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

// decodePod decodes the pod under review. The namespace comes from the
// request when the object does not carry it.
func decodePod(d admission.Decoder, req admission.Request) (*v1.Pod, error) {
	if req.Kind != podKind {
		return nil, fmt.Errorf("expected a v1 Pod, got %s", gvkString(req.Kind))
	}
	pod := &v1.Pod{}
	if err := d.Decode(req, pod); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return pod, nil
}

func gvkString(k metav1.GroupVersionKind) string {
	if k.Group == "" {
		return k.Version + " " + k.Kind
	}
	return k.Group + "/" + k.Version + " " + k.Kind
}
