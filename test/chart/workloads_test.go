package chart_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
)

// The workload forecasts only warn, so their configuration must never
// block an apply or a scale, whatever the pod webhooks' failurePolicy.
func TestTheWorkloadForecastWebhookNeverBlocks(t *testing.T) {
	for _, f := range ciFiles {
		t.Run(f.name, func(t *testing.T) {
			r := render(t, ciValues(t, f.file))
			w := find[*validatingConfig](t, r.objects, fullname+"-workloads").Webhooks
			if len(w) != 1 {
				t.Fatalf("%d webhooks, want 1", len(w))
			}
			got := w[0]
			if ptr.Deref(got.FailurePolicy, "") != admissionregistrationv1.Ignore {
				t.Errorf("failurePolicy = %v, want Ignore", ptr.Deref(got.FailurePolicy, ""))
			}
			if n := ptr.Deref(got.TimeoutSeconds, 0); n < 1 || n > 3 {
				t.Errorf("timeoutSeconds = %d, want a short one (1 to 3)", n)
			}
			if ptr.Deref(got.SideEffects, "") != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("sideEffects = %v, want None", ptr.Deref(got.SideEffects, ""))
			}
			if f.mode != externalURL {
				if p := got.ClientConfig.Service; p == nil || ptr.Deref(p.Path, "") != app.PathForecastWorkload {
					t.Errorf("clientConfig = %+v, want the service at %s", got.ClientConfig, app.PathForecastWorkload)
				}
			}
			pods := find[*validatingConfig](t, r.objects, fullname).Webhooks[0]
			if diff := cmp.Diff(pods.NamespaceSelector, got.NamespaceSelector); diff != "" {
				t.Errorf("namespaceSelector differs from the pod webhook's (-pods +workloads):\n%s", diff)
			}
			ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
			namespaced := admissionregistrationv1.NamespacedScope
			want := []admissionregistrationv1.RuleWithOperations{
				{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
					Resources: []string{"deployments", "deployments/scale", "statefulsets", "statefulsets/scale", "replicasets", "replicasets/scale"},
					Scope:     &namespaced}},
				{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"replicationcontrollers", "replicationcontrollers/scale"}, Scope: &namespaced}},
			}
			if diff := cmp.Diff(want, got.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}
