package admission

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestPodMutator(t *testing.T) {
	injected := []v1.TopologySpreadConstraint{
		spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").
			NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj(),
	}
	own := spreadtest.Constraint(2, v1.LabelHostname).ScheduleAnyway().MatchLabel("app", "web").Obj()
	lookupFails := shopSources()
	lookupFails.FakeSelectorSources = spreadtest.SelectorSources(webRS).Fail(spreadtest.LookupReplicaSet, errors.New("apiserver unreachable"))

	tests := []struct {
		name    string
		sources *fakeSources
		req     admission.Request
		// wantCode is the status code of the response; 200 for an allow.
		wantCode int32
		// wantPod is the pod as the apiserver would store it, nil to skip.
		wantPod *v1.Pod
		// wantPatch says whether the response carries a patch.
		wantPatch  bool
		wantMsg    string
		wantResult string
	}{
		{
			name:     "ReplicaSet pod in a namespace with a SpreadPolicy -> constraints with the ReplicaSet's selector and the policy annotation",
			req:      makeRequest().Pod(webPod().Obj()).Obj(),
			wantCode: http.StatusOK,
			wantPod: webPod().Annotation(v1alpha1.AnnotationPolicy, "shop/zones").
				SpreadConstraint(injected[0]).Obj(),
			wantPatch:  true,
			wantResult: ResultPatched,
		},
		{
			name:       "pod already carrying the injected constraints (second pass) -> no patch",
			req:        makeRequest().Pod(webPod().Annotation(v1alpha1.AnnotationPolicy, "shop/zones").SpreadConstraint(injected[0]).Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipUpToDate.String(),
			wantResult: ResultSkipped,
		},
		{
			name: "reinvoked pod whose labels a later webhook changed -> the injected constraints replaced with the current selector",
			req: makeRequest().Pod(webPod().Annotation(v1alpha1.AnnotationPolicy, "shop/zones").SpreadConstraint(
				spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "old").
					NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj()).Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantPod:    webPod().Annotation(v1alpha1.AnnotationPolicy, "shop/zones").SpreadConstraint(injected[0]).Obj(),
			wantPatch:  true,
			wantResult: ResultPatched,
		},
		{
			name:       "pod declaring its own soft constraint -> untouched",
			req:        makeRequest().Pod(webPod().SpreadConstraint(own).Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipOwnConstraints.String(),
			wantResult: ResultSkipped,
		},
		{
			name:       `pod annotated spreadguard.io/skip: "true" -> untouched`,
			req:        makeRequest().Pod(webPod().Annotation(v1alpha1.AnnotationSkip, "true").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipAnnotation.String(),
			wantResult: ResultSkipped,
		},
		{
			name:       "kube-system pod -> untouched",
			req:        makeRequest().Pod(webPod().Namespace("kube-system").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipExcludedNamespace.String(),
			wantResult: ResultSkipped,
		},
		{
			name:       "pod with no owner and no Service -> untouched",
			req:        makeRequest().Pod(spreadtest.MakePod().Namespace(shop).Name("lonely").Label("app", "web").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipNoSelector.String(),
			wantResult: ResultSkipped,
		},
		{
			name:       "UPDATE of a pod -> untouched",
			req:        makeRequest().Operation(admissionv1.Update).Pod(webPod().Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    "only CREATE is reviewed, not UPDATE",
			wantResult: ResultSkipped,
		},
		{
			name:       "CREATE of pods/eviction -> untouched",
			req:        makeRequest().Pod(webPod().Obj()).SubResource("eviction").Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    "subresource eviction is not reviewed",
			wantResult: ResultSkipped,
		},
		{
			name:       "object that is not JSON -> 400",
			req:        makeRequest().Pod(webPod().Obj()).Raw([]byte("{not json")).Obj(),
			wantCode:   http.StatusBadRequest,
			wantMsg:    "decoding the pod",
			wantResult: ResultInvalid,
		},
		{
			name:       "request for a Service -> 400",
			req:        makeRequest().Pod(webPod().Obj()).Kind("", "v1", "Service").Obj(),
			wantCode:   http.StatusBadRequest,
			wantMsg:    "expected a v1 Pod, got v1 Service",
			wantResult: ResultInvalid,
		},
		{
			name:       "ReplicaSet lookup fails, failurePolicy Ignore -> admitted unpatched, counted as errored",
			sources:    lookupFails,
			req:        makeRequest().Pod(webPod().Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantResult: ResultErrored,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMetrics(t)
			h := &PodMutator{
				PodWebhook: PodWebhook{Sources: sourcesOrShop(tt.sources), Config: testEngineConfig, Metrics: m},
			}
			resp := handle(t, h, tt.req, tt.wantCode, tt.wantMsg)
			if got := len(resp.Patch) > 0; got != tt.wantPatch {
				t.Errorf("patched = %v, want %v (patch %s)", got, tt.wantPatch, resp.Patch)
			}
			if tt.wantPod != nil {
				want := tt.wantPod.DeepCopy()
				want.APIVersion, want.Kind = "v1", "Pod"
				if diff := cmp.Diff(want, patchedPod(t, tt.req, resp)); diff != "" {
					t.Errorf("stored pod (-want +got):\n%s", diff)
				}
			}
			if got := testutil.ToFloat64(m.Requests.WithLabelValues(WebhookMutatePod, tt.wantResult)); got != 1 {
				t.Errorf("requests{result=%q} = %v, want 1", tt.wantResult, got)
			}
			wantInjected := 0.0
			if tt.wantPatch {
				wantInjected = 1
			}
			if got := testutil.ToFloat64(m.Injected); got != wantInjected {
				t.Errorf("injected constraints = %v, want %v", got, wantInjected)
			}
		})
	}
}

func TestPodMutatorKeepsFieldsUnknownToItsTypes(t *testing.T) {
	// A newer apiserver may send fields this build's types do not know;
	// the patch must not remove them.
	req := makeRequest().Pod(webPod().Obj()).Obj()
	withFuture := strings.Replace(string(req.Object.Raw), `"spec":{`, `"spec":{"futureField":{"keep":"me"},`, 1)
	if withFuture == string(req.Object.Raw) {
		t.Fatalf("test setup: no spec in %s", req.Object.Raw)
	}
	req.Object.Raw = []byte(withFuture)

	h := &PodMutator{
		PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig},
	}
	resp := h.Handle(t.Context(), req)
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Fatalf("want an allowed patch, got allowed=%v patch=%s result=%v", resp.Allowed, resp.Patch, resp.Result)
	}
	ops := patchOperations(t, resp.Patch)
	for _, p := range ops {
		if strings.Contains(p.Path, "futureField") {
			t.Errorf("patch touches a field it does not know: %v", p)
		}
	}
	want := []string{"/metadata/annotations", "/spec/topologySpreadConstraints"}
	var got []string
	for _, p := range ops {
		got = append(got, p.Path)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patched paths (-want +got):\n%s", diff)
	}
}

// mutatorShapeCase is a web pod's raw object, edited into one of the shapes
// the apiserver may send, and the patch the mutator answers it with.
type mutatorShapeCase struct {
	name string
	// edit is a JSON Patch turning the web pod into this shape.
	edit string
	// wantOps lists the patch's operations as "op path"; none for no patch.
	wantOps []string
	// wantKept is a JSON Patch of tests the stored object must pass.
	wantKept string
}

func mutatorShapeCases() []mutatorShapeCase {
	annotation := "add " + policyAnnotationPath
	return []mutatorShapeCase{
		{
			name:     "pod with annotations -> the policy annotation added beside them, constraints added",
			edit:     `[{"op":"add","path":"/metadata/annotations","value":{"team":"shop","a/b~c":"d"}}]`,
			wantOps:  []string{annotation, "add /spec/topologySpreadConstraints"},
			wantKept: `[{"op":"test","path":"/metadata/annotations/a~1b~0c","value":"d"}]`,
		},
		{
			name:    "pod without annotations -> an annotations map added",
			wantOps: []string{"add /metadata/annotations", "add /spec/topologySpreadConstraints"},
		},
		{
			name:    `pod with "annotations": null -> the null replaced by a map`,
			edit:    `[{"op":"add","path":"/metadata/annotations","value":null}]`,
			wantOps: []string{"add /metadata/annotations", "add /spec/topologySpreadConstraints"},
		},
		{
			name:    `pod with "annotations": {} -> the policy annotation added into it`,
			edit:    `[{"op":"add","path":"/metadata/annotations","value":{}}]`,
			wantOps: []string{annotation, "add /spec/topologySpreadConstraints"},
		},
		{
			name:    "pod annotated with another policy's name -> the annotation replaced",
			edit:    `[{"op":"add","path":"/metadata/annotations","value":{"spreadguard.io/policy":"shop/old"}}]`,
			wantOps: []string{annotation, "add /spec/topologySpreadConstraints"},
		},
		{
			name:    `pod with "topologySpreadConstraints": [] -> the empty list replaced`,
			edit:    `[{"op":"add","path":"/spec/topologySpreadConstraints","value":[]}]`,
			wantOps: []string{"add /metadata/annotations", "add /spec/topologySpreadConstraints"},
		},
		{
			name:    `pod with "topologySpreadConstraints": null -> the null replaced`,
			edit:    `[{"op":"add","path":"/spec/topologySpreadConstraints","value":null}]`,
			wantOps: []string{"add /metadata/annotations", "add /spec/topologySpreadConstraints"},
		},
		{
			name: "pod with fields unknown to these types in metadata, spec and at the top -> all kept",
			edit: `[{"op":"add","path":"/metadata/futureMeta","value":{"keep":["me",1.50]}},` +
				`{"op":"add","path":"/spec/futureField","value":{"keep":"me"}},` +
				`{"op":"add","path":"/spec/containers","value":[{"name":"web","image":"web:1","futureContainerField":true}]},` +
				`{"op":"add","path":"/futureTop","value":12345678901234567890}]`,
			wantOps: []string{"add /metadata/annotations", "add /spec/topologySpreadConstraints"},
			wantKept: `[{"op":"test","path":"/metadata/futureMeta","value":{"keep":["me",1.50]}},` +
				`{"op":"test","path":"/spec/futureField","value":{"keep":"me"}},` +
				`{"op":"test","path":"/spec/containers/0/futureContainerField","value":true},` +
				`{"op":"test","path":"/futureTop","value":12345678901234567890}]`,
		},
		{
			name:    "pod without spec -> a spec holding the constraints added",
			edit:    `[{"op":"remove","path":"/spec"}]`,
			wantOps: []string{"add /metadata/annotations", "add /spec"},
		},
		{
			name:    `pod with "spec": null -> the null replaced by a spec holding the constraints`,
			edit:    `[{"op":"replace","path":"/spec","value":null}]`,
			wantOps: []string{"add /metadata/annotations", "add /spec"},
		},
		{
			name:    "pod without apiVersion and kind -> patched like any other",
			edit:    `[{"op":"remove","path":"/apiVersion"},{"op":"remove","path":"/kind"}]`,
			wantOps: []string{"add /metadata/annotations", "add /spec/topologySpreadConstraints"},
		},
		{
			// Without labels and owner no selector exists; TestMutationPatch
			// covers the patch such a pod would need.
			name: "pod without metadata (no name, generateName, labels nor owner) -> left unchanged",
			edit: `[{"op":"remove","path":"/metadata"}]`,
		},
		{
			name: `pod with "metadata": null -> left unchanged`,
			edit: `[{"op":"replace","path":"/metadata","value":null}]`,
		},
	}
}

// raw returns the web pod's object edited into the case's shape.
func (c mutatorShapeCase) raw(tb testing.TB) []byte {
	tb.Helper()
	raw := makeRequest().Pod(webPod().Obj()).Obj().Object.Raw
	if c.edit == "" {
		return raw
	}
	return applyPatch(tb, raw, []byte(c.edit))
}

func TestPodMutatorPatchStoresWhatTheMergeOfTheWholePodStored(t *testing.T) {
	for _, tt := range mutatorShapeCases() {
		t.Run(tt.name, func(t *testing.T) {
			raw := tt.raw(t)
			req := makeRequest().Pod(webPod().Obj()).Raw(raw).Obj()
			h := &PodMutator{
				PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig},
			}
			resp := h.Handle(t.Context(), req)
			if err := resp.Complete(req); err != nil {
				t.Fatal(err)
			}
			if !resp.Allowed {
				t.Fatalf("not allowed: %v", resp.Result)
			}

			decoded, err := oracleDecodePod(req)
			if err != nil {
				t.Fatalf("the old decoder refuses the pod: %v", err)
			}
			want, got := storedBothWays(t, raw, decoded, &resp.AdmissionResponse, shopSources())
			if diff := diffJSON(t, want, got); diff != "" {
				t.Errorf("stored object (-want +got):\n%s", diff)
			}

			var ops []string
			for _, p := range patchOperations(t, resp.Patch) {
				ops = append(ops, p.Operation+" "+p.Path)
			}
			if diff := cmp.Diff(tt.wantOps, ops); diff != "" {
				t.Errorf("patch operations (-want +got):\n%s", diff)
			}
			if tt.wantKept != "" {
				applyPatch(t, got, []byte(tt.wantKept))
			}
		})
	}
}

func TestMutationPatch(t *testing.T) {
	// engine.Mutate needs labels or an owner, so it never mutates a pod
	// without metadata today; the patch must still be right if it does.
	constraint := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
	tests := []struct {
		name    string
		raw     string
		wantOps []string
	}{
		{
			name:    "object without metadata -> metadata added with the annotation",
			raw:     `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"a","image":"a"}]}}`,
			wantOps: []string{"add /metadata", "add /spec/topologySpreadConstraints"},
		},
		{
			name:    `object with "metadata": null -> the null replaced`,
			raw:     `{"apiVersion":"v1","kind":"Pod","metadata":null,"spec":{}}`,
			wantOps: []string{"add /metadata", "add /spec/topologySpreadConstraints"},
		},
		{
			name:    "empty object -> metadata and spec added",
			raw:     `{}`,
			wantOps: []string{"add /metadata", "add /spec"},
		},
		{
			name:    "object with metadata holding only a field these types do not know -> annotations added beside it",
			raw:     `{"metadata":{"future":1},"spec":null}`,
			wantOps: []string{"add /metadata/annotations", "add /spec"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := makeRequest().Pod(webPod().Obj()).Raw([]byte(tt.raw)).Obj()
			decoded, shape, err := decodePod(req)
			if err != nil {
				t.Fatal(err)
			}
			// What engine.Mutate does to a pod it mutates.
			mutated := decoded.DeepCopy()
			mutated.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{constraint}
			mutated.Annotations = map[string]string{v1alpha1.AnnotationPolicy: "shop/zones"}

			patch, err := mutationPatch(shape, mutated)
			if err != nil {
				t.Fatal(err)
			}
			got := applyPatch(t, req.Object.Raw, patch)
			if diff := diffJSON(t, oracleStored(t, req.Object.Raw, decoded, mutated), got); diff != "" {
				t.Errorf("stored object (-want +got):\n%s", diff)
			}
			var ops []string
			for _, p := range patchOperations(t, patch) {
				ops = append(ops, p.Operation+" "+p.Path)
			}
			if diff := cmp.Diff(tt.wantOps, ops); diff != "" {
				t.Errorf("patch operations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMutationPatchEncodesConstraintsAsEncodingJSON(t *testing.T) {
	tests := []struct {
		name        string
		constraints []v1.TopologySpreadConstraint
	}{
		{
			name: "every optional field set, selector of several labels and expressions",
			constraints: []v1.TopologySpreadConstraint{spreadtest.Constraint(2, v1.LabelTopologyZone).
				MinDomains(3).NodeAffinityPolicy(v1.NodeInclusionPolicyIgnore).NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).
				MatchLabelKeys("pod-template-hash").MatchLabel("tier", "web").MatchLabel("app", "shop").
				MatchExpression("track", metav1.LabelSelectorOpNotIn, "canary", "<beta&>").
				MatchExpression("release", metav1.LabelSelectorOpExists).Obj()},
		},
		{
			name: "a soft constraint with nothing optional, beside one with an empty selector",
			constraints: []v1.TopologySpreadConstraint{
				spreadtest.Constraint(1, v1.LabelHostname).ScheduleAnyway().Obj(),
				spreadtest.Constraint(1, v1.LabelTopologyZone).Selector(&metav1.LabelSelector{}).Obj(),
			},
		},
		{
			name: "empty, not nil, lists and maps -> left out as encoding/json leaves them out",
			constraints: []v1.TopologySpreadConstraint{spreadtest.Constraint(1, v1.LabelTopologyZone).MatchLabelKeys().
				Selector(&metav1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []metav1.LabelSelectorRequirement{}}).Obj()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mutated := webPod().Obj()
			mutated.Spec.TopologySpreadConstraints = tt.constraints
			mutated.Annotations = map[string]string{v1alpha1.AnnotationPolicy: "shop/zones"}
			patch, err := mutationPatch(rawShape{metadata: true, annotations: true, spec: true}, mutated)
			if err != nil {
				t.Fatal(err)
			}
			var ops []struct {
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatalf("decoding the patch %s: %v", patch, err)
			}
			want := map[string]any{
				policyAnnotationPath:              "shop/zones",
				"/spec/topologySpreadConstraints": tt.constraints,
			}
			if len(ops) != len(want) {
				t.Fatalf("got %d operations, want %d: %s", len(ops), len(want), patch)
			}
			for _, op := range ops {
				// As decoded values: encoding/json also escapes <, > and &.
				var wantValue, gotValue any
				if err := json.Unmarshal(mustJSON(want[op.Path]), &wantValue); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(op.Value, &gotValue); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantValue, gotValue); diff != "" {
					t.Errorf("value at %s (-encoding/json +patch):\n%s", op.Path, diff)
				}
			}
		})
	}
}
