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
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

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
			wantMsg:    engine.SkipExcludedNamespace.String(),
			wantResult: ResultSkipped,
		},
		{
			name:       "pod already bound to a node -> allowed, not checked",
			checker:    &fakeChecker{result: unsatisfiable},
			req:        makeRequest().Pod(webPod().SpreadConstraint(hard).Node("n1").Obj()).Obj(),
			wantCode:   http.StatusOK,
			wantMsg:    engine.SkipBound.String(),
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
			sources:  &fakeSources{FakeSelectorSources: spreadtest.SelectorSources(), policyErr: errors.New("etcd timeout")},
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
			sources:    &fakeSources{FakeSelectorSources: spreadtest.SelectorSources(), SliceLister: policy.SliceLister{}},
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
			wantMsg:    engine.SkipExcludedNamespace.String(),
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
			m := newTestMetrics(t)
			h := &PodValidator{
				PodWebhook:        PodWebhook{Sources: sourcesOrShop(tt.sources), Config: testEngineConfig, Metrics: m},
				Checker:           tt.checker,
				Synced:            func() bool { return !tt.unsynced },
				RefuseUntilSynced: tt.refuse,
			}
			resp := handle(t, h, tt.req, tt.wantCode, tt.wantMsg)
			if diff := cmp.Diff(tt.wantWarnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAuditAnnotations, resp.AuditAnnotations); diff != "" {
				t.Errorf("audit annotations (-want +got):\n%s", diff)
			}
			if len(resp.Patches) > 0 || len(resp.Patch) > 0 {
				t.Errorf("a validating answer carries a patch: %v %s", resp.Patches, resp.Patch)
			}
			if tt.checker.calls != tt.wantChecks {
				t.Errorf("checks = %d, want %d", tt.checker.calls, tt.wantChecks)
			}
			if got := testutil.ToFloat64(m.Requests.WithLabelValues(WebhookValidatePod, tt.wantResult)); got != 1 {
				t.Errorf("requests{result=%q} = %v, want 1", tt.wantResult, got)
			}
			if tt.wantDenial != "" {
				ns := tt.req.Namespace
				if got := testutil.ToFloat64(m.Denials.WithLabelValues(tt.wantDenial, ns)); got != 1 {
					t.Errorf("denials{reason=%q,namespace=%q} = %v, want 1", tt.wantDenial, ns, got)
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
		PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig},
		Checker:    snap,
		Synced:     func() bool { return true },
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

func TestPodValidatorAdmitsWhatANewNodeWouldTake(t *testing.T) {
	// The cordoned-zone case of a node-group upgrade: zone-c's only node is
	// cordoned, the constraint counts it (nodeTaintsPolicy Ignore), so the
	// minimum is pinned at 0 and zones a and b are full. A node group in
	// zone-c can add a node, which the autoscaler does once the pod is
	// Pending: the pod is admitted with a warning that says so.
	nodes := []*v1.Node{
		spreadtest.MakeNode().Name("a1").Zone("zone-a").Obj(),
		spreadtest.MakeNode().Name("b1").Zone("zone-b").Obj(),
		spreadtest.MakeNode().Name("c1").Zone("zone-c").Cordoned().Obj(),
	}
	var pods []*v1.Pod
	for i, n := range []string{"a1", "b1"} {
		pods = append(pods, webPod().Name(fmt.Sprintf("running-%d", i)).Node(n).Obj())
	}
	hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").
		NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()
	group := spread.Template{Name: "nodegroup/ng-c/zone-c", Source: "node group ng-c",
		Labels: map[string]string{v1.LabelTopologyZone: "zone-c"}}
	tests := []struct {
		name         string
		templates    []spread.Template
		wantAllowed  bool
		wantWarnings []string
		wantResult   string
		wantNewNodes float64
	}{
		{
			name:        "no node templates -> denied",
			wantAllowed: false,
			wantResult:  ResultDenied,
		},
		{
			name:         "a node group in the cordoned zone -> admitted with a warning naming it",
			templates:    []spread.Template{group},
			wantAllowed:  true,
			wantWarnings: []string{"admitted: no current node fits; a new node from node group ng-c in zone zone-c would"},
			wantResult:   ResultWarned,
			wantNewNodes: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMetrics(t)
			ix := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: pods, Templates: tt.templates})
			h := &PodValidator{
				PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig, Metrics: m},
				Checker:    ix,
				Synced:     func() bool { return true },
			}
			resp := h.Handle(t.Context(), makeRequest().Pod(webPod().SpreadConstraint(hard).Obj()).Obj())
			if resp.Allowed != tt.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%v)", resp.Allowed, tt.wantAllowed, resp.Result)
			}
			if diff := cmp.Diff(tt.wantWarnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.Requests.WithLabelValues(WebhookValidatePod, tt.wantResult)); got != 1 {
				t.Errorf("requests{result=%q} = %v, want 1", tt.wantResult, got)
			}
			if got := testutil.ToFloat64(m.NewNodes.WithLabelValues(shop)); got != tt.wantNewNodes {
				t.Errorf("admitted_for_new_node{namespace=%s} = %v, want %v", shop, got, tt.wantNewNodes)
			}
		})
	}
}
