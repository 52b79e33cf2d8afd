package admission

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// dryRun marks req as a dry run.
func dryRun(req admission.Request) admission.Request {
	req.DryRun = new(true)
	return req
}

func TestPodValidatorJudgesGatedPodsWhenTheirLastGateGoes(t *testing.T) {
	unsatisfiable := &spread.Result{Verdict: spread.VerdictUnsatisfiable, Message: "zone-c has no schedulable node; zone-a=1, zone-b=1, zone-c=0"}
	feasible := &spread.Result{Verdict: spread.VerdictFeasible, FeasibleCount: 1}
	hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
	soft := spreadtest.Constraint(1, v1.LabelTopologyZone).ScheduleAnyway().MatchLabel("app", "web").Obj()
	gated := func() *spreadtest.PodWrapper {
		return webPod().SpreadConstraint(hard).SchedulingGate("example.com/quota")
	}
	ungated := webPod().SpreadConstraint(hard).Obj()
	update := func(old, cur *v1.Pod) admission.Request {
		return makeRequest().Operation(admissionv1.Update).Pod(cur).OldPod(old).Obj()
	}

	tests := []struct {
		name         string
		result       *spread.Result
		req          admission.Request
		wantWarnings []string
		wantResult   string
		wantChecks   int
		wantEvents   []string
	}{
		{
			name:         "CREATE of a gated pod that no node could take now -> admitted with a warning, not checked",
			result:       unsatisfiable,
			req:          makeRequest().Pod(gated().Obj()).Obj(),
			wantWarnings: []string{engine.GatedWarning},
			wantResult:   ResultSkipped,
		},
		{
			name:       "CREATE of a gated pod with only soft constraints -> admitted silently",
			result:     unsatisfiable,
			req:        makeRequest().Pod(webPod().SpreadConstraint(soft).SchedulingGate("g").Obj()).Obj(),
			wantResult: ResultSkipped,
		},
		{
			name:         "UPDATE removing the last gate of a pod no node can take -> admitted with the numbers as a warning, and an event",
			result:       unsatisfiable,
			req:          update(gated().Obj(), ungated),
			wantWarnings: []string{unsatisfiable.Message},
			wantResult:   ResultWarned,
			wantChecks:   1,
			wantEvents:   []string{"Warning SpreadUnsatisfiable " + unsatisfiable.Message},
		},
		{
			name:         "dry-run UPDATE removing the last gate of a pod no node can take -> the warning, but no event",
			result:       unsatisfiable,
			req:          dryRun(update(gated().Obj(), ungated)),
			wantWarnings: []string{unsatisfiable.Message},
			wantResult:   ResultWarned,
			wantChecks:   1,
		},
		{
			name:       "UPDATE removing the last gate of a pod that fits -> admitted silently",
			result:     feasible,
			req:        update(gated().Obj(), ungated),
			wantResult: ResultAllowed,
			wantChecks: 1,
		},
		{
			name:       "UPDATE removing one of two gates -> not checked",
			result:     unsatisfiable,
			req:        update(gated().SchedulingGate("second").Obj(), gated().Obj()),
			wantResult: ResultSkipped,
		},
		{
			name:       "UPDATE of a pod that never had gates -> not checked",
			result:     unsatisfiable,
			req:        update(ungated, ungated),
			wantResult: ResultSkipped,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestMetrics(t)
			checker := &fakeChecker{result: tt.result}
			rec := events.NewFakeRecorder(10)
			h := &PodValidator{
				PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig, Metrics: m},
				Checker:    checker,
				Synced:     func() bool { return true },
				Recorder:   rec,
			}
			resp := h.Handle(t.Context(), tt.req)
			if !resp.Allowed || resp.Result.Code != http.StatusOK {
				t.Fatalf("allowed = %v, code %d (%s): a gated pod is never refused", resp.Allowed, resp.Result.Code, resp.Result.Message)
			}
			if diff := cmp.Diff(tt.wantWarnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.Requests.WithLabelValues(WebhookValidatePod, tt.wantResult)); got != 1 {
				t.Errorf("requests{result=%q} = %v, want 1", tt.wantResult, got)
			}
			if checker.calls != tt.wantChecks {
				t.Errorf("checks = %d, want %d", checker.calls, tt.wantChecks)
			}
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tt.wantEvents, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
