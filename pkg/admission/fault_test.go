package admission

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// TestPodEndpointsAnswerFaultsAsTheFailurePolicySays sends each fault
// through the HTTP endpoint, as the API server would, under both failure
// policies.
func TestPodEndpointsAnswerFaultsAsTheFailurePolicySays(t *testing.T) {
	hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
	constrained := makeRequest().Pod(webPod().SpreadConstraint(hard).Obj()).Obj()
	plain := makeRequest().Pod(webPod().Obj()).Obj()
	unsatisfiable := &spread.Result{Verdict: spread.VerdictUnsatisfiable, Message: "zone-c has no schedulable node"}

	ownerFails := shopSources()
	ownerFails.FakeSelectorSources = spreadtest.SelectorSources(webRS).Fail(spreadtest.LookupReplicaSet, errors.New("replicasets.apps is forbidden"))
	policyFails := shopSources()
	policyFails.policyErr = errors.New("etcdserver: request timed out")
	ownerPanics := &faultySources{fakeSources: shopSources()}

	type fault struct {
		name    string
		handler func(admissionregistrationv1.FailurePolicyType, *Metrics) admission.Handler
		req     admission.Request
		reason  string
		webhook string
		what    string
		detail  string
	}
	faults := []fault{
		{
			name: "mutate, the ReplicaSet read from the API server fails",
			handler: func(p admissionregistrationv1.FailurePolicyType, m *Metrics) admission.Handler {
				return &PodMutator{
					PodWebhook: PodWebhook{Sources: staticSources(ownerFails), Config: testEngineConfig, FailurePolicy: p, Metrics: m},
				}
			},
			req: plain, reason: FaultLookup, webhook: WebhookMutatePod, what: whatMutate,
			detail: "building the default selector: getting replicaset shop/web-7d: replicasets.apps is forbidden",
		},
		{
			name: "mutate, the policy lookup fails",
			handler: func(p admissionregistrationv1.FailurePolicyType, m *Metrics) admission.Handler {
				return &PodMutator{
					PodWebhook: PodWebhook{Sources: staticSources(policyFails), Config: testEngineConfig, FailurePolicy: p, Metrics: m},
				}
			},
			req: plain, reason: FaultLookup, webhook: WebhookMutatePod, what: whatMutate,
			detail: `resolving the policy: listing the SpreadPolicies of namespace "shop": etcdserver: request timed out`,
		},
		{
			name: "mutate, the owner lookup panics",
			handler: func(p admissionregistrationv1.FailurePolicyType, m *Metrics) admission.Handler {
				return &PodMutator{
					PodWebhook: PodWebhook{Sources: staticSources(ownerPanics), Config: testEngineConfig, FailurePolicy: p, Metrics: m},
				}
			},
			req:    makeRequest().Pod(podOwnedBy(panicOwner).Obj()).Obj(),
			reason: FaultPanic, webhook: WebhookMutatePod, what: whatMutate,
			detail: "panic: injected lookup panic",
		},
		{
			name: "validate, the policy lookup of an unsatisfiable pod fails",
			handler: func(p admissionregistrationv1.FailurePolicyType, m *Metrics) admission.Handler {
				return &PodValidator{
					PodWebhook: PodWebhook{Sources: staticSources(policyFails), Config: testEngineConfig, FailurePolicy: p, Metrics: m},
					Checker:    &fakeChecker{result: unsatisfiable},
					Synced:     func() bool { return true },
				}
			},
			req: constrained, reason: FaultLookup, webhook: WebhookValidatePod, what: whatValidate,
			detail: `resolving the policy: listing the SpreadPolicies of namespace "shop": etcdserver: request timed out`,
		},
		{
			name: "validate, the engine's check fails",
			handler: func(p admissionregistrationv1.FailurePolicyType, m *Metrics) admission.Handler {
				return &PodValidator{
					PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig, FailurePolicy: p, Metrics: m},
					Checker:    &fakeChecker{err: errors.New("index corrupted")},
					Synced:     func() bool { return true },
				}
			},
			req: constrained, reason: FaultEngine, webhook: WebhookValidatePod, what: whatValidate,
			detail: "checking the spread constraints: index corrupted",
		},
		{
			name: "validate, the check panics",
			handler: func(p admissionregistrationv1.FailurePolicyType, m *Metrics) admission.Handler {
				return &PodValidator{
					PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig, FailurePolicy: p, Metrics: m},
					Checker:    faultyChecker{spread.Snapshot{}},
					Synced:     func() bool { return true },
				}
			},
			req:    makeRequest().Pod(webPod().Label(faultLabel, "panic").SpreadConstraint(hard).Obj()).Obj(),
			reason: FaultPanic, webhook: WebhookValidatePod, what: whatValidate,
			detail: "panic: injected check panic",
		},
	}
	for _, f := range faults {
		for _, policy := range []admissionregistrationv1.FailurePolicyType{"", admissionregistrationv1.Ignore, admissionregistrationv1.Fail} {
			name := fmt.Sprintf("%s, failurePolicy %q", f.name, policy)
			t.Run(name, func(t *testing.T) {
				m := newTestMetrics(t)
				got := postReview(t, NewEndpoint(f.handler(policy, m), logr.Discard()), "application/json", reviewBody(f.req)).Response
				if policy == admissionregistrationv1.Fail {
					want := fmt.Sprintf(MessageFault, f.what, f.detail)
					if got.Allowed || got.Result == nil || got.Result.Code != http.StatusInternalServerError || got.Result.Message != want {
						t.Errorf("got allowed=%v result=%+v, want a 500 refusal with %q", got.Allowed, got.Result, want)
					}
					if !strings.Contains(got.Result.Message, "not a problem with this pod") {
						t.Errorf("refusal %q does not say the pod is not at fault", got.Result.Message)
					}
				} else {
					if !got.Allowed || got.Patch != nil {
						t.Errorf("got allowed=%v patch=%s, want the pod admitted unchanged", got.Allowed, got.Patch)
					}
					if diff := cmp.Diff([]string{fmt.Sprintf(WarningFault, f.what, f.detail)}, got.Warnings); diff != "" {
						t.Errorf("warnings (-want +got):\n%s", diff)
					}
				}
				if n := testutil.ToFloat64(m.Errors.WithLabelValues(f.webhook, f.reason)); n != 1 {
					t.Errorf("errors{webhook=%q,reason=%q} = %v, want 1", f.webhook, f.reason, n)
				}
				if n := testutil.CollectAndCount(m.Errors); n != 1 {
					t.Errorf("%d error series, want 1", n)
				}
				if n := testutil.ToFloat64(m.Requests.WithLabelValues(f.webhook, ResultErrored)); n != 1 {
					t.Errorf("requests{result=errored} = %v, want 1", n)
				}
			})
		}
	}
}

func TestFaultWarningQuotesALongErrorOnOneShortLine(t *testing.T) {
	m := newTestMetrics(t)
	long := errors.New("first line\nsecond line " + strings.Repeat("x", 400))
	resp := faults{webhook: WebhookValidatePod, what: whatValidate, metrics: m}.answer(t.Context(), FaultLookup, long)
	if len(resp.Warnings) != 1 {
		t.Fatalf("warnings = %q, want one", resp.Warnings)
	}
	w := resp.Warnings[0]
	if strings.Contains(w, "\n") || !strings.Contains(w, "first line second line xxx") || strings.Count(w, "x") > maxFaultDetail {
		t.Errorf("warning %q: want the error on one line, cut to %d bytes", w, maxFaultDetail)
	}
}
