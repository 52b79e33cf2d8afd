package admission

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const shop = "shop"

var (
	zonesPolicy = policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").
			Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()
	webRS = spreadtest.MakeReplicaSet().Namespace(shop).Name("web-7d").MatchLabel("app", "web").Obj()
)

// webPod is a pod of the web-7d ReplicaSet in shop.
func webPod() *spreadtest.PodWrapper {
	return spreadtest.MakePod().Namespace(shop).Name("web-7d-x1").Label("app", "web").
		ControlledBy("ReplicaSet", "apps/v1", "web-7d")
}

// shopSources holds the web-7d ReplicaSet, the shop namespace and its zones
// policy.
func shopSources() *fakeSources {
	return &fakeSources{
		FakeSelectorSources: spreadtest.SelectorSources(webRS),
		SliceLister: policy.SliceLister{
			Namespaces: []*v1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: shop}}},
			Policies:   []*v1alpha1.SpreadPolicy{zonesPolicy},
		},
	}
}

// sourcesOrShop serves src to every request, or shopSources where a test
// case names none.
func sourcesOrShop(src *fakeSources) SourcesFunc {
	if src == nil {
		src = shopSources()
	}
	return staticSources(src)
}

var testEngineConfig = engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system"}}

func TestDecodePod(t *testing.T) {
	full := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"shop","labels":{"app":"web"},` +
		`"annotations":{"a":"b"}},"spec":{"containers":[{"name":"web","image":"web:1",` +
		`"resources":{"requests":{"cpu":"250m"}}}],"activeDeadlineSeconds":9007199254740993},"status":{"phase":"Pending"}}`
	tests := []struct {
		name      string
		req       *RequestWrapper
		wantShape rawShape
		// wantErr is the start of the error; "" for a pod.
		wantErr string
	}{
		{
			name:      "pod with metadata, annotations, spec and status -> the decoder's pod without containers, volumes, managedFields and status; every part present",
			req:       makeRequest().Pod(webPod().Obj()).Raw([]byte(full)),
			wantShape: rawShape{metadata: true, annotations: true, spec: true},
		},
		{
			name:      "pod without a namespace -> the request's namespace",
			req:       makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"metadata":{"name":"web-1"},"spec":{}}`)),
			wantShape: rawShape{metadata: true, spec: true},
		},
		{
			name:      `pod with "annotations": {} -> annotations present`,
			req:       makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"metadata":{"annotations":{}},"spec":null}`)),
			wantShape: rawShape{metadata: true, annotations: true},
		},
		{
			name: `pod with "metadata": null and no spec -> nothing present, namespace from the request`,
			req:  makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":null}`)),
		},
		{
			name:    "request for a Service -> refused before decoding",
			req:     makeRequest().Pod(webPod().Obj()).Kind("", "v1", "Service"),
			wantErr: "expected a v1 Pod, got v1 Service",
		},
		{
			name:    "request without an object -> refused",
			req:     makeRequest().Pod(webPod().Obj()).Raw(nil),
			wantErr: "decoding the pod: the request carries no object",
		},
		{
			name:    "object of kind Service -> refused, naming it",
			req:     makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"apiVersion":"v1","kind":"Service","spec":{}}`)),
			wantErr: `decoding the pod: the object is apiVersion "v1", kind "Service", not a v1 Pod`,
		},
		{
			name:    "object of apiVersion apps/v1 -> refused, naming it",
			req:     makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"apiVersion":"apps/v1","metadata":{}}`)),
			wantErr: `decoding the pod: the object is apiVersion "apps/v1", kind "", not a v1 Pod`,
		},
		{
			name:    "object that is a JSON list -> refused",
			req:     makeRequest().Pod(webPod().Obj()).Raw([]byte(`[{"kind":"Pod"}]`)),
			wantErr: "decoding the pod: ",
		},
		{
			name: "containers, volumes and managedFields null -> accepted, left empty",
			req: makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"metadata":{"name":"web-1","managedFields":null},` +
				`"spec":{"containers":null,"volumes":null}}`)),
			wantShape: rawShape{metadata: true, spec: true},
		},
		{
			name:    "object whose volumes are an object -> refused, naming the kind found",
			req:     makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"volumes":{}}}`)),
			wantErr: "decoding the pod: ",
		},
		{
			name:    "object whose containers are a string -> refused",
			req:     makeRequest().Pod(webPod().Obj()).Raw([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"many"}}`)),
			wantErr: "decoding the pod: ",
		},
	}
	for _, tt := range tests {
		for _, way := range []string{"alone", "with its review"} {
			t.Run(tt.name+", decoded "+way, func(t *testing.T) {
				req := tt.req.Obj()
				var pod *v1.Pod
				var shape rawShape
				var err error
				if way == "alone" {
					pod, shape, err = decodePod(req)
				} else {
					pod, shape, err = decodeAsEndpoint(t, req, tt.wantErr == "")
				}
				checkDecodedPod(t, req, tt.wantShape, tt.wantErr, pod, shape, err)
			})
		}
	}
}

// decodeAsEndpoint decodes req as a pod Endpoint does: the review read
// from its body, the pod with it when it can be, then decodePod. With
// wantOnePass the pod must have been decoded with the review.
func decodeAsEndpoint(t *testing.T, req admission.Request, wantOnePass bool) (*v1.Pod, rawShape, error) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mutate-v1-pod", bytes.NewReader(reviewBody(req)))
	r.Header.Set("Content-Type", "application/json")
	review, decoded, code, err := readReview(httptest.NewRecorder(), r, MaxRequestBytes, &bytes.Buffer{}, true)
	if err != nil {
		t.Fatalf("readReview: %d %v", code, err)
	}
	if wantOnePass && decoded == nil {
		t.Fatalf("the pod was not decoded with its review")
	}
	return decodePod(withDecodedPod(admission.Request{AdmissionRequest: *review.Request}, decoded))
}

// checkDecodedPod compares what decodePod returned for req with
// controller-runtime's decoder, the shape and the error wanted.
func checkDecodedPod(t *testing.T, req admission.Request, wantShape rawShape, wantErr string, pod *v1.Pod, shape rawShape, err error) {
	t.Helper()
	want, oracleErr := oracleDecodePod(req)
	if wantErr != "" {
		if err == nil || !strings.HasPrefix(err.Error(), wantErr) {
			t.Fatalf("error = %v, want one starting with %q", err, wantErr)
		}
		if oracleErr == nil && req.Kind == podKind {
			t.Errorf("controller-runtime's decoder accepts what decodePod refuses: %s", req.Object.Raw)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if oracleErr != nil {
		t.Fatalf("test setup: controller-runtime's decoder refuses the pod: %v", oracleErr)
	}
	if diff := cmp.Diff(decodedParts(want), pod); diff != "" {
		t.Errorf("pod (-controller-runtime's decoder +decodePod):\n%s", diff)
	}
	if pod.Namespace == "" {
		t.Errorf("pod has no namespace")
	}
	if diff := cmp.Diff(wantShape, shape, cmp.AllowUnexported(rawShape{})); diff != "" {
		t.Errorf("shape (-want +got):\n%s", diff)
	}
}
