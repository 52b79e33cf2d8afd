package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy"
)

// PolicyValidator refuses a SpreadPolicy or ClusterSpreadPolicy that
// pkg/policy finds invalid, on CREATE and UPDATE, with every field error. The
// CRD schema catches what it can; this catches the rest at apply time rather
// than leaving the policy to be skipped later.
type PolicyValidator[T runtime.Object] struct {
	webhook  string
	kind     string
	decoder  admission.Decoder
	new      func() T
	validate func(T) field.ErrorList
	metrics  *Metrics
}

var (
	_ admission.Handler = (*PolicyValidator[*v1alpha1.SpreadPolicy])(nil)
	_ admission.Handler = (*PolicyValidator[*v1alpha1.ClusterSpreadPolicy])(nil)
)

// NewSpreadPolicyValidator returns the handler of
// /validate-spreadguard-io-v1alpha1-spreadpolicy.
func NewSpreadPolicyValidator(d admission.Decoder, m *Metrics) *PolicyValidator[*v1alpha1.SpreadPolicy] {
	return &PolicyValidator[*v1alpha1.SpreadPolicy]{
		webhook:  WebhookValidateSpreadPolicy,
		kind:     v1alpha1.KindSpreadPolicy,
		decoder:  d,
		new:      func() *v1alpha1.SpreadPolicy { return &v1alpha1.SpreadPolicy{} },
		validate: policy.ValidateSpreadPolicy,
		metrics:  m,
	}
}

// NewClusterSpreadPolicyValidator returns the handler of
// /validate-spreadguard-io-v1alpha1-clusterspreadpolicy.
func NewClusterSpreadPolicyValidator(d admission.Decoder, m *Metrics) *PolicyValidator[*v1alpha1.ClusterSpreadPolicy] {
	return &PolicyValidator[*v1alpha1.ClusterSpreadPolicy]{
		webhook:  WebhookValidateClusterSpreadPolicy,
		kind:     v1alpha1.KindClusterSpreadPolicy,
		decoder:  d,
		new:      func() *v1alpha1.ClusterSpreadPolicy { return &v1alpha1.ClusterSpreadPolicy{} },
		validate: policy.ValidateClusterSpreadPolicy,
		metrics:  m,
	}
}

// Handle answers one request for a policy.
func (h *PolicyValidator[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, result := h.handle(ctx, req)
	h.metrics.observe(h.webhook, result, start)
	return resp
}

func (h *PolicyValidator[T]) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("only CREATE and UPDATE are reviewed"), ResultSkipped
	}
	want := metav1.GroupVersionKind{Group: v1alpha1.GroupName, Version: v1alpha1.GroupVersion.Version, Kind: h.kind}
	if req.Kind != want {
		return admission.Errored(http.StatusBadRequest,
			fmt.Errorf("expected a %s, got %s", gvkString(want), gvkString(req.Kind))), ResultInvalid
	}
	obj := h.new()
	if err := h.decoder.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", h.kind, err)), ResultInvalid
	}
	errs := h.validate(obj)
	if len(errs) == 0 {
		return admission.Allowed(""), ResultAllowed
	}
	name := req.Name
	if req.Namespace != "" {
		name = req.Namespace + "/" + req.Name
	}
	logf.FromContext(ctx).V(1).Info("refused an invalid policy", "kind", h.kind, "errors", errs.ToAggregate().Error())
	h.metrics.denied(DenialInvalidPolicy, req.Namespace)
	return admission.Denied(fmt.Sprintf("%s %s is invalid: %s", h.kind, name, errs.ToAggregate().Error())), ResultDenied
}
