package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
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

// PodWebhook is what both pod handlers are built from: where a request's
// lookups come from, the engine's configuration, the failure policy of the
// handler's webhook configuration, and the metrics.
type PodWebhook struct {
	Sources SourcesFunc
	Config  engine.Config
	// FailurePolicy is the failurePolicy of the handler's webhook
	// configuration: a fault of spreadguard's own admits the pod unchanged
	// under Ignore (the default when empty) and refuses it under Fail.
	FailurePolicy admissionregistrationv1.FailurePolicyType
	Metrics       *Metrics
}

// serve answers req with handle, through the failure policy.
func (w *PodWebhook) serve(ctx context.Context, req admission.Request, webhook, what string,
	handle func(context.Context, admission.Request, faults) (admission.Response, string)) admission.Response {
	f := faults{policy: w.FailurePolicy, webhook: webhook, what: what, metrics: w.Metrics}
	return f.serve(ctx, req, handle)
}

// PodMutator injects the default topology spread constraints of a pod's
// namespace into the pod, on CREATE.
type PodMutator struct {
	PodWebhook
}

// Handle answers one request to /mutate-v1-pod.
func (h *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	return h.serve(ctx, req, WebhookMutatePod, whatMutate, h.handle)
}

func (h *PodMutator) handle(ctx context.Context, req admission.Request, f faults) (admission.Response, string) {
	log := logf.FromContext(ctx)
	if reason := notPodCreate(req); reason != "" {
		h.Metrics.notCreate(WebhookMutatePod)
		return admission.Allowed(reason), ResultSkipped
	}
	pod, shape, err := decodePod(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), ResultInvalid
	}
	m, err := engine.Mutate(pod, h.Sources(ctx), h.Config)
	if err != nil {
		return f.answer(ctx, faultReason(err), err), ResultErrored
	}
	if m.Pod == nil {
		log.V(1).Info("pod left unchanged", "reason", m.Skipped.String())
		h.Metrics.skipped(WebhookMutatePod, m.Skipped)
		return admission.Allowed(m.Skipped.String()), ResultSkipped
	}
	patch, err := mutationPatch(shape, m.Pod)
	if err != nil {
		return f.answer(ctx, faultReason(err), err), ResultErrored
	}
	jsonPatch := admissionv1.PatchTypeJSONPatch
	resp := admission.Response{
		AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &jsonPatch},
	}
	if h.Metrics != nil {
		h.Metrics.Injected.Add(float64(len(m.Injected)))
	}
	log.V(1).Info("injected topology spread constraints", "policy", m.Policy.Name, "constraints", len(m.Injected))
	return resp, ResultPatched
}

// mutationPatch returns the JSON Patch, encoded, that turns the raw object,
// whose parts shape records, into mutated. engine.Mutate changes two members
// only: it sets spec.topologySpreadConstraints of a pod that had none
// (absent, null or []), and the annotation spreadguard.io/policy. The patch
// adds just those, so every other byte of the raw object stays as the
// apiserver sent it, including fields these Go types do not know, which a
// patch computed from the typed pod would remove. An add replaces a member
// that is there (null, [] or an older value) and creates one that is not; a
// missing or null parent is added whole, as JSON Patch cannot add into it.
// The tests apply this patch and compare the result with a merge of the
// whole mutated pod, so a change of engine.Mutate that touches anything
// else fails them.
//
// The patch is encoded here, in one pass, rather than handed to
// admission.Response as Patches: controller-runtime encodes those with
// encoding/json, and each operation's MarshalJSON encodes its value a second
// time, which was a tenth of a mutating review's CPU.
func mutationPatch(shape rawShape, mutated *v1.Pod) ([]byte, error) {
	constraints := mutated.Spec.TopologySpreadConstraints
	policyName := mutated.Annotations[v1alpha1.AnnotationPolicy]
	patch := make([]patchOperation, 0, 2)
	switch {
	case !shape.metadata:
		patch = append(patch, patchOperation{"add", "/metadata",
			map[string]any{"annotations": map[string]string{v1alpha1.AnnotationPolicy: policyName}}})
	case !shape.annotations:
		patch = append(patch, patchOperation{"add", "/metadata/annotations",
			map[string]string{v1alpha1.AnnotationPolicy: policyName}})
	default:
		patch = append(patch, patchOperation{"add", policyAnnotationPath, policyName})
	}
	if shape.spec {
		patch = append(patch, patchOperation{"add", "/spec/topologySpreadConstraints", constraints})
	} else {
		patch = append(patch, patchOperation{"add", "/spec",
			map[string]any{"topologySpreadConstraints": constraints}})
	}
	b, err := jsonv2.Marshal(patch, patchEncodeOptions)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return b, nil
}

