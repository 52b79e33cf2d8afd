package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	gomodulesjsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// testDecoder decodes the policies, and the pods of the oracle.
var testDecoder = admission.NewDecoder(testScheme())

func newTestMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// handle answers req with h as the webhook server does (Handle, then
// Complete) and checks the answer: its status code, that it allows exactly
// when the code is 200, and that its message holds each of wantMsg, in this
// order.
func handle(t *testing.T, h admission.Handler, req admission.Request, wantCode int32, wantMsg ...string) admission.Response {
	t.Helper()
	resp := h.Handle(t.Context(), req)
	if err := resp.Complete(req); err != nil {
		t.Fatal(err)
	}
	if resp.Result.Code != wantCode {
		t.Fatalf("code = %d (%s), want %d", resp.Result.Code, resp.Result.Message, wantCode)
	}
	if resp.Allowed != (wantCode == http.StatusOK) {
		t.Errorf("allowed = %v with code %d", resp.Allowed, wantCode)
	}
	rest := resp.Result.Message
	for _, want := range wantMsg {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("message %q lacks %q (or has it out of order)", resp.Result.Message, want)
		}
		rest = rest[i+len(want):]
	}
	return resp
}

// RequestWrapper builds an admission.Request for tests.
type RequestWrapper struct{ r admissionv1.AdmissionRequest }

// makeRequest starts the CREATE of an object, uid "uid-1".
func makeRequest() *RequestWrapper {
	return &RequestWrapper{r: admissionv1.AdmissionRequest{UID: "uid-1", Operation: admissionv1.Create}}
}

func (w *RequestWrapper) Obj() admission.Request { return admission.Request{AdmissionRequest: w.r} }

func (w *RequestWrapper) Operation(op admissionv1.Operation) *RequestWrapper {
	w.r.Operation = op
	return w
}

func (w *RequestWrapper) SubResource(s string) *RequestWrapper { w.r.SubResource = s; return w }

// Pod sets the object, kind and resource to pod.
func (w *RequestWrapper) Pod(pod *v1.Pod) *RequestWrapper {
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	w.r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	w.r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	w.r.RequestKind, w.r.RequestResource = &w.r.Kind, &w.r.Resource
	w.r.Namespace, w.r.Name = p.Namespace, p.Name
	return w.Raw(mustJSON(p))
}

// OldPod sets the old object, as an UPDATE carries it.
func (w *RequestWrapper) OldPod(pod *v1.Pod) *RequestWrapper {
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	w.r.OldObject = runtime.RawExtension{Raw: mustJSON(p)}
	return w
}

// SpreadPolicy sets the object, kind and resource to p.
func (w *RequestWrapper) SpreadPolicy(p *v1alpha1.SpreadPolicy) *RequestWrapper {
	w.r.Kind = metav1.GroupVersionKind{Group: v1alpha1.GroupName, Version: "v1alpha1", Kind: v1alpha1.KindSpreadPolicy}
	w.r.Resource = metav1.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1alpha1", Resource: "spreadpolicies"}
	w.r.RequestKind, w.r.RequestResource = &w.r.Kind, &w.r.Resource
	w.r.Namespace, w.r.Name = p.Namespace, p.Name
	return w.Raw(mustJSON(p))
}

// ClusterSpreadPolicy sets the object, kind and resource to p.
func (w *RequestWrapper) ClusterSpreadPolicy(p *v1alpha1.ClusterSpreadPolicy) *RequestWrapper {
	w.r.Kind = metav1.GroupVersionKind{Group: v1alpha1.GroupName, Version: "v1alpha1", Kind: v1alpha1.KindClusterSpreadPolicy}
	w.r.Resource = metav1.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1alpha1", Resource: "clusterspreadpolicies"}
	w.r.RequestKind, w.r.RequestResource = &w.r.Kind, &w.r.Resource
	w.r.Name = p.Name
	return w.Raw(mustJSON(p))
}

// Kind overrides the kind of the request.
func (w *RequestWrapper) Kind(group, version, kind string) *RequestWrapper {
	w.r.Kind = metav1.GroupVersionKind{Group: group, Version: version, Kind: kind}
	return w
}

// Resource overrides the resource of the request, which names the endpoint
// the API server sends it to.
func (w *RequestWrapper) Resource(resource string) *RequestWrapper {
	w.r.Resource.Resource = resource
	return w
}

// Raw sets the object's bytes as they are.
func (w *RequestWrapper) Raw(raw []byte) *RequestWrapper {
	w.r.Object = runtime.RawExtension{Raw: raw}
	return w
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// patchedPod applies the response's patch to the request's object and
// decodes the result, as the apiserver does.
func patchedPod(t *testing.T, req admission.Request, resp admission.Response) *v1.Pod {
	t.Helper()
	raw := req.Object.Raw
	if len(resp.Patch) > 0 {
		raw = applyPatch(t, raw, resp.Patch)
	}
	pod := &v1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		t.Fatalf("decoding the patched pod: %v", err)
	}
	return pod
}

