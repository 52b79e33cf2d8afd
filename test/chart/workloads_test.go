package chart_test

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// The workload forecasts only warn, so their configuration must never
// block an apply or a scale, whatever the pod webhooks' failurePolicy.
func TestTheWorkloadForecastWebhookNeverBlocks(t *testing.T) {
	t.Parallel()
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
				if p := got.ClientConfig.Service; p == nil || ptr.Deref(p.Path, "") != server.PathForecastWorkload {
					t.Errorf("clientConfig = %+v, want the service at %s", got.ClientConfig, server.PathForecastWorkload)
				}
			}
			pods := find[*validatingConfig](t, r.objects, fullname).Webhooks[0]
			if diff := cmp.Diff(pods.NamespaceSelector, got.NamespaceSelector); diff != "" {
				t.Errorf("namespaceSelector differs from the pod webhook's (-pods +workloads):\n%s", diff)
			}
			ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
			namespaced := admissionregistrationv1.NamespacedScope
			// Every workload kind and its scale, one rule per API group, in
			// the order of the table.
			var want []admissionregistrationv1.RuleWithOperations
			at := map[string]int{}
			for _, k := range workload.Kinds {
				i, ok := at[k.GVK.Group]
				if !ok {
					i = len(want)
					at[k.GVK.Group] = i
					want = append(want, admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
						APIGroups: []string{k.GVK.Group}, APIVersions: []string{k.GVK.Version}, Scope: &namespaced}})
				}
				want[i].Resources = append(want[i].Resources, k.Resource, k.Resource+"/scale")
			}
			if diff := cmp.Diff(want, got.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// Only people and pipelines are forecast: kube-controller-manager's writes
// (a rollout's ReplicaSets, an HPA's scale) must not wait on a warning
// nobody reads. The e2e suite shows a real rollout and scale never reach
// the server; this pins which identities the conditions name.
func TestTheWorkloadForecastWebhookSkipsKubeControllerManager(t *testing.T) {
	t.Parallel()
	r := render(t, valuesYAML(t, ""))
	w := find[*validatingConfig](t, r.objects, fullname+"-workloads").Webhooks[0]
	var names []string
	var users string
	for _, c := range w.MatchConditions {
		names = append(names, c.Name)
		if c.Name == "not-kube-controller-manager" {
			users = c.Expression
		}
	}
	if diff := cmp.Diff([]string{"not-kube-controller-manager", "not-a-deployments-replicaset"}, names); diff != "" {
		t.Errorf("matchConditions (-want +got):\n%s", diff)
	}
	got := regexp.MustCompile(`'([^']+)'`).FindAllStringSubmatch(users, -1)
	var identities []string
	for _, m := range got {
		identities = append(identities, m[1])
	}
	sa := func(name string) string { return "system:serviceaccount:kube-system:" + name }
	// The controllers of Kubernetes v1.37 allowed to write Deployments,
	// ReplicaSets, StatefulSets, ReplicationControllers or their scale
	// (bootstrappolicy/controller_policy.go), and the identity of them all
	// without --use-service-account-credentials.
	want := []string{"system:kube-controller-manager", sa("deployment-controller"), sa("replicaset-controller"),
		sa("statefulset-controller"), sa("replication-controller"), sa("horizontal-pod-autoscaler"),
		sa("generic-garbage-collector"), sa("storage-version-migrator-controller")}
	if diff := cmp.Diff(want, identities); diff != "" {
		t.Errorf("identities left out (-want +got):\n%s", diff)
	}
}