// patchOperation is one operation of a JSON Patch (RFC 6902) that adds.
type patchOperation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// patchEncodeOptions encode the API's types as encoding/json does
// (omitempty leaves out a zero number or false, not only an empty JSON
// value), and maps in key order, so the same mutation gives the same bytes.
var patchEncodeOptions = jsonv2.JoinOptions(jsonv1.OmitEmptyWithLegacySemantics(true), jsonv2.Deterministic(true))

// policyAnnotationPath points at the policy annotation, its key escaped as
// a JSON Pointer's reference token (RFC 6901): "/" is "~1" and "~" is "~0".
var policyAnnotationPath = "/metadata/annotations/" +
	strings.NewReplacer("~", "~0", "/", "~1").Replace(v1alpha1.AnnotationPolicy)

// PodValidator refuses, warns about or audits a pod whose hard topology
// spread constraints cannot be met on any node, on CREATE.
type PodValidator struct {
	PodWebhook
	// Checker holds the cluster's node and pod counts (the informer-fed
	// spread.Index).
	Checker spread.Checker
	// Synced reports whether the caches behind Checker and Sources are
	// complete.
	Synced            func() bool
	RefuseUntilSynced bool
	// Recorder records a Warning event on a pod found unplaceable when its
	// last scheduling gate is removed, and on the controller and Deployment
	// of a pod refused or warned about at CREATE; nil records none. It must
	// be an events.k8s.io recorder: its broadcaster folds the events of one
	// object with one reason into a series with a count, so a ReplicaSet
	// retrying a refused pod in a loop writes one Event, not one per try.
	Recorder events.EventRecorder
}

// Handle answers one request to /validate-v1-pod.
func (h *PodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	return h.serve(ctx, req, WebhookValidatePod, whatValidate, h.handle)
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

func (h *PodValidator) handle(ctx context.Context, req admission.Request, f faults) (admission.Response, string) {
	log := logf.FromContext(ctx)
	lifted, err := gatesLifted(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), ResultInvalid
	}
	if reason := notPodCreate(req); reason != "" && !lifted {
		h.Metrics.notCreate(WebhookValidatePod)
		return admission.Allowed(reason), ResultSkipped
	}
	pod, _, err := decodePod(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), ResultInvalid
	}
	if lifted {
		// An update is never refused, whatever the failure policy: the
		// pod exists already.
		f.policy = admissionregistrationv1.Ignore
	}
	v, err := engine.Validate(pod, h.Sources(ctx), syncGate{h.Checker, h.Synced}, h.Config, false)
	switch {
	case errors.Is(err, errNotSynced) && h.RefuseUntilSynced && !lifted:
		h.Metrics.denied(DenialNotSynced, req.Namespace)
		return admission.Denied(MessageNotSynced), ResultDenied
	case errors.Is(err, errNotSynced):
		return admission.Allowed("").WithWarnings(WarningNotSynced), ResultUnsynced
	case err != nil:
		return f.answer(ctx, faultReason(err), err), ResultErrored
	}
	if v.Skipped != engine.NotSkipped {
		log.V(1).Info("pod not checked", "reason", v.Skipped.String())
		h.Metrics.skipped(WebhookValidatePod, v.Skipped)
		return admission.Allowed(v.Skipped.String()).WithWarnings(v.Warnings...), ResultSkipped
	}
	if v.Result != nil && log.V(verbosityNodeDetail).Enabled() {
		log.V(verbosityNodeDetail).Info("spread check", "verdict", v.Result.Verdict,
			"constraints", v.Result.Constraints, "excluded", v.Result.Excluded)
	}
	if lifted && (!v.Allowed || v.Action == v1alpha1.ActionWarn) {
		// The scheduler is about to try this pod: say why it will stay
		// Pending, on the update and on the pod, without refusing.
		// A dry run leaves no trace: the webhook declares sideEffects
		// NoneOnDryRun.
		if req.DryRun == nil || !*req.DryRun {
			h.recordUnsatisfiable(pod, v.Message)
		}
		log.Info("pod whose last scheduling gate was removed cannot be placed: hard topology spread constraints cannot be met",
			"policy", v.Policy.String())
		return admission.Allowed("").WithWarnings(v.Message), ResultWarned
	}
	if (!v.Allowed || v.Action == v1alpha1.ActionWarn) && (req.DryRun == nil || !*req.DryRun) {
		h.recordOnOwners(ctx, pod, v.Message)
	}
	if !v.Allowed {
		h.Metrics.denied(DenialUnsatisfiable, pod.Namespace)
		log.Info("denied pod: hard topology spread constraints cannot be met", "policy", v.Policy.String())
		return admission.Denied(v.Message), ResultDenied
	}
	resp := admission.Allowed("").WithWarnings(v.Warnings...)
	switch {
	case v.NewNode:
		if h.Metrics != nil {
			h.Metrics.NewNodes.WithLabelValues(pod.Namespace).Inc()
		}
		log.V(1).Info("admitted pod that only a new node fits", "message", v.Result.Message)
		return resp, ResultWarned
	case v.Action == "":
		return resp, ResultAllowed
	case v.Action == v1alpha1.ActionAudit:
		if h.Metrics != nil {
			h.Metrics.Audits.Inc()
		}
		log.Info("audit: hard topology spread constraints cannot be met; pod admitted", "policy", v.Policy.String(), "message", v.Message)
		resp.AuditAnnotations = map[string]string{AuditAnnotationUnsatisfiable: v.Message}
		return resp, ResultAudited
	default:
		log.V(1).Info("warned about pod: hard topology spread constraints cannot be met", "policy", v.Policy.String())
		return resp, ResultWarned
	}
}