// applyPatch applies an encoded JSON Patch to raw, failing where the
// apiserver would refuse it (an add into a parent that is not there).
// patchOperations decodes an encoded JSON Patch into its operations; no
// patch has none.
func patchOperations(t testing.TB, patch []byte) []gomodulesjsonpatch.Operation {
	t.Helper()
	if len(patch) == 0 {
		return nil
	}
	var ops []gomodulesjsonpatch.Operation
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatalf("decoding the patch %s: %v", patch, err)
	}
	return ops
}

func applyPatch(t testing.TB, raw, patch []byte) []byte {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("decoding the patch %s: %v", patch, err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("applying the patch %s to %s: %v", patch, raw, err)
	}
	return out
}

// diffJSON compares two JSON documents as values, so that neither the order
// of members nor spacing counts; it returns "" when they are the same.
func diffJSON(t *testing.T, want, got []byte) string {
	t.Helper()
	decode := func(b []byte) any {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		return v
	}
	return cmp.Diff(decode(want), decode(got))
}

// oracleDecodePod decodes the pod as the handlers did before they parsed
// it once: through controller-runtime's decoder, whose serializer finds the
// kind in a first parse.
func oracleDecodePod(req admission.Request) (*v1.Pod, error) {
	pod := &v1.Pod{}
	if err := testDecoder.Decode(req, pod); err != nil {
		return nil, err
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	return pod, nil
}

// decodedParts is what decodePod keeps of a fully decoded pod: everything
// but the parts podDecodeOptions skips and the status.
func decodedParts(p *v1.Pod) *v1.Pod {
	p = p.DeepCopy()
	p.ManagedFields = nil
	p.Spec.Containers, p.Spec.InitContainers, p.Spec.EphemeralContainers, p.Spec.Volumes = nil, nil, nil, nil
	p.Status = v1.PodStatus{}
	return p
}

// storedBothWays returns what the apiserver stores when the mutator answers
// raw (decoded as the old decoder did) with resp: want through the old merge
// of the whole mutated pod, got through resp's patch.
func storedBothWays(t *testing.T, raw []byte, decoded *v1.Pod, resp *admissionv1.AdmissionResponse, src engine.Sources) (want, got []byte) {
	t.Helper()
	m, err := engine.Mutate(decoded, src, testEngineConfig)
	if err != nil {
		t.Fatalf("the engine fails on a pod the endpoint allowed: %v", err)
	}
	want, got = raw, raw
	if m.Pod != nil {
		want = oracleStored(t, raw, decoded, m.Pod)
	}
	if len(resp.Patch) > 0 {
		if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("patch type = %v, want %s", resp.PatchType, admissionv1.PatchTypeJSONPatch)
		}
		got = applyPatch(t, raw, resp.Patch)
	}
	return want, got
}

// oracleStored returns the object the apiserver stored with the patch the
// mutator used to build: the engine's changes (decoded to mutated) carried
// over to raw by a JSON merge patch of the whole typed pod, then
// PatchResponseFromRaw's patch from raw to that, applied to raw. It depends
// on nothing the engine changes, so any change shows.
func oracleStored(t *testing.T, raw []byte, decoded, mutated *v1.Pod) []byte {
	t.Helper()
	changes, err := jsonpatch.CreateMergePatch(mustJSON(decoded), mustJSON(mutated))
	if err != nil {
		t.Fatalf("diffing the mutated pod: %v", err)
	}
	merged, err := jsonpatch.MergePatch(raw, changes)
	if err != nil {
		t.Fatalf("merging %s into %s: %v", changes, raw, err)
	}
	resp := admission.PatchResponseFromRaw(raw, merged)
	if !resp.Allowed {
		t.Fatalf("PatchResponseFromRaw: %v", resp.Result)
	}
	if len(resp.Patches) == 0 {
		return raw
	}
	return applyPatch(t, raw, mustJSON(resp.Patches))
}

// fakeSources joins the selector lookups of spreadtest and the policy
// lookups of pkg/policy; policyErr makes SpreadPolicies fail.
type fakeSources struct {
	*spreadtest.FakeSelectorSources
	policy.SliceLister
	policyErr error
}

func (f *fakeSources) SpreadPolicies(namespace string) ([]*v1alpha1.SpreadPolicy, error) {
	if f.policyErr != nil {
		return nil, f.policyErr
	}
	return f.SliceLister.SpreadPolicies(namespace)
}

// staticSources hands the same lookups to every request.
func staticSources(s engine.Sources) SourcesFunc {
	return func(context.Context) engine.Sources { return s }
}

// fakeChecker answers every check with result or err, and counts calls.
type fakeChecker struct {
	result *spread.Result
	err    error
	calls  int
}

func (f *fakeChecker) Check(*v1.Pod, spread.Options) (*spread.Result, error) {
	f.calls++
	return f.result, f.err
}

// withDecodedPod is req as a pod Endpoint hands it over: with the pod it
// decoded with the review, when it could.
func withDecodedPod(req admission.Request, pod *rawObject) admission.Request {
	if pod != nil {
		req.Object.Object = pod
	}
	return req
}
