package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// WebhookForecastWorkload is the "webhook" label of the workload
// forecasts.
const WebhookForecastWorkload = "forecast-workload"

// whatForecast completes WarningFault for a workload.
const whatForecast = "forecast where this workload's replicas can be placed"

var _ admission.Handler = (*WorkloadForecaster)(nil)

// WorkloadForecaster answers the CREATE and UPDATE of a Deployment,
// StatefulSet, ReplicaSet or ReplicationController, and of their scale
// subresource, with the forecast's warning when some replica would be
// refused or left Pending, or when a StatefulSet's scale-down would leave
// a hard constraint skewed (see pkg/forecast). It never denies and never
// mutates a workload: the pods stay the place where constraints are
// written and enforced. A fault of its own admits the workload with a
// warning, whatever the configuration's failurePolicy.
type WorkloadForecaster struct {
	Sources SourcesFunc
	Config  engine.Config
	// Cluster holds the counts the pod webhook checks against.
	Cluster forecast.Cluster
	// Synced reports whether the caches behind Cluster and Sources are
	// complete; before, nothing is forecast.
	Synced func() bool
	// Workloads reads the workload a scale request names, whose Scale
	// carries no pod template: the informer cache, whose transforms keep
	// what a forecast reads (pkg/cache), so that a review, forged or not,
	// never makes the webhook read the API server.
	Workloads client.Reader
	Metrics   *Metrics
}

// Handle answers one request to /forecast-workload.
func (h *WorkloadForecaster) Handle(ctx context.Context, req admission.Request) admission.Response {
	f := faults{policy: "Ignore", webhook: WebhookForecastWorkload, what: whatForecast, metrics: h.Metrics}
	return f.serve(ctx, req, h.handle)
}

func (h *WorkloadForecaster) handle(ctx context.Context, req admission.Request, f faults) (admission.Response, string) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("only CREATE and UPDATE are forecast"), ResultSkipped
	}
	if h.Synced != nil && !h.Synced() {
		return admission.Allowed("caches not synced; nothing forecast"), ResultUnsynced
	}
	w, err := h.workload(ctx, req)
	if errors.Is(err, errReadWorkload) {
		return f.answer(ctx, FaultLookup, err), ResultErrored
	}
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), ResultInvalid
	}
	if w == nil {
		return admission.Allowed("not a workload"), ResultSkipped
	}
	fc, err := forecast.Run(w, h.Sources(ctx), h.Cluster, h.Config, forecast.WarningOnly())
	if err != nil {
		return f.answer(ctx, faultReason(err), err), ResultErrored
	}
	warning := fc.Warning()
	if warning == "" {
		return admission.Allowed(""), ResultAllowed
	}
	logf.FromContext(ctx).V(1).Info("forecast: a replica cannot be placed", "workload", fc.Workload, "warning", warning)
	return admission.Allowed("").WithWarnings(warning), ResultWarned
}

// errReadWorkload marks a failed read of the workload a scale names: a
// fault of spreadguard's, not a malformed request.
var errReadWorkload = errors.New("reading the workload being scaled")

// workloadKind is the kind of a workload resource, at its version; ok is
// false for any other resource.
func workloadKind(r metav1.GroupVersionResource) (workload.Kind, bool) {
	return workload.ByResource(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
}

// scaleKind is what the API server reviews on a write to a workload's scale
// subresource.
var scaleKind = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// ForWorkloads makes the Endpoint refuse, with a 400, a review that is not
// shaped as the API server sends it to the workload forecasts: the
// resource and requestResource those of a workload kind, the workload
// itself (requestKind its kind) or its scale subresource (requestKind
// autoscaling/v1 Scale), an operation, a namespace, and a name unless the
// workload is being created (generateName leaves it empty). A forged
// review names nothing the forecast then reads.
func ForWorkloads() EndpointOption {
	return func(e *Endpoint) { e.shape = workloadShape }
}

// workloadShape lists what makes req a review the API server does not send
// to the workload forecasts.
func workloadShape(req *admissionv1.AdmissionRequest) []string {
	var problems []string
	kind, ok := workloadKind(req.Resource)
	if !ok {
		problems = append(problems, fmt.Sprintf("resource %s is not a workload", gvrString(req.Resource)))
	}
	if req.RequestResource == nil || req.RequestKind == nil {
		problems = append(problems, "no requestKind or requestResource")
	} else if _, ok := workloadKind(*req.RequestResource); !ok {
		problems = append(problems, fmt.Sprintf("requestResource %s is not a workload", gvrString(*req.RequestResource)))
	}
	switch {
	case req.SubResource != req.RequestSubResource:
		problems = append(problems, fmt.Sprintf("subresource %q, requestSubResource %q", req.SubResource, req.RequestSubResource))
	case req.SubResource == "scale":
		if req.Kind != scaleKind || (req.RequestKind != nil && *req.RequestKind != scaleKind) {
			problems = append(problems, "a scale of a kind other than autoscaling/v1 Scale")
		}
	case req.SubResource != "":
		problems = append(problems, fmt.Sprintf("subresource %q, want none or scale", req.SubResource))
	case ok:
		want := req.Resource.Group + "/" + req.Resource.Version + ", Kind=" + kind.GVK.Kind
		if got := kindString(req.Kind); got != want || (req.RequestKind != nil && kindString(*req.RequestKind) != want) {
			problems = append(problems, fmt.Sprintf("kind %s for resource %s", got, gvrString(req.Resource)))
		}
	}
	if req.Operation == "" {
		problems = append(problems, "no operation")
	}
	if req.Namespace == "" {
		problems = append(problems, "no namespace")
	}
	if req.Name == "" && (req.Operation != admissionv1.Create || req.SubResource != "") {
		problems = append(problems, "no name")
	}
	return problems
}

func kindString(k metav1.GroupVersionKind) string {
	return k.Group + "/" + k.Version + ", Kind=" + k.Kind
}

// workload decodes the workload under review and how many of the pods the
// forecast places exist already: none on CREATE; on UPDATE, the old
// replicas, unless a Deployment's or StatefulSet's pod template changed
// (its new revision starts with no pods). A scale request carries a Scale:
// the workload is read, with the Scale's replicas.
func (h *WorkloadForecaster) workload(ctx context.Context, req admission.Request) (*forecast.Workload, error) {
	kind, ok := workloadKind(req.Resource)
	if !ok {
		return nil, nil
	}
	if req.SubResource == "scale" {
		return h.scaled(ctx, req, kind)
	}
	if req.SubResource != "" {
		return nil, nil
	}
	obj := kind.New()
	if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", req.Resource.Resource, err)
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(req.Namespace)
	}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old := kind.New()
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return nil, fmt.Errorf("decoding the old %s: %w", req.Resource.Resource, err)
		}
		if !kind.NewRevision(old, obj) {
			return h.ofCurrentRevision(ctx, obj, false, kind.Replicas(old))
		}
	}
	return forecast.Of(obj, 0)
}

