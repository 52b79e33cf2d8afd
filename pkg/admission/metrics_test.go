package admission

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestSkippedPodsAreCountedByReason(t *testing.T) {
	tests := []struct {
		name      string
		req       admission.Request
		wantLabel string
	}{
		{
			name: "a DaemonSet's pod that a Service selects -> daemonset",
			req: makeRequest().Pod(spreadtest.MakePod().Namespace(shop).Name("agent-x1").Label("app", "web").
				ControlledBy("DaemonSet", "apps/v1", "agent").NodeAffinityField(metav1.ObjectNameField, v1.NodeSelectorOpIn, "n1").Obj()).Obj(),
			wantLabel: "daemonset",
		},
		{
			name:      "a mirror pod -> mirror",
			req:       makeRequest().Pod(webPod().Annotation(v1.MirrorPodAnnotationKey, "x").Obj()).Obj(),
			wantLabel: "mirror",
		},
		{
			name:      "a pod in kube-system -> excluded_namespace",
			req:       makeRequest().Pod(webPod().Namespace("kube-system").Obj()).Obj(),
			wantLabel: "excluded_namespace",
		},
		{
			name:      "a pods/binding CREATE -> not_create",
			req:       makeRequest().Pod(webPod().Obj()).SubResource("binding").Obj(),
			wantLabel: "not_create",
		},
	}
	for _, tt := range tests {
		t.Run("mutate-pod: "+tt.name, func(t *testing.T) {
			m := newTestMetrics(t)
			h := &PodMutator{
				PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig, Metrics: m},
			}
			if resp := h.Handle(t.Context(), tt.req); !resp.Allowed || len(resp.Patch) > 0 {
				t.Fatalf("allowed = %v, patch %s: want the pod left alone", resp.Allowed, resp.Patch)
			}
			if got := testutil.ToFloat64(m.Skips.WithLabelValues(WebhookMutatePod, tt.wantLabel)); got != 1 {
				t.Errorf("skipped{reason=%q} = %v, want 1", tt.wantLabel, got)
			}
			if got := testutil.CollectAndCount(m.Skips); got != 1 {
				t.Errorf("%d skip series, want 1", got)
			}
		})
	}
}

func TestValidatorCountsSkippedPodsByReason(t *testing.T) {
	hard := spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "web").Obj()
	tests := []struct {
		name      string
		req       admission.Request
		wantLabel string
	}{
		{
			name:      "a pod bound to a node -> bound",
			req:       makeRequest().Pod(webPod().SpreadConstraint(hard).Node("n1").Obj()).Obj(),
			wantLabel: engine.SkipBound.Label(),
		},
		{
			name:      "a pod created with a scheduling gate -> gated",
			req:       makeRequest().Pod(webPod().SpreadConstraint(hard).SchedulingGate("example.com/quota").Obj()).Obj(),
			wantLabel: engine.SkipGated.Label(),
		},
		{
			name:      "an UPDATE that removes no scheduling gate -> not_create",
			req:       makeRequest().Operation(admissionv1.Update).Pod(webPod().SpreadConstraint(hard).Obj()).Obj(),
			wantLabel: LabelNotCreate,
		},
	}
	for _, tt := range tests {
		t.Run("validate-pod: "+tt.name, func(t *testing.T) {
			m := newTestMetrics(t)
			h := &PodValidator{
				PodWebhook: PodWebhook{Sources: staticSources(shopSources()), Config: testEngineConfig, Metrics: m},
				Checker:    &fakeChecker{err: errors.New("a skipped pod is never counted")},
			}
			if resp := h.Handle(t.Context(), tt.req); !resp.Allowed {
				t.Fatalf("refused: %v; want the pod allowed unchecked", resp.Result)
			}
			if got := testutil.ToFloat64(m.Skips.WithLabelValues(WebhookValidatePod, tt.wantLabel)); got != 1 {
				t.Errorf("skipped{reason=%q} = %v, want 1", tt.wantLabel, got)
			}
			if got := testutil.CollectAndCount(m.Skips); got != 1 {
				t.Errorf("%d skip series, want 1", got)
			}
		})
	}
}
