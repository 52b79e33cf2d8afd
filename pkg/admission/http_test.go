package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// reviewBody wraps req in an admission.k8s.io/v1 AdmissionReview.
func reviewBody(req admission.Request) []byte {
	return mustJSON(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
}

// post sends body to the endpoint and returns the status and body.
func post(t *testing.T, h http.Handler, contentType string, body io.Reader) (int, string) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/validate-v1-pod", body)
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// allowAll allows every request with the message "ok".
var allowAll = admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Allowed("ok")
})

func TestEndpointRefusesMalformedRequests(t *testing.T) {
	valid := makeRequest().Pod(webPod().Obj()).Obj()
	noUID := valid
	noUID.UID = ""
	tests := []struct {
		name        string
		contentType string
		body        []byte
		wantCode    int
		wantReason  string
	}{
		{
			name:        "body that is not JSON -> 400",
			contentType: "application/json",
			body:        []byte("{\"apiVersion\": "),
			wantCode:    http.StatusBadRequest,
			wantReason:  "decoding the AdmissionReview: jsontext: unexpected EOF within \"/apiVersion\" after offset 15",
		},
		{
			name:        "empty body -> 400",
			contentType: "application/json",
			wantCode:    http.StatusBadRequest,
			wantReason:  "empty request body: expected an AdmissionReview",
		},
		{
			name:        "JSON of another kind -> 400 naming it",
			contentType: "application/json",
			body:        []byte(`{"apiVersion":"v1","kind":"Pod"}`),
			wantCode:    http.StatusBadRequest,
			wantReason:  `expected a admission.k8s.io/v1 AdmissionReview, got apiVersion "v1", kind "Pod"`,
		},
		{
			name:        "v1beta1 AdmissionReview -> 400",
			contentType: "application/json",
			body:        bytes.Replace(reviewBody(valid), []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v1beta1"), 1),
			wantCode:    http.StatusBadRequest,
			wantReason:  `got apiVersion "admission.k8s.io/v1beta1"`,
		},
		{
			name:        "AdmissionReview without a request -> 400",
			contentType: "application/json",
			body:        []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
			wantCode:    http.StatusBadRequest,
			wantReason:  "the AdmissionReview has no request",
		},
		{
			name:        "AdmissionReview whose request is spelt Request -> 400, as the apiserver would read it",
			contentType: "application/json",
			body:        bytes.Replace(reviewBody(valid), []byte(`"request"`), []byte(`"Request"`), 1),
			wantCode:    http.StatusBadRequest,
			wantReason:  "the AdmissionReview has no request",
		},
		{
			name:        "AdmissionReview without a uid -> 400",
			contentType: "application/json",
			body:        reviewBody(noUID),
			wantCode:    http.StatusBadRequest,
			wantReason:  "the AdmissionReview's request has no uid",
		},
		{
			name:        "text/plain body -> 415",
			contentType: "text/plain",
			body:        reviewBody(valid),
			wantCode:    http.StatusUnsupportedMediaType,
			wantReason:  `content type "text/plain": an AdmissionReview is application/json`,
		},
		{
			name:        "body over the limit -> 413",
			contentType: "application/json",
			body:        bytes.Repeat([]byte(" "), MaxRequestBytes+1),
			wantCode:    http.StatusRequestEntityTooLarge,
			wantReason:  "request body larger than 7340032 bytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, NewEndpoint(allowAll, logr.Discard()), tt.contentType, bytes.NewReader(tt.body))
			if code != tt.wantCode {
				t.Errorf("status = %d, want %d (body %q)", code, tt.wantCode, body)
			}
			if strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
				t.Errorf("reason is not one line: %q", body)
			}
			if !strings.Contains(body, tt.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", body, tt.wantReason)
			}
		})
	}
}

