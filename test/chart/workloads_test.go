package chart_test

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
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
	if diff := cmp.Diff([]string{"not-kube-controller-manager", "not-a-controllers-replicas"}, names); diff != "" {
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

// The forecast webhook must stay off controllers' write path: a ReplicaSet
// or ReplicationController that has a controller owner is written by that
// controller (a Deployment's rollout, an Argo Rollout, an operator), so its
// writes are left out whoever the owner is, while what a person applies is
// forecast. The rendered matchConditions are evaluated by the API server's
// own matcher (k8s.io/apiserver's, as kube-apiserver v1.37.1 compiles them),
// under failurePolicy Fail so that an expression that errs fails the test
// instead of skipping the call.
func TestTheWorkloadForecastWebhookLeavesOutEveryControllersReplicas(t *testing.T) {
	t.Parallel()
	r := render(t, valuesYAML(t, ""))
	hook := find[*validatingConfig](t, r.objects, fullname+"-workloads").Webhooks[0].DeepCopy()
	hook.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	compiler := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	matcher := webhook.NewValidatingWebhookAccessor("workloads", fullname+"-workloads", hook).GetCompiledMatcher(compiler)

	person := "alice@example.com"
	argo := "system:serviceaccount:argo-rollouts:argo-rollouts"
	sa := func(name string) string { return "system:serviceaccount:kube-system:" + name }
	owner := func(apiVersion, kind string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "web", UID: "u-web", Controller: controller}
	}
	deployment := owner("apps/v1", "Deployment", ptr.To(true))
	rollout := owner("argoproj.io/v1alpha1", "Rollout", ptr.To(true))
	operator := owner("example.com/v1", "App", ptr.To(true))
	notController := owner("example.com/v1", "Bundle", ptr.To(false))
	noControllerField := owner("example.com/v1", "Bundle", nil)
	apps := func(kind string) schema.GroupVersionKind { return appsv1.SchemeGroupVersion.WithKind(kind) }
	core := func(kind string) schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind(kind) }
	scale := autoscalingv1.SchemeGroupVersion.WithKind("Scale")

	tests := []struct {
		name        string
		user        string
		kind        schema.GroupVersionKind
		resource    string
		subresource string
		// update says the write is an UPDATE (a CREATE otherwise).
		update bool
		owners []metav1.OwnerReference
		want   matchconditions.MatchResult
	}{
		{name: "a person creates a ReplicaSet of its own -> forecast", user: person, kind: apps("ReplicaSet"), resource: "replicasets",
			want: matchconditions.MatchResult{Matches: true}},
		{name: "a person creates a ReplicationController of its own -> forecast", user: person, kind: core("ReplicationController"), resource: "replicationcontrollers",
			want: matchconditions.MatchResult{Matches: true}},
		{name: "a person creates a ReplicaSet a Deployment controls -> left out: its rollout's, whoever writes it", user: person,
			kind: apps("ReplicaSet"), resource: "replicasets", owners: []metav1.OwnerReference{deployment},
			want: matchconditions.MatchResult{FailedConditionName: "not-a-controllers-replicas"}},
		{name: "Argo Rollouts creates a Rollout's ReplicaSet -> left out", user: argo,
			kind: apps("ReplicaSet"), resource: "replicasets", owners: []metav1.OwnerReference{rollout},
			want: matchconditions.MatchResult{FailedConditionName: "not-a-controllers-replicas"}},
		{name: "Argo Rollouts sets the replicas of a Rollout's ReplicaSet -> left out", user: argo, update: true,
			kind: apps("ReplicaSet"), resource: "replicasets", owners: []metav1.OwnerReference{rollout},
			want: matchconditions.MatchResult{FailedConditionName: "not-a-controllers-replicas"}},
		{name: "an operator writes a ReplicationController it controls -> left out", user: "system:serviceaccount:ops:app-operator",
			kind: core("ReplicationController"), resource: "replicationcontrollers", owners: []metav1.OwnerReference{notController, operator},
			want: matchconditions.MatchResult{FailedConditionName: "not-a-controllers-replicas"}},
		{name: "a ReplicaSet whose owners are no controller (controller false, or unset) -> forecast", user: person,
			kind: apps("ReplicaSet"), resource: "replicasets", owners: []metav1.OwnerReference{notController, noControllerField},
			want: matchconditions.MatchResult{Matches: true}},
		{name: "a person scales a ReplicaSet a Rollout controls (a Scale has no owners) -> forecast", user: person, update: true,
			kind: scale, resource: "replicasets", subresource: "scale",
			want: matchconditions.MatchResult{Matches: true}},
		{name: "a person applies a Deployment an operator controls -> forecast: only ReplicaSets and ReplicationControllers are left out", user: person,
			kind: apps("Deployment"), resource: "deployments", owners: []metav1.OwnerReference{operator},
			want: matchconditions.MatchResult{Matches: true}},
		{name: "a person applies a StatefulSet an operator controls -> forecast", user: person,
			kind: apps("StatefulSet"), resource: "statefulsets", owners: []metav1.OwnerReference{operator},
			want: matchconditions.MatchResult{Matches: true}},
		{name: "the deployment controller creates a Deployment's ReplicaSet -> left out as kube-controller-manager", user: sa("deployment-controller"),
			kind: apps("ReplicaSet"), resource: "replicasets", owners: []metav1.OwnerReference{deployment},
			want: matchconditions.MatchResult{FailedConditionName: "not-kube-controller-manager"}},
		{name: "the horizontal-pod-autoscaler scales a Deployment -> left out", user: sa("horizontal-pod-autoscaler"), update: true,
			kind: scale, resource: "deployments", subresource: "scale",
			want: matchconditions.MatchResult{FailedConditionName: "not-kube-controller-manager"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(tc.kind)
			obj.SetNamespace("shop")
			obj.SetName("web")
			obj.SetOwnerReferences(tc.owners)
			gvr := schema.GroupVersionResource{Group: tc.kind.Group, Version: tc.kind.Version, Resource: tc.resource}
			if tc.subresource != "" {
				gvr.Group, gvr.Version = appsv1.SchemeGroupVersion.Group, appsv1.SchemeGroupVersion.Version
				if tc.resource == "replicationcontrollers" {
					gvr.Group, gvr.Version = "", "v1"
				}
			}
			op, old := admission.Create, runtime.Object(nil)
			if tc.update {
				op, old = admission.Update, obj.DeepCopy()
			}
			attrs := admission.NewAttributesRecord(obj, old, tc.kind, "shop", "web", gvr, tc.subresource, op, nil, false,
				&user.DefaultInfo{Name: tc.user})
			versioned, err := admission.NewVersionedAttributes(attrs, tc.kind, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := matcher.Match(t.Context(), versioned, nil, nil)
			if got.Error != nil {
				t.Fatalf("the matchConditions erred: %v", got.Error)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("match (-want +got):\n%s", diff)
			}
		})
	}
}
