package admission

import (
	"errors"
	"fmt"
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
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
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
		FakeSources: spreadtest.Sources(webRS),
		SliceLister: policy.SliceLister{
			Namespaces: []*v1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: shop}}},
			Policies:   []*v1alpha1.SpreadPolicy{zonesPolicy},
		},
	}
}

var testEngineConfig = engine.Config{DefaultAction: v1alpha1.ActionDeny, ExcludedNamespaces: []string{"kube-system"}}

func TestPodMutator(t *testing.T) {
	injected := []v1.TopologySpreadConstraint{
		spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").
			NodeTaintsPolicy(v1.NodeInclusionPolicyHonor).Obj(),
	}
	own := spreadtest.Constraint(2, v1.LabelHostname).ScheduleAnyway().MatchLabel("app", "web").Obj()
	lookupFails := shopSources()
	lookupFails.FakeSources = spreadtest.Sources(webRS).Fail(spreadtest.LookupReplicaSet, errors.New("apiserver unreachable"))

	tests := []struct {
		name    string
		sources engine.Sources
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
			wantMsg:    engine.SkipOwnConstraints,
			wantResult: ResultSkipped,
		},
		{
			name:       "pod declaring its own soft constraint -> untouched",
			req:        makeRequest().Pod(webPod().SpreadConstraint(own).Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipOwnConstraints,
			wantResult: ResultSkipped,
		},
		{
			name:       `pod annotated spreadguard.io/skip: "true" -> untouched`,
			req:        makeRequest().Pod(webPod().Annotation(v1alpha1.AnnotationSkip, "true").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipAnnotation,
			wantResult: ResultSkipped,
		},
		{
			name:       "kube-system pod -> untouched",
			req:        makeRequest().Pod(webPod().Namespace("kube-system").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipExcludedNamespace,
			wantResult: ResultSkipped,
		},
		{
			name:       "pod with no owner and no Service -> untouched",
			req:        makeRequest().Pod(spreadtest.MakePod().Namespace(shop).Name("lonely").Label("app", "web").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipNoSelector,
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
			name:       "ReplicaSet lookup fails -> 500, never an unmutated allow",
			sources:    lookupFails,
			req:        makeRequest().Pod(webPod().Obj()).Obj(),
			wantCode:   http.StatusInternalServerError,
			wantMsg:    "apiserver unreachable",
			wantResult: ResultErrored,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.sources
			if src == nil {
				src = shopSources()
			}
			m := newTestMetrics(t)
			h := &PodMutator{Decoder: testDecoder, Sources: staticSources(src), Config: testEngineConfig, Metrics: m}
			resp := h.Handle(t.Context(), tt.req)
			if err := resp.Complete(tt.req); err != nil {
				t.Fatal(err)
			}
			if resp.Result.Code != tt.wantCode {
				t.Fatalf("code = %d (%s), want %d", resp.Result.Code, resp.Result.Message, tt.wantCode)
			}
			if resp.Allowed != (tt.wantCode == http.StatusOK) {
				t.Errorf("allowed = %v with code %d", resp.Allowed, tt.wantCode)
			}
			if !strings.Contains(resp.Result.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", resp.Result.Message, tt.wantMsg)
			}
			if got := len(resp.Patches) > 0; got != tt.wantPatch {
				t.Errorf("patched = %v, want %v (patches %v)", got, tt.wantPatch, resp.Patches)
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

	h := &PodMutator{Decoder: testDecoder, Sources: staticSources(shopSources()), Config: testEngineConfig}
	resp := h.Handle(t.Context(), req)
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("want an allowed patch, got allowed=%v patches=%v result=%v", resp.Allowed, resp.Patches, resp.Result)
	}
	for _, p := range resp.Patches {
		if strings.Contains(p.Path, "futureField") {
			t.Errorf("patch touches a field it does not know: %v", p)
		}
	}
	want := []string{"/metadata/annotations", "/spec/topologySpreadConstraints"}
	var got []string
	for _, p := range resp.Patches {
		got = append(got, p.Path)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patched paths (-want +got):\n%s", diff)
	}
}

func TestPodValidator(t *testing.T) {
	unsatisfiable := &spread.Result{
		Verdict: spread.VerdictUnsatisfiable,
		Message: "spec.topologySpreadConstraints[0] (topology.kubernetes.io/zone, maxSkew 1) cannot be met: zone-a 3, zone-b 3, zone-c 0 (all nodes cordoned); global minimum 0. Uncordon a node in zone-c.",
	}
	feasible := &spread.Result{Verdict: spread.VerdictFeasible, FeasibleCount: 1}
	noCandidates := &spread.Result{Verdict: spread.VerdictNoCandidateNodes}
	warnPolicy := policytest.MakeSpreadPolicy().Namespace(shop).Name("warn-only").Action(v1alpha1.ActionWarn).
		Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()
	auditPolicy := policytest.MakeSpreadPolicy().Namespace(shop).Name("audit-only").Action(v1alpha1.ActionAudit).
		Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()
	withPolicy := func(p *v1alpha1.SpreadPolicy) *fakeSources {
		s := shopSources()
		s.Policies = []*v1alpha1.SpreadPolicy{p}
		return s
	}
	hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
	pod := webPod().SpreadConstraint(hard).Obj()

	tests := []struct {
		name         string
		sources      *fakeSources
		checker      *fakeChecker
		unsynced     bool
		refuse       bool
		req          admission.Request
		wantCode     int32
		wantMsg      string
		wantWarnings []string
		wantResult   string
		wantDenial   string
		wantChecks   int
		wantAudits   float64
	}{
		{
			name:       "unsatisfiable pod, no policy action, default Deny -> denied with the numbers",
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(pod).Obj(),
			wantCode:   http.StatusForbidden,
			wantMsg:    unsatisfiable.Message,
			wantResult: ResultDenied,
			wantDenial: DenialUnsatisfiable,
			wantChecks: 2, // the cheap check, then the explaining one
		},
		{
			name:         "unsatisfiable pod under a Warn policy -> allowed with the numbers as a warning",
			sources:      withPolicy(warnPolicy),
			checker:      &fakeChecker{result: unsatisfiable},
			req:          makeRequest().Pod(pod).Obj(),
			wantCode:     http.StatusOK,
			wantWarnings: []string{unsatisfiable.Message},
			wantResult:   ResultWarned,
			wantChecks:   2,
		},
		{
			name:       "unsatisfiable pod under an Audit policy -> allowed silently, audit counted",
			sources:    withPolicy(auditPolicy),
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(pod).Obj(),
			wantCode:   http.StatusOK,
			wantResult: ResultAudited,
			wantChecks: 2,
			wantAudits: 1,
		},
		{
			name:       "feasible pod -> allowed",
			checker:    &fakeChecker{result: feasible},
			req:        makeRequest().Pod(pod).Obj(),
			wantCode:   http.StatusOK,
			wantResult: ResultAllowed,
			wantChecks: 1,
		},
		{
			name:         "no node passes affinity and taints -> allowed with a warning that it is not a spread problem",
			checker:      &fakeChecker{result: noCandidates},
			req:          makeRequest().Pod(pod).Obj(),
			wantCode:     http.StatusOK,
			wantWarnings: []string{engine.NoCandidateNodesWarning},
			wantResult:   ResultAllowed,
			wantChecks:   1,
		},
		{
			name:       "unsatisfiable kube-system pod -> allowed, not checked",
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(webPod().Namespace("kube-system").SpreadConstraint(hard).Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipExcludedNamespace,
			wantResult: ResultSkipped,
		},
		{
			name:       "pod already bound to a node -> allowed, not checked",
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(webPod().SpreadConstraint(hard).Node("n1").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipBound,
			wantResult: ResultSkipped,
		},
		{
			name:       "UPDATE of an unsatisfiable pod -> allowed, not checked",
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Operation(admissionv1.Update).Pod(pod).Obj(),
			wantCode:   http.StatusOK,
			wantResult: ResultSkipped,
		},
		{
			name:       "checker fails -> 500, never a silent allow",
			checker:    &fakeChecker{err: errors.New("index corrupted")},
			req:        makeRequest().Pod(pod).Obj(),
			wantCode:   http.StatusInternalServerError,
			wantMsg:    "index corrupted",
			wantResult: ResultErrored,
			wantChecks: 1,
		},
		{
			name:       "policy lookup fails for an unsatisfiable pod -> 500, never a silent allow",
			sources:    &fakeSources{FakeSources: spreadtest.Sources(), policyErr: errors.New("etcd timeout")},
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(pod).Obj(),
			wantCode:   http.StatusInternalServerError,
			wantMsg:    "etcd timeout",
			wantResult: ResultErrored,
			wantChecks: 2,
		},
		{
			name:       "unsatisfiable pod in a namespace no policy knows -> the default action, Deny",
			sources:    &fakeSources{FakeSources: spreadtest.Sources(), SliceLister: policy.SliceLister{}},
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(webPod().Namespace("gone").SpreadConstraint(hard).Obj()).Obj(),
			wantCode:   http.StatusForbidden, // a missing namespace is no policy, so the default Deny
			wantMsg:    unsatisfiable.Message,
			wantResult: ResultDenied,
			wantDenial: DenialUnsatisfiable,
			wantChecks: 2,
		},
		{
			name:         "caches not synced -> allowed with a warning, not checked",
			checker:      &fakeChecker{result: unsatisfiable},
			unsynced:     true,
			req:          makeRequest().Pod(pod).Obj(),
			wantCode:     http.StatusOK,
			wantWarnings: []string{WarningNotSynced},
			wantResult:   ResultUnsynced,
		},
		{
			name:       "caches not synced with --refuse-until-synced -> denied",
			checker:    &fakeChecker{result: feasible},
			unsynced:   true,
			refuse:     true,
			req:        makeRequest().Pod(pod).Obj(),
			wantCode:   http.StatusForbidden,
			wantMsg:    MessageNotSynced,
			wantResult: ResultDenied,
			wantDenial: DenialNotSynced,
		},
		{
			name:       "caches not synced with --refuse-until-synced, kube-system pod -> allowed",
			checker:    &fakeChecker{result: feasible},
			unsynced:   true,
			refuse:     true,
			req:        makeRequest().Pod(webPod().Namespace("kube-system").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipExcludedNamespace,
			wantResult: ResultSkipped,
		},
		{
			name:       "object that is not a pod -> 400",
			checker:    &fakeChecker{result: feasible},
			req:        makeRequest().Pod(pod).Raw([]byte(`{"apiVersion":"v1","kind":"Service"}`)).Obj(),
			wantCode:   http.StatusBadRequest,
			wantMsg:    "decoding the pod",
			wantResult: ResultInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.sources
			if src == nil {
				src = shopSources()
			}
			m := newTestMetrics(t)
			h := &PodValidator{
				Decoder: testDecoder, Sources: staticSources(src), Checker: tt.checker, Config: testEngineConfig,
				Synced: func() bool { return !tt.unsynced }, RefuseUntilSynced: tt.refuse, Metrics: m,
			}
			resp := h.Handle(t.Context(), tt.req)
			if err := resp.Complete(tt.req); err != nil {
				t.Fatal(err)
			}
			if resp.Result.Code != tt.wantCode {
				t.Fatalf("code = %d (%s), want %d", resp.Result.Code, resp.Result.Message, tt.wantCode)
			}
			if resp.Allowed != (tt.wantCode == http.StatusOK) {
				t.Errorf("allowed = %v with code %d", resp.Allowed, tt.wantCode)
			}
			if !strings.Contains(resp.Result.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", resp.Result.Message, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.wantWarnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if len(resp.Patches) > 0 {
				t.Errorf("a validating answer carries a patch: %v", resp.Patches)
			}
			if tt.checker.calls != tt.wantChecks {
				t.Errorf("checks = %d, want %d", tt.checker.calls, tt.wantChecks)
			}
			if got := testutil.ToFloat64(m.Requests.WithLabelValues(WebhookValidatePod, tt.wantResult)); got != 1 {
				t.Errorf("requests{result=%q} = %v, want 1", tt.wantResult, got)
			}
			if tt.wantDenial != "" {
				if got := testutil.ToFloat64(m.Denials.WithLabelValues(tt.wantDenial)); got != 1 {
					t.Errorf("denials{reason=%q} = %v, want 1", tt.wantDenial, got)
				}
			} else if got := testutil.CollectAndCount(m.Denials); got != 0 {
				t.Errorf("%d denial series recorded, want none", got)
			}
			if got := testutil.ToFloat64(m.Audits); got != tt.wantAudits {
				t.Errorf("audits = %v, want %v", got, tt.wantAudits)
			}
		})
	}
}

func TestPodValidatorWithTheRealCheck(t *testing.T) {
	// Zones a and b hold 3 matching pods each; zone c's only node is
	// cordoned and tainted, but the pod's constraint ignores taints, so
	// zone c still counts (0) and pins the global minimum at 0.
	nodes := []*v1.Node{
		spreadtest.MakeNode().Name("a1").Zone("zone-a").Obj(),
		spreadtest.MakeNode().Name("b1").Zone("zone-b").Obj(),
		spreadtest.MakeNode().Name("c1").Zone("zone-c").Cordoned().Obj(),
	}
	var pods []*v1.Pod
	for i, n := range []string{"a1", "a1", "a1", "b1", "b1", "b1"} {
		pods = append(pods, webPod().Name(fmt.Sprintf("running-%d", i)).Node(n).Obj())
	}
	hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").
		NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()
	snap := spread.Snapshot{Nodes: nodes, Pods: pods}

	h := &PodValidator{
		Decoder: testDecoder, Sources: staticSources(shopSources()), Checker: snap, Config: testEngineConfig,
		Synced: func() bool { return true },
	}
	req := makeRequest().Pod(webPod().SpreadConstraint(hard).Obj()).Obj()
	resp := h.Handle(t.Context(), req)
	want, err := snap.Check(webPod().SpreadConstraint(hard).Obj(), spread.Options{Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	if want.Verdict != spread.VerdictUnsatisfiable {
		t.Fatalf("test setup: verdict %s, want %s", want.Verdict, spread.VerdictUnsatisfiable)
	}
	if resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("allowed=%v code=%d, want a denial", resp.Allowed, resp.Result.Code)
	}
	if resp.Result.Message != want.Message {
		t.Errorf("message = %q, want the check's %q", resp.Result.Message, want.Message)
	}
	for _, s := range []string{"zone-c", "c1"} {
		if !strings.Contains(resp.Result.Message, s) {
			t.Errorf("message %q does not name %s", resp.Result.Message, s)
		}
	}
}