// AuditAnnotationUnsatisfiable is the key of the audit annotation that
// carries the message of a pod admitted under the Audit action. The API
// server prefixes it with the webhook's name and '/', so it has no prefix
// of its own: the audit event reads pods.validate.spreadguard.io/unsatisfiable.
const AuditAnnotationUnsatisfiable = "unsatisfiable"

// ReasonSpreadUnsatisfiable is the reason of the Warning events spreadguard
// records about a pod whose hard topology spread constraints cannot be met.
const ReasonSpreadUnsatisfiable = "SpreadUnsatisfiable"

// maxEventNote is the longest note an events.k8s.io/v1 Event takes.
const maxEventNote = 1024

func (h *PodValidator) recordUnsatisfiable(pod *v1.Pod, message string) {
	if h.Recorder == nil {
		return
	}
	h.Recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonSpreadUnsatisfiable, "SchedulingGatesRemoved",
		"%s", oneLineN(message, maxEventNote-len("...")))
}

// recordOnOwners records the refusal (or warning) of pod, with message, on
// the owners a person reads: the pod's controller when it is a
// ReplicationController, ReplicaSet or StatefulSet, and the Deployment that
// controls that ReplicaSet. The pod itself is never stored, so an event on
// it would point at nothing. The controller needs no lookup: the pod's
// controllerRef names it. The Deployment is read from the ReplicaSet's
// controllerRef, through the same lookups DefaultSelector used, so no
// Deployment is ever read or cached.
func (h *PodValidator) recordOnOwners(ctx context.Context, pod *v1.Pod, message string) {
	if h.Recorder == nil {
		return
	}
	owners, err := EventOwners(pod, h.Sources(ctx))
	if err != nil {
		// The denial stands; only its echo on the Deployment is lost.
		logf.FromContext(ctx).Error(err, "finding the Deployment of the refused pod's ReplicaSet")
	}
	note := oneLineN(message, maxEventNote-len("..."))
	for _, ref := range owners {
		h.Recorder.Eventf(ref, nil, v1.EventTypeWarning, ReasonSpreadUnsatisfiable, ActionCreatePod, "%s", note)
	}
}

// ActionCreatePod is the action of the events recorded on a refused pod's
// owners: what the owner was doing when spreadguard refused it.
const ActionCreatePod = "CreatePod"

// EventOwners returns references to the owners an event about pod belongs
// on: its controller when that is a ReplicationController, ReplicaSet or
// StatefulSet, then, for a ReplicaSet controlled by a Deployment, the
// Deployment. A ReplicaSet the sources do not know yields the ReplicaSet
// alone.
func EventOwners(pod *v1.Pod, src spread.SelectorSources) ([]*v1.ObjectReference, error) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || !eventOwnerKinds[ref.Kind] {
		return nil, nil
	}
	owners := []*v1.ObjectReference{objectReference(ref, pod.Namespace)}
	if ref.Kind != workload.ReplicaSet.GVK.Kind {
		return owners, nil
	}
	rs, err := src.ReplicaSet(pod.Namespace, ref.Name)
	if err != nil {
		return owners, fmt.Errorf("reading ReplicaSet %s/%s: %w", pod.Namespace, ref.Name, err)
	}
	if rs == nil || (rs.UID != "" && ref.UID != "" && rs.UID != ref.UID) {
		return owners, nil
	}
	if d := metav1.GetControllerOfNoCopy(rs); d != nil && d.Kind == workload.Deployment.GVK.Kind {
		owners = append(owners, objectReference(d, pod.Namespace))
	}
	return owners, nil
}