func TestPodEndpointRefusesWhatTheAPIServerCouldNotHaveSent(t *testing.T) {
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	e := NewEndpoint(allowAll, logr.Discard(), ForResource(pods, true), WithMaxBodyBytes(MaxCreateReviewBytes))
	shaped := func(edit func(*admissionv1.AdmissionRequest)) []byte {
		req := makeRequest().Pod(webPod().Obj()).Obj()
		edit(&req.AdmissionRequest)
		return reviewBody(req)
	}
	tests := []struct {
		name       string
		body       []byte
		wantCode   int
		wantReason string
	}{
		{
			name:     "a pod CREATE as the API server sends it -> answered",
			body:     shaped(func(*admissionv1.AdmissionRequest) {}),
			wantCode: http.StatusOK,
		},
		{
			name: "a review for a Secret -> 400 naming the resource",
			body: shaped(func(r *admissionv1.AdmissionRequest) {
				r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}
			}),
			wantCode:   http.StatusBadRequest,
			wantReason: "resource v1/secrets, want v1/pods",
		},
		{
			name:       "a review without requestKind -> 400",
			body:       shaped(func(r *admissionv1.AdmissionRequest) { r.RequestKind = nil }),
			wantCode:   http.StatusBadRequest,
			wantReason: "no requestKind or requestResource",
		},
		{
			name:       "a pod review without a namespace or an operation -> 400 naming both",
			body:       shaped(func(r *admissionv1.AdmissionRequest) { r.Namespace, r.Operation = "", "" }),
			wantCode:   http.StatusBadRequest,
			wantReason: "no operation; no namespace",
		},
		{
			name:       "a 4 MiB body, larger than any pod CREATE review -> 413",
			body:       bytes.Repeat([]byte(" "), 4<<20),
			wantCode:   http.StatusRequestEntityTooLarge,
			wantReason: fmt.Sprintf("request body larger than %d bytes", MaxCreateReviewBytes),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(t, e, "application/json", bytes.NewReader(tt.body))
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d (body %q)", code, tt.wantCode, body)
			}
			if tt.wantReason != "" && !strings.Contains(body, tt.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", body, tt.wantReason)
			}
		})
	}
}

func TestEndpointRefusesGet(t *testing.T) {
	w := httptest.NewRecorder()
	NewEndpoint(allowAll, logr.Discard()).ServeHTTP(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/mutate-v1-pod", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("status = %d, want 405", w.Code)
	}
}

// postReview posts body to the endpoint and decodes its 200 answer.
func postReview(t *testing.T, h http.Handler, contentType string, body []byte) *admissionv1.AdmissionReview {
	t.Helper()
	code, out := post(t, h, contentType, bytes.NewReader(body))
	return decodeReview(t, code, out)
}

// decodeReview decodes an endpoint's 200 answer.
func decodeReview(t *testing.T, code int, body string) *admissionv1.AdmissionReview {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("status = %d (%q), want 200", code, body)
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v: %q", err, body)
	}
	return out
}

func TestEndpointAnswers(t *testing.T) {
	valid := makeRequest().Pod(webPod().Obj()).Obj()
	tests := []struct {
		name    string
		handler admission.Handler
		want    *admissionv1.AdmissionResponse
	}{
		{
			name:    "handler allows -> AdmissionReview v1 with the request's uid",
			handler: allowAll,
			want: &admissionv1.AdmissionResponse{
				UID: "uid-1", Allowed: true, Result: &metav1.Status{Code: http.StatusOK, Message: "ok"},
			},
		},
		{
			name: "handler denies -> the denial with its message",
			handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
				return admission.Denied("no zone can take the pod")
			}),
			want: &admissionv1.AdmissionResponse{
				UID: "uid-1", Result: &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "no zone can take the pod"},
			},
		},
		{
			name: "handler fails -> 500 in the AdmissionReview, not allowed",
			handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
				return admission.Errored(http.StatusInternalServerError, errors.New("index unavailable"))
			}),
			want: &admissionv1.AdmissionResponse{
				UID: "uid-1", Result: &metav1.Status{Code: http.StatusInternalServerError, Message: "index unavailable"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEndpoint(tt.handler, logr.Discard())
			got := postReview(t, e, "application/json; charset=utf-8", reviewBody(valid))
			if got.APIVersion != "admission.k8s.io/v1" || got.Kind != "AdmissionReview" {
				t.Errorf("answer is apiVersion %q kind %q", got.APIVersion, got.Kind)
			}
			if diff := cmp.Diff(tt.want, got.Response); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEndpointAnswersAPanicWithHTTP500(t *testing.T) {
	// A panic answered inside a 200 with allowed: false would be a refusal
	// whatever the webhook's failurePolicy; an HTTP 500 is a failed call,
	// which the API server treats as the failurePolicy says.
	e := NewEndpoint(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		panic("nil map")
	}), logr.Discard())
	code, body := post(t, e, "application/json", bytes.NewReader(reviewBody(makeRequest().Pod(webPod().Obj()).Obj())))
	if code != http.StatusInternalServerError || body != "internal error: panic: nil map\n" {
		t.Errorf("answer = %d %q, want 500 %q", code, body, "internal error: panic: nil map\n")
	}
}

