package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// fuzzCluster has zones a and b with 3 web pods each and zone c's only node
// cordoned: a web pod whose hard zone constraint ignores taints is denied.
func fuzzCluster() spread.Snapshot {
	s := spread.Snapshot{Nodes: []*v1.Node{
		spreadtest.MakeNode().Name("a1").Zone("zone-a").Obj(),
		spreadtest.MakeNode().Name("b1").Zone("zone-b").Obj(),
		spreadtest.MakeNode().Name("c1").Zone("zone-c").Cordoned().Obj(),
	}}
	for i, n := range []string{"a1", "a1", "a1", "b1", "b1", "b1"} {
		s.Pods = append(s.Pods, webPod().Name(fmt.Sprintf("running-%d", i)).Node(n).Obj())
	}
	return s
}

// oracleReview decodes body the way the apiserver's own codecs would, or
// returns nil when they would not decode it.
func oracleReview(body []byte) *admissionv1.AdmissionReview {
	scheme := runtime.NewScheme()
	if err := admissionv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	review := &admissionv1.AdmissionReview{}
	obj, gvk, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode(body, nil, review)
	if err != nil || obj != review || gvk.GroupVersion() != admissionv1.SchemeGroupVersion || review.Request == nil {
		return nil
	}
	return review
}

// oracleDenies reports whether a correct decode of body, reviewed by the
// engine, denies the pod.
func oracleDenies(body []byte, src engine.Sources, checker spread.Checker) bool {
	review := oracleReview(body)
	if review == nil {
		return false
	}
	req := review.Request
	if req.Operation != admissionv1.Create || req.SubResource != "" || req.Kind.Group != "" ||
		req.Kind.Version != "v1" || req.Kind.Kind != "Pod" {
		return false
	}
	pod := &v1.Pod{}
	if _, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(req.Object.Raw, nil, pod); err != nil {
		return false
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	v, err := engine.Validate(pod, src, checker, testEngineConfig, false)
	return err == nil && !v.Allowed
}

// sentRequest decodes body as readReview does, or returns nil.
func sentRequest(body []byte) *admission.Request {
	review := &admissionv1.AdmissionReview{}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(body, review) != nil || review.Request == nil {
		return nil
	}
	return &admission.Request{AdmissionRequest: *review.Request}
}

// hasDuplicateKeys reports whether an object in the JSON document b names a
// member twice, or whether b is not JSON. Decoders disagree on such objects
// (the last member wins, or a null second member is ignored), and the
// apiserver never sends one.
func hasDuplicateKeys(b []byte) bool {
	type object struct {
		keys    map[string]bool
		wantKey bool
	}
	var stack []*object // nil entries are arrays
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return len(stack) > 0 // cut off inside an object or a list
		}
		if err != nil {
			return true
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if key, ok := tok.(string); ok && top != nil && top.wantKey {
			if top.keys[key] {
				return true
			}
			top.keys[key] = true
			top.wantKey = false
			continue
		}
		if top != nil {
			top.wantKey = true // the value of a member: a key comes next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, nil)
		}
	}
}

// checkReviewDecode fails when readReview's decoder refuses a review that
// sigs.k8s.io/json (the apiserver's) decodes, or decodes it differently.
func checkReviewDecode(t *testing.T, body []byte) {
	t.Helper()
	want := &admissionv1.AdmissionReview{}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(body, want) != nil || hasDuplicateKeys(body) {
		return
	}
	got := &admissionv1.AdmissionReview{}
	if err := jsonv2.Unmarshal(body, got, reviewDecodeOptions); err != nil {
		t.Fatalf("readReview's decoder refuses a review sigs.k8s.io/json decodes: %v: %q", err, body)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("review (-sigs.k8s.io/json +readReview's decoder):\n%s\nbody %q", diff, body)
	}
}

// checkOnePassDecode fails when a pod endpoint's one-pass decode of a
// review and its pod (decodeReviewWithPod) differs in anything from
// decoding the review, then the pod.
func checkOnePassDecode(t *testing.T, body []byte) {
	t.Helper()
	got, decoded, ok := decodeReviewWithPod(body)
	if !ok {
		return // the endpoint decodes it the other way
	}
	want := &admissionv1.AdmissionReview{}
	if err := jsonv2.Unmarshal(body, want, reviewDecodeOptions); err != nil {
		t.Fatalf("decoded with its pod, refused alone: %v: %q", err, body)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("review (-decoded alone +decoded with its pod):\n%s\nbody %q", diff, body)
	}
	if decoded == nil {
		return
	}
	req := admission.Request{AdmissionRequest: *got.Request}
	wantPod, wantShape, wantErr := decodePod(req)
	gotPod, gotShape, gotErr := decodePod(withDecodedPod(req, decoded))
	if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
		t.Fatalf("decoding the pod: %v alone, %v with its review: %q", wantErr, gotErr, body)
	}
	if diff := cmp.Diff(wantPod, gotPod); diff != "" {
		t.Fatalf("pod (-decoded alone +decoded with its review):\n%s\nbody %q", diff, body)
	}
	if wantShape != gotShape {
		t.Fatalf("shape %+v alone, %+v with its review: %q", wantShape, gotShape, body)
	}
}