// eventOwnerKinds are the controllers DefaultSelector reads, by kind.
var eventOwnerKinds = map[string]bool{
	workload.ReplicationController.GVK.Kind: true, workload.ReplicaSet.GVK.Kind: true, workload.StatefulSet.GVK.Kind: true,
}

func objectReference(ref *metav1.OwnerReference, namespace string) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: namespace, Name: ref.Name, UID: ref.UID}
}

// gatesLifted reports whether req is the UPDATE of a pod that removes its
// last scheduling gate: the moment the scheduler starts to consider it, and
// the only update the validating webhook reviews.
func gatesLifted(req admission.Request) (bool, error) {
	if req.Operation != admissionv1.Update || req.SubResource != "" || req.Kind != podKind || len(req.OldObject.Raw) == 0 {
		return false, nil
	}
	var old, cur struct {
		Spec struct {
			SchedulingGates []jsontext.Value `json:"schedulingGates"`
		} `json:"spec"`
	}
	if err := jsonv2.Unmarshal(req.OldObject.Raw, &old, podDecodeOptions); err != nil {
		return false, fmt.Errorf("decoding the pod's old object: %w", err)
	}
	if err := jsonv2.Unmarshal(req.Object.Raw, &cur, podDecodeOptions); err != nil {
		return false, fmt.Errorf("decoding the pod: %w", err)
	}
	return len(old.Spec.SchedulingGates) > 0 && len(cur.Spec.SchedulingGates) == 0, nil
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

// rawObject is the pod as the apiserver sends it, its parts behind pointers
// so that a part the object lacks, or holds as null, stays nil. Its status
// is not decoded: no decision reads it. It is a runtime.Object so that the
// Endpoint can hand it to a pod handler in the request's Object.Object.
type rawObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        *metav1.ObjectMeta `json:"metadata"`
	Spec            *v1.PodSpec        `json:"spec"`
}

var _ runtime.Object = (*rawObject)(nil)

// DeepCopyObject copies the metadata and the spec.
func (o *rawObject) DeepCopyObject() runtime.Object {
	if o == nil {
		return nil
	}
	return &rawObject{TypeMeta: o.TypeMeta, Metadata: o.Metadata.DeepCopy(), Spec: o.Spec.DeepCopy()}
}

// rawShape records which objects the raw pod holds (neither absent nor
// null): a JSON Patch can add a member only to an object that is there.
type rawShape struct {
	metadata, annotations, spec bool
}

// decodePod decodes the pod under review, parsing its JSON once: the
// serializer behind admission.Decoder parses it a first time only to find
// its kind, which the request already names. The parts of a pod that
// engine.Mutate and engine.Validate never read (see podDecodeOptions) are
// checked to be JSON of the right kind and left empty. The namespace comes
// from the request when the object does not carry it.
//
// The Endpoint may have decoded the pod already, with its review
// (decodeReviewWithPod): req's Object.Object then carries it.
func decodePod(req admission.Request) (*v1.Pod, rawShape, error) {
	if req.Kind != podKind {
		return nil, rawShape{}, fmt.Errorf("expected a v1 Pod, got %s", gvkString(req.Kind))
	}
	raw := bytes.TrimSpace(req.Object.Raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, rawShape{}, errors.New("decoding the pod: the request carries no object")
	}
	obj, _ := req.Object.Object.(*rawObject)
	if obj == nil {
		obj = &rawObject{}
		if err := jsonv2.Unmarshal(raw, obj, podDecodeOptions); err != nil {
			return nil, rawShape{}, fmt.Errorf("decoding the pod: %w", err)
		}
	}
	if (obj.APIVersion != "" && obj.APIVersion != "v1") || (obj.Kind != "" && obj.Kind != "Pod") {
		return nil, rawShape{}, fmt.Errorf("decoding the pod: the object is apiVersion %q, kind %q, not a v1 Pod",
			obj.APIVersion, obj.Kind)
	}
	pod := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: obj.APIVersion, Kind: obj.Kind}}
	shape := rawShape{metadata: obj.Metadata != nil, spec: obj.Spec != nil}
	if obj.Metadata != nil {
		pod.ObjectMeta = *obj.Metadata
		// Unmarshalling {} makes an empty map; only an absent or null
		// member leaves it nil.
		shape.annotations = pod.Annotations != nil
	}
	if obj.Spec != nil {
		pod.Spec = *obj.Spec
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return pod, shape, nil
}

func gvkString(k metav1.GroupVersionKind) string {
	if k.Group == "" {
		return k.Version + " " + k.Kind
	}
	return k.Group + "/" + k.Version + " " + k.Kind
}