func TestEndpointAnswersAnUndecodablePodWith400(t *testing.T) {
	// With failurePolicy Ignore the apiserver then admits the pod and the
	// scheduler decides; a 400 inside a 200 would be a denial instead.
	h := &PodValidator{
		PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig},
		Checker:    &fakeChecker{},
		Synced:     func() bool { return true },
	}
	req := makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"many"}}`)).Obj()
	code, body := post(t, NewEndpoint(h, logr.Discard()), "application/json", bytes.NewReader(reviewBody(req)))
	if code != http.StatusBadRequest {
		t.Errorf("status = %d, want 400 (%q)", code, body)
	}
	if !strings.HasPrefix(body, "decoding the pod: ") || strings.Count(body, "\n") != 1 {
		t.Errorf("reason = %q, want one line starting with %q", body, "decoding the pod: ")
	}
}

func TestEndpointKeepsServingAfterBadRequests(t *testing.T) {
	e := NewEndpoint(admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		if req.UID == "boom" {
			panic("boom")
		}
		return admission.Allowed("")
	}), logr.Discard())
	boom := makeRequest().Pod(webPod().Obj()).Obj()
	boom.UID = types.UID("boom")
	post(t, e, "application/json", strings.NewReader("garbage"))
	post(t, e, "application/json", bytes.NewReader(reviewBody(boom)))
	got := postReview(t, e, "application/json", reviewBody(makeRequest().Pod(webPod().Obj()).Obj()))
	if !got.Response.Allowed || got.Response.UID != "uid-1" {
		t.Errorf("after a malformed request and a panic, a valid request got %+v", got.Response)
	}
}

func TestOneLine(t *testing.T) {
	long := strings.Repeat("é", maxReasonLen)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "newlines and tabs -> single spaces", in: "a\n\tb  c\n", want: "a b c"},
		{name: "long reason -> cut at a character boundary with an ellipsis", in: long, want: strings.Repeat("é", maxReasonLen/2) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := oneLine(tt.in); got != tt.want {
				t.Errorf("oneLine() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRawObjectOutlivesTheRequestsItsHandlerWaitsFor serves a review whose
// handler serves a second review before it reads its own: the raw pod is a
// slice of the first body, which must not go back to the pool, and be
// overwritten by the second body, before the first review is answered.
func TestRawObjectOutlivesTheRequestsItsHandlerWaitsFor(t *testing.T) {
	first := makeRequest().Pod(webPod().Name("first").Label("tier", "one").Obj()).Obj()
	second := makeRequest().Pod(webPod().Name("second-with-a-longer-name").Obj()).Obj()
	second.UID = "uid-of-the-second-review"
	var e *Endpoint
	e = NewEndpoint(admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		if req.UID == first.UID {
			// On this goroutine, so on this P: a body put back too early is
			// the one the second review's read gets from the pool.
			postReview(t, e, "application/json", reviewBody(second))
		}
		return admission.Allowed(string(req.Object.Raw))
	}), logr.Discard())
	got := postReview(t, e, "application/json", reviewBody(first))
	if diff := cmp.Diff(string(first.Object.Raw), got.Response.Result.Message); diff != "" {
		t.Errorf("the first review's pod as its handler read it after the second review (-want +got):\n%s", diff)
	}
}

// TestRawObjectIsTheObjectItWasSent decodes reviews whose object is null,
// absent or a pod: a raw object is the member's bytes, and nothing for null,
// as runtime.RawExtension's own decoding has it.
func TestRawObjectIsTheObjectItWasSent(t *testing.T) {
	tests := []struct {
		name, object string
		want         []byte
	}{
		{name: "a pod is its bytes, as sent", object: `{"kind": "Pod" , "metadata":{"name":"a"}}`,
			want: []byte(`{"kind": "Pod" , "metadata":{"name":"a"}}`)},
		{name: "null is no object", object: `null`, want: nil},
		{name: "a missing object is no object", object: ``, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			member := ""
			if tt.object != "" {
				member = `,"object":` + tt.object
			}
			body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"` + member + `}}`
			r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/validate-v1-pod", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			review, _, code, err := readReview(httptest.NewRecorder(), r, MaxRequestBytes, &bytes.Buffer{}, false)
			if err != nil {
				t.Fatalf("readReview: %d %v", code, err)
			}
			if diff := cmp.Diff(tt.want, review.Request.Object.Raw); diff != "" {
				t.Errorf("raw object (-want +got):\n%s", diff)
			}
		})
	}
}

