//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/server"
)

// forecastReviews counts the suite's server's reviews at /forecast-workload.
func forecastReviews(t *testing.T) float64 {
	t.Helper()
	return metricValue(t, suite.metricsURL, fmt.Sprintf(`controller_runtime_webhook_requests_total{code="200",webhook=%q} `, server.PathForecastWorkload))
}

// as returns a client acting as user. It is also in system:masters, so
// that RBAC lets every write through: what is tested is the
// matchConditions, which read the user name.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(suite.restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: suite.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The chart's matchConditions let through to the workload forecasts only
// what a person or a pipeline writes; kube-controller-manager's writes
// (a rollout's ReplicaSets, an HPA's scale, the garbage collector's
// owner references) never wait on a warning nobody reads.
func TestWorkloadForecastsSeeNoWriteOfKubeControllerManager(t *testing.T) {
	ns := newNamespace(t, "match-conditions")
	person := "alice@example.com"
	sa := func(name string) string { return "system:serviceaccount:kube-system:" + name }
	web := deploymentObj(ns, "web", 1, map[string]string{"app": "web"})
	create(t, web)
	ownedBy := func(name string) *appsv1.ReplicaSet {
		rs := replicaSet(ns, name, map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: name})
		rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(web, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		return rs
	}
	update := func(ctx context.Context, c client.Client) error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(web), &d); err != nil {
			return err
		}
		d.Annotations = map[string]string{"touched": fmt.Sprint(d.Generation)}
		return c.Update(ctx, &d)
	}
	scale := func(ctx context.Context, c client.Client) error {
		return c.SubResource("scale").Update(ctx, web.DeepCopy(), client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 2}}))
	}
	tests := []struct {
		name     string
		user     string
		write    func(context.Context, client.Client) error
		reviewed bool
	}{
		{name: "a person updates a Deployment -> forecast", user: person, write: update, reviewed: true},
		{name: "a person scales a Deployment -> forecast", user: person, write: scale, reviewed: true},
		{name: "a pipeline's service account (Argo CD) updates a Deployment -> forecast",
			user: "system:serviceaccount:argocd:argocd-application-controller", write: update, reviewed: true},
		{name: "a service account of kube-system that is no controller of kube-controller-manager updates a Deployment -> forecast",
			user: sa("cluster-proportional-autoscaler"), write: update, reviewed: true},
		{name: "a person creates a ReplicaSet of its own -> forecast", user: person, reviewed: true,
			write: func(ctx context.Context, c client.Client) error {
				return c.Create(ctx, replicaSet(ns, "standalone", map[string]string{"app": "solo"}))
			}},
		{name: "the horizontal-pod-autoscaler scales a Deployment -> not forecast", user: sa("horizontal-pod-autoscaler"), write: scale},
		{name: "the deployment controller updates a Deployment -> not forecast", user: sa("deployment-controller"), write: update},
		{name: "the deployment controller creates a Deployment's ReplicaSet -> not forecast", user: sa("deployment-controller"),
			write: func(ctx context.Context, c client.Client) error { return c.Create(ctx, ownedBy("web-rollout")) }},
		{name: "the garbage collector updates a Deployment -> not forecast", user: sa("generic-garbage-collector"), write: update},
		{name: "kube-controller-manager with its own credentials updates a Deployment -> not forecast",
			user: "system:kube-controller-manager", write: update},
		{name: "a person creates a ReplicaSet a Deployment controls -> not forecast: its rollout's, whoever writes it", user: person,
			write: func(ctx context.Context, c client.Client) error { return c.Create(ctx, ownedBy("web-by-hand")) }},
		{name: "Argo Rollouts creates a Rollout's ReplicaSet -> not forecast: any controller's, not only a Deployment's",
			user: "system:serviceaccount:argo-rollouts:argo-rollouts",
			write: func(ctx context.Context, c client.Client) error {
				rs := replicaSet(ns, "canary", map[string]string{"app": "canary"})
				rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "canary", UID: "0d6f3c2e-rollout", Controller: ptr.To(true)}}
				return c.Create(ctx, rs)
			}},
		{name: "a person creates a ReplicaSet whose only owner is no controller -> forecast", user: person, reviewed: true,
			write: func(ctx context.Context, c client.Client) error {
				rs := replicaSet(ns, "bundled", map[string]string{"app": "bundled"})
				rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "bundle", UID: "0d6f3c2e-bundle", Controller: ptr.To(false)}}
				return c.Create(ctx, rs)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := forecastReviews(t)
			if err := tt.write(t.Context(), as(t, tt.user)); err != nil {
				t.Fatalf("the write as %s: %v", tt.user, err)
			}
			want := before
			if tt.reviewed {
				want++
			}
			if got := forecastReviews(t); got != want {
				t.Errorf("reviews at %s went from %v to %v, want %v", server.PathForecastWorkload, before, got, want)
			}
		})
	}
}
