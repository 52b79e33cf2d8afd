package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"runtime/debug"
	"runtime/trace"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// MaxRequestBytes caps an AdmissionReview body by default. A review carries
// at most the object and its old version, each at most 3 MiB once encoded
// (the apiserver's own limit); controller-runtime uses the same bound.
const MaxRequestBytes = 7 << 20

// MaxCreateReviewBytes caps the review of a CREATE, which carries one
// object: 3 MiB for the object and room for the envelope (user info, kinds,
// options).
const MaxCreateReviewBytes = 3<<20 + 256<<10

// EndpointOption changes what an Endpoint accepts.
type EndpointOption func(*Endpoint)

// WithMaxBodyBytes caps the request body at n bytes instead of
// MaxRequestBytes; a larger body is refused with 413 before it is decoded.
func WithMaxBodyBytes(n int64) EndpointOption {
	return func(e *Endpoint) { e.maxBody = n }
}

// ForResource makes the Endpoint refuse, with a 400, a review that is not
// shaped as the API server sends it for resource: the resource named, the
// requestKind and requestResource present, an operation, and a namespace
// when namespaced. Anyone who can reach the Service can POST a review; one
// the API server could not have sent gets no decision.
func ForResource(resource metav1.GroupVersionResource, namespaced bool) EndpointOption {
	return func(e *Endpoint) { e.resource, e.namespaced = &resource, namespaced }
}

// maxReasonLen keeps a 400's one-line reason readable in the apiserver's log.
const maxReasonLen = 512

// Endpoint serves one admission handler over HTTP.
//
// controller-runtime's admission.Webhook answers a body it cannot decode
// with an HTTP 200 whose AdmissionReview carries code 400, and accepts a
// review without a request or a uid. Endpoint answers those, and a request
// whose object is not what the handler reviews, with an HTTP 400 and a
// one-line reason, so the apiserver treats them as a failed call (and applies
// the failurePolicy) rather than as a decision. A handler that panics gets
// the same treatment with an HTTP 500: answered inside a 200, a panic would
// be a refusal whatever the failurePolicy says. (The pod handlers recover
// their own panics first and answer as their failure policy says, with a
// warning.) Everything else goes through admission.Webhook.Handle, which
// completes the response: every handler, the pod handlers included, has one
// entry, admission.Handler. An endpoint of pods decodes the review's pod
// with the review, in one pass, and hands it over in the request's
// Object.Object (decodePod takes it from there).
type Endpoint struct {
	hook       *admission.Webhook
	log        logr.Logger
	maxBody    int64
	resource   *metav1.GroupVersionResource
	namespaced bool
	// shape lists what makes a request one the API server does not send
	// to an endpoint of several resources (ForWorkloads).
	shape func(*admissionv1.AdmissionRequest) []string
	// region names the execution-trace region of each review, so that a
	// trace of the server (go tool trace) shows every review's span and
	// what its goroutine waited for; free when no trace is being taken.
	region string
}

var _ http.Handler = (*Endpoint)(nil)

// NewEndpoint wraps h for serving at one path.
func NewEndpoint(h admission.Handler, log logr.Logger, opts ...EndpointOption) *Endpoint {
	recoverPanic := false // ServeHTTP recovers, into an HTTP 500
	hook := &admission.Webhook{Handler: h, RecoverPanic: &recoverPanic}
	hook.LogConstructor = func(_ logr.Logger, req *admission.Request) logr.Logger {
		return admission.DefaultLogConstructor(log, req)
	}
	e := &Endpoint{hook: hook, log: log, maxBody: MaxRequestBytes, region: fmt.Sprintf("review %T", h)}
	for _, opt := range opts {
		opt(e)
	}
	return e
}

// ServeHTTP decodes an AdmissionReview, asks the handler, and writes its
// answer.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer trace.StartRegion(r.Context(), e.region).End()
	// The review's raw objects are slices of body (reviewDecodeOptions):
	// it goes back to the pool only once the answer is written.
	body := bodies.Get().(*bytes.Buffer)
	defer putBody(body)
	review, pod, code, err := readReview(w, r, e.maxBody, body, e.reviewsPods())
	if err == nil {
		err = e.checkShape(review.Request)
		code = http.StatusBadRequest
	}
	if err != nil {
		e.log.V(1).Info("refused a malformed request", "code", code, "reason", err.Error())
		writeError(w, code, err)
		return
	}
	defer func() {
		if p := recover(); p != nil {
			e.log.Error(fmt.Errorf("panic: %v", p), "recovered a panic; answering 500 so that the failurePolicy applies",
				"stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, fmt.Errorf("internal error: panic: %v", p))
		}
	}()
	req := admission.Request{AdmissionRequest: *review.Request}
	if pod != nil {
		// The pod decoded with the review: decodePod takes it from there
		// rather than parse the object's bytes again.
		req.Object.Object = pod
	}
	resp := e.hook.Handle(r.Context(), req)
	if !resp.Allowed && resp.Result != nil && resp.Result.Code == http.StatusBadRequest {
		writeError(w, http.StatusBadRequest, errors.New(resp.Result.Message))
		return
	}
	out := admissionv1.AdmissionReview{
		TypeMeta: review.TypeMeta,
		Response: &resp.AdmissionResponse,
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		// The connection is gone; nothing more can be written.
		e.log.Error(err, "writing the response failed")
	}
}