// checkDecode fails when decodePod refuses a pod that controller-runtime's
// decoder accepts, or decodes it differently.
func checkDecode(t *testing.T, req *admission.Request) {
	t.Helper()
	if req == nil || req.Kind != podKind || hasDuplicateKeys(req.Object.Raw) {
		return
	}
	want, wantErr := oracleDecodePod(*req)
	got, _, err := decodePod(*req)
	switch {
	case wantErr != nil:
		// The old decoder also refused an object whose kind it read in
		// another case ("KIND"); the apiserver reads kinds case-sensitively.
		return
	case err != nil && (want.APIVersion == "" || want.APIVersion == "v1") && (want.Kind == "" || want.Kind == "Pod"):
		t.Fatalf("decodePod refuses a pod controller-runtime's decoder accepts: %v: %q", err, req.Object.Raw)
	case err != nil:
		// The old decoder read a v1 Pod from members named in another case
		// ("ApiVersion"), then decoded apiVersion or kind as something else.
		return
	}
	if diff := cmp.Diff(decodedParts(want), got); diff != "" {
		t.Fatalf("pod (-controller-runtime's decoder +decodePod):\n%s\nobject %q", diff, req.Object.Raw)
	}
}

// checkPatch fails when the mutating endpoint's answer, applied to the sent
// object, stores anything else than the old merge of the whole mutated pod.
func checkPatch(t *testing.T, req *admission.Request, resp *admissionv1.AdmissionResponse, src engine.Sources) {
	t.Helper()
	if req == nil {
		t.Fatalf("the mutating endpoint answered a body readReview refuses")
	}
	raw := req.Object.Raw
	if notPodCreate(*req) != "" {
		if len(resp.Patch) > 0 {
			t.Fatalf("patched a request that is not the CREATE of a pod: %s", resp.Patch)
		}
		return
	}
	if hasDuplicateKeys(raw) {
		return
	}
	decoded, err := oracleDecodePod(*req)
	if err != nil {
		return // see checkDecode
	}
	want, got := storedBothWays(t, raw, decoded, resp, src)
	if diff := diffJSON(t, want, got); diff != "" {
		t.Fatalf("stored object (-old merge of the whole pod +patch):\n%s\nobject %q", diff, raw)
	}
}