// recordingPodHandler records what the Endpoint hands a pod handler.
type recordingPodHandler struct {
	handled int
	decoded runtime.Object
	logger  bool
}

func (h *recordingPodHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	h.handled++
	h.decoded = req.Object.Object
	_, err := logr.FromContext(ctx)
	h.logger = err == nil
	return admission.Allowed("")
}

func TestEndpointHandsPodHandlersThePodDecodedWithTheReview(t *testing.T) {
	tests := []struct {
		name string
		req  admission.Request
		// notPods serves the endpoint without ForResource(pods).
		notPods    bool
		wantPassed bool
	}{
		{
			name:       "a pod's review -> the pod handed over decoded, as decoding its object alone gives it",
			req:        makeRequest().Pod(webPod().Obj()).Obj(),
			wantPassed: true,
		},
		{
			name:    "an endpoint not of pods -> no pod handed over: its handler decodes what it reviews",
			req:     makeRequest().Pod(webPod().Obj()).Obj(),
			notPods: true,
		},
		{
			name: "a review whose object a pod cannot be decoded from in one pass -> no pod handed over: the handler decodes and refuses it",
			req:  makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"many"}}`)).Obj(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want runtime.Object
			if tt.wantPassed {
				pod := &rawObject{}
				if err := jsonv2.Unmarshal(tt.req.Object.Raw, pod, podDecodeOptions); err != nil {
					t.Fatal(err)
				}
				want = pod
			}
			h := &recordingPodHandler{}
			var opts []EndpointOption
			if !tt.notPods {
				opts = append(opts, ForResource(podsResource, true))
			}
			e := NewEndpoint(h, logr.Discard(), opts...)
			code, body := post(t, e, "application/json", bytes.NewReader(reviewBody(tt.req)))
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal([]byte(body), &out); err != nil || out.Response == nil || out.Response.UID != tt.req.UID {
				t.Fatalf("answer %s (%v): want the request's uid %s", body, err, tt.req.UID)
			}
			if h.handled != 1 || !h.logger {
				t.Errorf("Handle called %d times, with a logger: %v; want once, with the request's logger", h.handled, h.logger)
			}
			if diff := cmp.Diff(want, h.decoded); diff != "" {
				t.Errorf("pod handed over (-want +got):\n%s", diff)
			}
		})
	}
}
