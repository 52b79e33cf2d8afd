package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/engine"
)

// Fault reasons, the values of the "reason" label of the errors counter: what
// failed inside spreadguard while it answered a pod.
const (
	// FaultLookup is a failed read of an owner, a Service, a namespace or
	// the policies (the live API read behind a cache miss included).
	FaultLookup = "lookup"
	// FaultEngine is any other error of the decision itself.
	FaultEngine = "engine"
	// FaultPanic is a panic recovered while answering.
	FaultPanic = "panic"
)

// Messages a client may see when spreadguard itself fails. The %s is what
// failed, cut short so that a warning stays one readable line.
const (
	// WarningFault is the admission warning of a pod admitted unchecked
	// under failurePolicy Ignore.
	WarningFault = "spreadguard could not %s because of an internal error (%s); " +
		"the pod was admitted unchanged and the scheduler still enforces its constraints"
	// MessageFault refuses a pod under failurePolicy Fail.
	MessageFault = "spreadguard could not %s because of an internal error of its own, " +
		"not a problem with this pod (%s); the webhook's failurePolicy is Fail, so the request is refused: " +
		"retry it, and if this persists check the spreadguard-webhook logs"
)

// What each pod webhook could not do, completing WarningFault and
// MessageFault.
const (
	whatMutate   = "add this pod's default topology spread constraints"
	whatValidate = "check this pod's topology spread constraints"
)

// maxFaultDetail bounds the error text quoted in a fault's warning.
const maxFaultDetail = 160

// faults answers the pod requests spreadguard could not decide. The API
// server applies a webhook's failurePolicy only to a call that fails (an
// HTTP error, a timeout); an answer of allowed: false is a refusal whatever
// the policy says (k8s.io/apiserver v0.37.1,
// plugin/pkg/admission/webhook/validating/dispatcher.go). So the server must
// know the policy its configurations declare and answer a fault of its own
// the way the API server would have treated a failed call: admitted under
// Ignore, refused under Fail.
type faults struct {
	policy  admissionregistrationv1.FailurePolicyType
	webhook string
	// what says what could not be done (whatMutate, whatValidate).
	what    string
	metrics *Metrics
}

// answer counts err and returns the response its failure policy calls for.
func (f faults) answer(ctx context.Context, reason string, err error) admission.Response {
	logf.FromContext(ctx).Error(err, "internal error; answering as the failure policy says",
		"reason", reason, "failurePolicy", f.effectivePolicy())
	if f.metrics != nil {
		f.metrics.Errors.WithLabelValues(f.webhook, reason).Inc()
	}
	detail := oneLineN(err.Error(), maxFaultDetail)
	if f.effectivePolicy() == admissionregistrationv1.Fail {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf(MessageFault, f.what, detail))
	}
	return admission.Allowed("").WithWarnings(fmt.Sprintf(WarningFault, f.what, detail))
}

// serve answers req with handle, answers a panic in it as a fault, and
// records the request's result and latency.
func (f faults) serve(ctx context.Context, req admission.Request,
	handle func(context.Context, admission.Request, faults) (admission.Response, string)) (resp admission.Response) {
	start := time.Now()
	result := ResultErrored
	defer func() {
		if r := recover(); r != nil {
			resp, result = f.recovered(ctx, r), ResultErrored
		}
		f.metrics.observe(f.webhook, result, start)
	}()
	resp, result = handle(ctx, req, f)
	return resp
}

// recovered turns a panic value into the fault answer. It runs on the
// panicking goroutine, so the error log's stack trace (the server logs one
// at error level) shows where the panic came from.
func (f faults) recovered(ctx context.Context, r any) admission.Response {
	return f.answer(ctx, FaultPanic, fmt.Errorf("panic: %v", r))
}

// effectivePolicy is Ignore unless Fail is set, as the chart's default.
func (f faults) effectivePolicy() admissionregistrationv1.FailurePolicyType {
	if f.policy == admissionregistrationv1.Fail {
		return admissionregistrationv1.Fail
	}
	return admissionregistrationv1.Ignore
}

// faultReason classifies an error of the engine for the errors counter.
func faultReason(err error) string {
	if errors.Is(err, engine.ErrLookup) {
		return FaultLookup
	}
	return FaultEngine
}
