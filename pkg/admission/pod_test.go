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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

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
			wantMsg:    engine.SkipUpToDate,
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
			name:       "ReplicaSet lookup fails, failurePolicy Ignore -> admitted unpatched, counted as errored",
			sources:    lookupFails,
			req:        makeRequest().Pod(webPod().Obj()).Obj(),
			wantCode:   http.StatusOK,
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
			h := &PodMutator{Sources: staticSources(src), Config: testEngineConfig, Metrics: m}
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

	h := &PodMutator{Sources: staticSources(shopSources()), Config: testEngineConfig}
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
		// wantAuditAnnotations are the annotations the API server writes
		// into the audit event (prefixed with the webhook's name).
		wantAuditAnnotations map[string]string
	}{
		{
			name:       "unsatisfiable pod, no policy action, default Deny -> denied with the numbers",
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(pod).Obj(),
			wantCode:   http.StatusForbidden,
			wantMsg:    unsatisfiable.Message,
			wantResult: ResultDenied,
			wantDenial: DenialUnsatisfiable,
			wantChecks: 1, // one check, whose result carries the message
		},
		{
			name:         "unsatisfiable pod under a Warn policy -> allowed with the numbers as a warning",
			sources:      withPolicy(warnPolicy),
			checker:      &fakeChecker{result: unsatisfiable},
			req:          makeRequest().Pod(pod).Obj(),
			wantCode:     http.StatusOK,
			wantWarnings: []string{unsatisfiable.Message},
			wantResult:   ResultWarned,
			wantChecks:   1,
		},
		{
			name:                 "unsatisfiable pod under an Audit policy -> allowed silently, audit counted, the numbers in the audit log",
			sources:              withPolicy(auditPolicy),
			checker:              &fakeChecker{result: unsatisfiable},
			req:                  makeRequest().Pod(pod).Obj(),
			wantCode:             http.StatusOK,
			wantResult:           ResultAudited,
			wantChecks:           1,
			wantAudits:           1,
			wantAuditAnnotations: map[string]string{AuditAnnotationUnsatisfiable: unsatisfiable.Message},
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
			name:     "checker fails, failurePolicy Ignore -> admitted with a warning that it was not checked",
			checker:  &fakeChecker{err: errors.New("index corrupted")},
			req:      makeRequest().Pod(pod).Obj(),
			wantCode: http.StatusOK,
			wantWarnings: []string{fmt.Sprintf(WarningFault, whatValidate,
				"checking the spread constraints: index corrupted")},
			wantResult: ResultErrored,
			wantChecks: 1,
		},
		{
			name:     "policy lookup fails for an unsatisfiable pod, failurePolicy Ignore -> admitted with a warning, never refused",
			sources:  &fakeSources{FakeSources: spreadtest.Sources(), policyErr: errors.New("etcd timeout")},
			checker:  &fakeChecker{result: unsatisfiable},
			req:      makeRequest().Pod(pod).Obj(),
			wantCode: http.StatusOK,
			wantWarnings: []string{fmt.Sprintf(WarningFault, whatValidate,
				`resolving the policy: listing the SpreadPolicies of namespace "shop": etcd timeout`)},
			wantResult: ResultErrored,
			wantChecks: 1,
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
			wantChecks: 1,
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
				Sources: staticSources(src), Checker: tt.checker, Config: testEngineConfig,
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
			if diff := cmp.Diff(tt.wantAuditAnnotations, resp.AuditAnnotations); diff != "" {
				t.Errorf("audit annotations (-want +got):\n%s", diff)
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
		Sources: staticSources(shopSources()), Checker: snap, Config: testEngineConfig,
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

// benchPod is a Deployment's pod of about 8 KiB once encoded, the size the
// apiserver sends for a typical workload: two containers with environment,
// probes and mounts, projected and ConfigMap volumes, and the managedFields
// the apiserver has added by the time the webhook sees the pod.
func benchPod(tb testing.TB) *v1.Pod {
	tb.Helper()
	pod := webPod().Label("pod-template-hash", "7d9f8c6b5").Label("app.kubernetes.io/version", "1.42.0").
		Annotation("kubectl.kubernetes.io/restartedAt", "2026-01-02T03:04:05Z").
		Annotation("prometheus.io/scrape", "true").Obj()
	pod.GenerateName = "web-7d-"
	var env []v1.EnvVar
	for i := range 24 {
		env = append(env, v1.EnvVar{Name: fmt.Sprintf("WEB_SETTING_%02d", i), Value: fmt.Sprintf("value-of-setting-%02d", i)})
	}
	env = append(env, v1.EnvVar{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	container := func(name, image string) v1.Container {
		return v1.Container{
			Name: name, Image: image, Args: []string{"--port=8080", "--log-format=json"},
			Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			Env:   env,
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("512Mi")},
			},
			VolumeMounts: []v1.VolumeMount{
				{Name: "config", MountPath: "/etc/web", ReadOnly: true},
				{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
			},
			LivenessProbe: probe, ReadinessProbe: probe,
			TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile,
			ImagePullPolicy: v1.PullIfNotPresent,
		}
	}
	pod.Spec.InitContainers = []v1.Container{container("migrate", "registry.example.com/shop/migrate:1.42.0")}
	pod.Spec.InitContainers[0].LivenessProbe, pod.Spec.InitContainers[0].ReadinessProbe = nil, nil
	pod.Spec.Containers = []v1.Container{container("web", "registry.example.com/shop/web:1.42.0"),
		container("sidecar", "registry.example.com/shop/sidecar:3.1.4")}
	expiry := int64(3607)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "web-config"}}}},
		{Name: "kube-api-access-x7k2p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}},
	}
	pod.Spec.ServiceAccountName = "web"
	pod.Spec.Tolerations = []v1.Toleration{
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},` +
			`"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"\"}":{}}},"f:spec":{"f:containers":` +
			`{"k:{\"name\":\"web\"}":{".":{},"f:args":{},"f:env":{".":{}},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{},` +
			`"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{},"f:volumeMounts":{}},"k:{\"name\":\"sidecar\"}":{".":{},` +
			`"f:image":{},"f:name":{}}},"f:serviceAccountName":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{}}}}`),
	}}
	if size := len(mustJSON(pod)); size < 7<<10 || size > 9<<10 {
		tb.Fatalf("test setup: the pod is %d bytes, want about 8 KiB", size)
	}
	return pod
}

func BenchmarkPodMutatorHandle(b *testing.B) {
	b.Run("pod=8KiB", func(b *testing.B) {
		req := makeRequest().Pod(benchPod(b)).Obj()
		h := &PodMutator{Sources: staticSources(shopSources()), Config: testEngineConfig}
		b.ReportAllocs()
		for b.Loop() {
			resp := h.Handle(b.Context(), req)
			if err := resp.Complete(req); err != nil || len(resp.Patch) == 0 {
				b.Fatalf("want a patch, got allowed=%v result=%v err=%v", resp.Allowed, resp.Result, err)
			}
		}
	})
}

func BenchmarkPodValidatorHandle(b *testing.B) {
	b.Run("pod=8KiB", func(b *testing.B) {
		hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
		pod := benchPod(b)
		pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{hard}
		req := makeRequest().Pod(pod).Obj()
		// The check itself is measured by pkg/spread's benchmarks; a fixed
		// answer leaves the handler's own cost.
		h := &PodValidator{Sources: staticSources(shopSources()), Config: testEngineConfig,
			Checker: &fakeChecker{result: &spread.Result{Verdict: spread.VerdictFeasible, FeasibleCount: 1}},
			Synced:  func() bool { return true }}
		b.ReportAllocs()
		for b.Loop() {
			resp := h.Handle(b.Context(), req)
			if err := resp.Complete(req); err != nil || !resp.Allowed {
				b.Fatalf("want an allowance, got allowed=%v result=%v err=%v", resp.Allowed, resp.Result, err)
			}
		}
	})
}

// BenchmarkUnmarshalPodBaseline is the floor for both handlers: one decode
// of the same pod into its Go type, nothing else.
func BenchmarkUnmarshalPodBaseline(b *testing.B) {
	b.Run("pod=8KiB", func(b *testing.B) {
		req := makeRequest().Pod(benchPod(b)).Obj()
		b.ReportAllocs()
		for b.Loop() {
			pod := &v1.Pod{}
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, pod); err != nil {
				b.Fatal(err)
			}
		}
	})
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
			h := &PodMutator{Sources: staticSources(shopSources()), Config: testEngineConfig}
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
			for _, p := range resp.Patches {
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

			patch := mutationPatch(shape, mutated)
			got := applyPatch(t, req.Object.Raw, mustJSON(patch))
			if diff := diffJSON(t, oracleStored(t, req.Object.Raw, decoded, mutated), got); diff != "" {
				t.Errorf("stored object (-want +got):\n%s", diff)
			}
			var ops []string
			for _, p := range patch {
				ops = append(ops, p.Operation+" "+p.Path)
			}
			if diff := cmp.Diff(tt.wantOps, ops); diff != "" {
				t.Errorf("patch operations (-want +got):\n%s", diff)
			}
		})
	}
}

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
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req.Obj()
			pod, shape, err := decodePod(req)
			want, oracleErr := oracleDecodePod(req)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one starting with %q", err, tt.wantErr)
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
			if diff := cmp.Diff(tt.wantShape, shape, cmp.AllowUnexported(rawShape{})); diff != "" {
				t.Errorf("shape (-want +got):\n%s", diff)
			}
		})
	}
}