// ofCurrentRevision is the workload of obj, whose pods of the current
// revision number existing; cached says obj was read from Workloads. A
// Deployment's replicas go to its current ReplicaSet, under the
// pod-template-hash its controller gave it, which the ReplicaSet says: the
// hash computed from the template is that one only where
// kube-controller-manager prints a PodSpec with the fields this build knows
// (Kubernetes 1.31 hashes to another value, and a forecast under it would
// count none of the pods that exist); and a Deployment read from the cache
// has lost most of its template. With no such ReplicaSet yet, there are no
// pods either, and the computed hash serves.
func (h *WorkloadForecaster) ofCurrentRevision(ctx context.Context, obj workload.Object, cached bool, existing int32) (*forecast.Workload, error) {
	if d, ok := obj.(*appsv1.Deployment); ok && h.Workloads != nil {
		hash, err := h.currentRevision(ctx, d, cached)
		if err != nil {
			return nil, fmt.Errorf("%w: the replica sets of deployment %s/%s: %w", errReadWorkload, d.Namespace, d.Name, err)
		}
		if hash != "" {
			return forecast.OfRevision(d, hash, existing), nil
		}
	}
	return forecast.Of(obj, existing)
}

// scaled reads the workload a scale request names from the cache and sets
// its replicas to the Scale's.
func (h *WorkloadForecaster) scaled(ctx context.Context, req admission.Request, kind workload.Kind) (*forecast.Workload, error) {
	var scale, old autoscalingv1.Scale
	if err := json.Unmarshal(req.Object.Raw, &scale); err != nil {
		return nil, fmt.Errorf("decoding the scale: %w", err)
	}
	if h.Workloads == nil {
		return nil, nil
	}
	obj := kind.New()
	if err := h.Workloads.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, obj); err != nil {
		return nil, fmt.Errorf("%w: %s %s/%s: %w", errReadWorkload, req.Resource.Resource, req.Namespace, req.Name, err)
	}
	existing := int32(0)
	if len(req.OldObject.Raw) > 0 {
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return nil, fmt.Errorf("decoding the old scale: %w", err)
		}
		existing = old.Spec.Replicas
	}
	kind.SetReplicas(obj, scale.Spec.Replicas)
	return h.ofCurrentRevision(ctx, obj, true, existing)
}

// currentRevision returns the pod-template-hash of d's current
// ReplicaSet (workload.CurrentReplicaSet), the one a scale grows, as
// Workloads holds them; "" when d has none yet, which has no pods either.
// The ReplicaSets' templates are compared with d's as the cache keeps it
// (cached), or else as the cache keeps the Deployment d updates: an update
// that starts no new revision leaves the template as it was, and a
// template of the request, whole, would equal none the cache keeps.
func (h *WorkloadForecaster) currentRevision(ctx context.Context, d *appsv1.Deployment, cached bool) (string, error) {
	if !cached {
		var stored appsv1.Deployment
		err := h.Workloads.Get(ctx, client.ObjectKeyFromObject(d), &stored)
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		d = &stored
	}
	var list appsv1.ReplicaSetList
	if err := h.Workloads.List(ctx, &list, client.InNamespace(d.Namespace)); err != nil {
		return "", err
	}
	rs := workload.CurrentReplicaSet(d, workload.Pointers(list.Items))
	if rs == nil || rs.Spec.Selector == nil {
		return "", nil
	}
	return rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey], nil
}
