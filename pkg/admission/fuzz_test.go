package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

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

// FuzzPodEndpoints sends arbitrary bodies to the pod endpoints. Whatever the
// body: no panic; the answer is a well-formed AdmissionReview for the same
// uid, or a 4xx with a one-line reason; and the validating endpoint never
// allows a pod that a correct decode of the same body would deny.
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
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","kind":{"version":"v1","kind":"Pod"},"object":null}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))

	snap := fuzzCluster()
	src := shopSources()
	validator := NewEndpoint(&PodValidator{Decoder: testDecoder, Sources: staticSources(src), Checker: snap,
		Config: testEngineConfig, Synced: func() bool { return true }}, logr.Discard())
	mutator := NewEndpoint(&PodMutator{Decoder: testDecoder, Sources: staticSources(src), Config: testEngineConfig},
		logr.Discard())

	f.Fuzz(func(t *testing.T, body []byte) {
		for _, e := range []struct {
			name string
			h    http.Handler
		}{{"validate", validator}, {"mutate", mutator}} {
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
			if e.name == "validate" && review.Response.Allowed && oracleDenies(body, src, snap) {
				t.Fatalf("validate: allowed a pod that a correct decode denies: %q", body)
			}
		}
	})
}