// podsResource is the resource of the pod endpoints.
var podsResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// reviewsPods reports whether the endpoint reviews pods (ForResource), whose
// reviews it decodes with their pod in one pass.
func (e *Endpoint) reviewsPods() bool {
	return e.resource != nil && *e.resource == podsResource
}

// readReview reads the request's body into buf and returns the review
// decoded from it, or the HTTP status and reason to refuse the request
// with. The review's raw objects (the pod, its old version, the options)
// are slices of buf, not copies: they are valid until buf is reused. With
// pods, the object is also decoded as a pod in the same pass when it is
// one (pod is nil otherwise).
func readReview(w http.ResponseWriter, r *http.Request, maxBody int64, buf *bytes.Buffer, pods bool) (
	review *admissionv1.AdmissionReview, pod *rawObject, code int, err error) {
	if r.Method != http.MethodPost {
		return nil, nil, http.StatusMethodNotAllowed, fmt.Errorf("method %s: an AdmissionReview is POSTed", r.Method)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, nil, http.StatusUnsupportedMediaType,
			fmt.Errorf("content type %q: an AdmissionReview is application/json", r.Header.Get("Content-Type"))
	}
	if n := r.ContentLength; n > maxBody {
		return nil, nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", maxBody)
	} else if n > 0 {
		buf.Grow(int(n))
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBody))
	body := buf.Bytes()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", maxBody)
	case err != nil:
		return nil, nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
	case len(body) == 0:
		return nil, nil, http.StatusBadRequest, errors.New("empty request body: expected an AdmissionReview")
	}
	ok := false
	if pods {
		review, pod, ok = decodeReviewWithPod(body)
	}
	if !ok {
		review = &admissionv1.AdmissionReview{}
		// Case-sensitive, as the apiserver decodes: "Request" is not
		// "request". The object stays raw here (a RawExtension); the
		// handler decodes it.
		if err := jsonv2.Unmarshal(body, review, reviewDecodeOptions); err != nil {
			return nil, nil, http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)
		}
	}
	want := admissionv1.SchemeGroupVersion.String()
	switch {
	case review.APIVersion != want || review.Kind != "AdmissionReview":
		return nil, nil, http.StatusBadRequest, fmt.Errorf("expected a %s AdmissionReview, got apiVersion %q, kind %q",
			want, review.APIVersion, review.Kind)
	case review.Request == nil:
		return nil, nil, http.StatusBadRequest, errors.New("the AdmissionReview has no request")
	case review.Request.UID == "":
		return nil, nil, http.StatusBadRequest, errors.New("the AdmissionReview's request has no uid")
	}
	return review, pod, 0, nil
}

// checkShape refuses a request the API server could not have sent to this
// endpoint; every decoded review passes when no resource or shape is set.
func (e *Endpoint) checkShape(req *admissionv1.AdmissionRequest) error {
	if e.shape != nil {
		return shapeError(e.shape(req))
	}
	if e.resource == nil {
		return nil
	}
	var problems []string
	if req.Resource != *e.resource {
		problems = append(problems, fmt.Sprintf("resource %s, want %s", gvrString(req.Resource), gvrString(*e.resource)))
	}
	if req.RequestKind == nil || req.RequestResource == nil {
		problems = append(problems, "no requestKind or requestResource")
	}
	if req.Operation == "" {
		problems = append(problems, "no operation")
	}
	if e.namespaced && req.Namespace == "" {
		problems = append(problems, "no namespace")
	}
	return shapeError(problems)
}

func shapeError(problems []string) error {
	if len(problems) > 0 {
		return fmt.Errorf("the AdmissionReview's request is not one the API server sends to this endpoint: %s",
			strings.Join(problems, "; "))
	}
	return nil
}

func gvrString(r metav1.GroupVersionResource) string {
	if r.Group == "" {
		return r.Version + "/" + r.Resource
	}
	return r.Group + "/" + r.Version + "/" + r.Resource
}

// bodies holds request body buffers between requests: every pod created in
// the cluster sends one, and reading each into a new, repeatedly grown
// slice was a good part of the garbage the collector had to chase. A
// decoded review's raw objects are slices of its body, so a body returns
// here only when its request has been answered; a handler must not keep
// a request's raw object (admission.Request's Object, OldObject, Options)
// beyond its Handle, and none does: each decodes what it reads into
// memory of its own.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody keeps a rare large body from staying in the pool.
const maxPooledBody = 256 << 10

func putBody(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		b.Reset()
		bodies.Put(b)
	}
}

// writeError answers with code and the reason on one line.
func writeError(w http.ResponseWriter, code int, err error) {
	http.Error(w, oneLine(err.Error()), code)
}

func oneLine(s string) string { return oneLineN(s, maxReasonLen) }

// oneLineN folds s onto one line of at most n bytes (plus an ellipsis).
func oneLineN(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}