// FuzzPodEndpoints sends arbitrary bodies to the pod endpoints. Whatever the
// body: no panic; the answer is a well-formed AdmissionReview for the same
// uid, or a 4xx with a one-line reason; the validating endpoint never allows
// a pod that a correct decode of the same body would deny; the pod is
// decoded as controller-runtime's decoder did; and the mutating endpoint's
// patch stores exactly what the merge of the whole mutated pod stored.
func FuzzPodEndpoints(f *testing.F) {
	hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").
		NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()
	for _, req := range []*RequestWrapper{
		makeRequest().Pod(webPod().SpreadConstraint(hard).Obj()),                          // denied
		makeRequest().Pod(webPod().Obj()),                                                 // mutated, allowed
		makeRequest().Pod(webPod().Namespace("kube-system").SpreadConstraint(hard).Obj()), // excluded
		makeRequest().Operation(admissionv1.Update).Pod(webPod().SpreadConstraint(hard).Obj()),
		makeRequest().Pod(webPod().Obj()).SubResource("binding"),
	} {
		f.Add(reviewBody(req.Obj()))
	}
	for _, c := range mutatorShapeCases() {
		f.Add(reviewBody(makeRequest().Pod(webPod().Obj()).Raw(c.raw(f)).Obj()))
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","kind":{"version":"v1","kind":"Pod"},"object":null}}`))
	// An object named twice, the second time null: the first one counts.
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE",` +
		`"kind":{"version":"v1","kind":"Pod"},"object":{"metadata":{"name":"a","labels":{"app":"web"}}},"object":null}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	// Inputs that reach the injected faults of the faulty endpoints.
	for _, owner := range []string{faultyOwner, panicOwner} {
		f.Add(reviewBody(makeRequest().Pod(podOwnedBy(owner).Obj()).Obj()))
	}
	for _, fault := range []string{"error", "panic"} {
		f.Add(reviewBody(makeRequest().Pod(webPod().Label(faultLabel, fault).SpreadConstraint(hard).Obj()).Obj()))
	}

	snap := fuzzCluster()
	src := shopSources()
	validator := NewEndpoint(&PodValidator{
		PodWebhook: PodWebhook{Sources: staticSources(src), Config: testEngineConfig},
		Checker:    snap,
		Synced:     func() bool { return true },
	}, logr.Discard())
	mutator := NewEndpoint(&PodMutator{
		PodWebhook: PodWebhook{Sources: staticSources(src), Config: testEngineConfig},
	},
		logr.Discard())
	// The same handlers under failurePolicy Ignore with faults the input
	// can reach: whatever fails inside, a refusal must be a spread denial.
	faulty := &faultySources{fakeSources: src}
	faultyValidator := NewEndpoint(&PodValidator{
		PodWebhook: PodWebhook{Sources: staticSources(faulty), Config: testEngineConfig},
		Checker:    faultyChecker{snap},
		Synced:     func() bool { return true },
	}, logr.Discard())
	faultyMutator := NewEndpoint(&PodMutator{
		PodWebhook: PodWebhook{Sources: staticSources(faulty), Config: testEngineConfig},
	},
		logr.Discard())

	f.Fuzz(func(t *testing.T, body []byte) {
		checkReviewDecode(t, body)
		checkOnePassDecode(t, body)
		sent := sentRequest(body)
		checkDecode(t, sent)
		for _, e := range []struct {
			name string
			h    http.Handler
		}{{"validate", validator}, {"mutate", mutator}, {"validate-faulty", faultyValidator}, {"mutate-faulty", faultyMutator}} {
			code, out := post(t, e.h, "application/json", bytes.NewReader(body))
			if code != http.StatusOK {
				if code < 400 || code > 499 {
					t.Fatalf("%s: status %d for %q", e.name, code, body)
				}
				if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
					t.Fatalf("%s: reason is not one line: %q", e.name, out)
				}
				continue
			}
			review := &admissionv1.AdmissionReview{}
			if err := json.Unmarshal([]byte(out), review); err != nil || review.Response == nil {
				t.Fatalf("%s: answer is not an AdmissionReview (%v): %q", e.name, err, out)
			}
			if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
				t.Fatalf("%s: answer is apiVersion %q kind %q", e.name, review.APIVersion, review.Kind)
			}
			if sent := oracleReview(body); sent != nil && review.Response.UID != sent.Request.UID {
				t.Fatalf("%s: answer uid %q, request uid %q", e.name, review.Response.UID, sent.Request.UID)
			}
			if !review.Response.Allowed && !isSpreadDenial(review.Response, body, src, snap) {
				t.Fatalf("%s: refused without a spread reason under failurePolicy Ignore: %+v for %q",
					e.name, review.Response.Result, body)
			}
			if e.name == "validate" && review.Response.Allowed && oracleDenies(body, src, snap) {
				t.Fatalf("validate: allowed a pod that a correct decode denies: %q", body)
			}
			if strings.HasPrefix(e.name, "mutate") && review.Response.Allowed && len(review.Response.Patch) > 0 {
				checkPatch(t, sent, review.Response, src)
			}
		}
	})
}

// Fault triggers of the faulty endpoints: a pod owned by the ReplicaSet
// faultyOwner fails its owner lookup, one owned by panicOwner panics in it,
// and a pod labelled faultLabel=error or =panic fails or panics in the check.
const (
	faultyOwner = "faulty"
	panicOwner  = "panicky"
	faultLabel  = "fuzz-fault"
)

// podOwnedBy is a web pod of shop whose controller is the ReplicaSet owner.
func podOwnedBy(owner string) *spreadtest.PodWrapper {
	return spreadtest.MakePod().Namespace(shop).Name(owner+"-x1").Label("app", "web").
		ControlledBy("ReplicaSet", "apps/v1", owner)
}

type faultySources struct{ *fakeSources }

func (f *faultySources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	switch name {
	case faultyOwner:
		return nil, errors.New("injected lookup failure")
	case panicOwner:
		panic("injected lookup panic")
	}
	return f.fakeSources.ReplicaSet(namespace, name)
}

type faultyChecker struct{ spread.Checker }

func (f faultyChecker) Check(pod *v1.Pod, opts spread.Options) (*spread.Result, error) {
	switch pod.Labels[faultLabel] {
	case "error":
		return nil, errors.New("injected check failure")
	case "panic":
		panic("injected check panic")
	}
	return f.Checker.Check(pod, opts)
}

// isSpreadDenial reports whether a refusal is a denial for a spread reason:
// a 403 whose message is not a fault's, for a pod that a correct decode
// reviewed by the engine denies.
func isSpreadDenial(resp *admissionv1.AdmissionResponse, body []byte, src engine.Sources, checker spread.Checker) bool {
	return resp.Result != nil && resp.Result.Code == http.StatusForbidden &&
		!strings.Contains(resp.Result.Message, "internal error") && oracleDenies(body, src, checker)
}

func TestHasDuplicateKeys(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want bool
	}{
		{name: "distinct members -> false", doc: `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, want: false},
		{name: "string values equal to member names -> false", doc: `{"a":"a","b":"a","c":["c","c"]}`, want: false},
		{name: "member repeated at the top -> true", doc: `{"spec":{},"spec":null}`, want: true},
		{name: "member repeated after a nested object -> true", doc: `{"a":{"b":{"c":1}},"a":2}`, want: true},
		{name: "member repeated in an object inside a list -> true", doc: `{"a":[1,{"b":1,"b":2}]}`, want: true},
		{name: "not JSON -> true", doc: `{"a":`, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hasDuplicateKeys([]byte(tt.doc)); got != tt.want {
				t.Errorf("hasDuplicateKeys(%s) = %v, want %v", tt.doc, got, tt.want)
			}
		})
	}
}
