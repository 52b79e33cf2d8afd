//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/forecast"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// deploymentObj is a Deployment of app=labels["app"] with a valid template;
// no controller runs here, so it never creates a ReplicaSet of its own.
func deploymentObj(ns, name string, replicas int32, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels),
		},
	}
}

// spreadEvents returns the SpreadUnsatisfiable events of ns, by the kind
// and name of the object they are about.
func spreadEvents(ctx context.Context, ns string) (map[string][]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := suite.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string][]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Reason == "SpreadUnsatisfiable" {
			key := e.Regarding.Kind + "/" + e.Regarding.Name
			out[key] = append(out[key], e)
		}
	}
	return out, nil
}

func TestRefusedPodsLeaveOneCountedEventOnTheirReplicaSetAndDeployment(t *testing.T) {
	const retries = 40
	ns, _ := unsatisfiableSetup(t, "events", "")
	web := deploymentObj(ns, "web", 3, map[string]string{"app": "api"})
	create(t, web)
	rs := replicaSet(ns, "web-5f7b", map[string]string{"app": "api"})
	rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(web, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
	create(t, rs)
	pod := func(i int) *v1.Pod {
		return controlledBy(podObj(spreadtest.MakePod().Namespace(ns).Name(fmt.Sprintf("web-5f7b-%d", i)).Label("app", "api")), rs, "ReplicaSet")
	}
	// Dry runs record nothing, so waiting on them keeps the count exact.
	eventually(t, "a dry run of the ReplicaSet's pod is denied", func(ctx context.Context) (bool, error) {
		err := suite.client.Create(ctx, pod(0), client.DryRunAll)
		return apierrors.IsForbidden(err), err
	})
	if got, err := spreadEvents(t.Context(), ns); err != nil || len(got) != 0 {
		t.Fatalf("events after dry runs = %v (%v), want none", got, err)
	}

	// A ReplicaSet controller retrying the same refused pod in a loop.
	for i := range retries {
		if err := suite.client.Create(t.Context(), pod(i)); !apierrors.IsForbidden(err) {
			t.Fatalf("create %d = %v, want a denial", i, err)
		}
	}

	// The recorder writes the first event, then patches it into a series
	// of count 2 on the second; later ones only raise the count it keeps
	// and writes when the series ends (6 minutes without one) or every 30
	// minutes. So the API server holds exactly one Event per owner.
	eventually(t, "one event with a series on the ReplicaSet and one on the Deployment", func(ctx context.Context) (bool, error) {
		got, err := spreadEvents(ctx, ns)
		if err != nil {
			return false, err
		}
		for _, owner := range []string{"ReplicaSet/web-5f7b", "Deployment/web"} {
			if len(got[owner]) != 1 || got[owner][0].Series == nil || got[owner][0].Series.Count < 2 {
				return false, fmt.Errorf("events on %s: %+v", owner, got[owner])
			}
		}
		return true, nil
	})
	got, err := spreadEvents(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("SpreadUnsatisfiable events are about %d objects, want the ReplicaSet and the Deployment: %v", len(got), got)
	}
	for owner, es := range got {
		e := es[0]
		t.Logf("%s: %d event(s), series count %d, note %q", owner, len(es), e.Series.Count, e.Note)
		if e.Type != v1.EventTypeWarning || e.Regarding.Namespace != ns || e.Regarding.UID == "" {
			t.Errorf("event on %s = type %q regarding %+v, want a Warning naming the owner with its uid", owner, e.Type, e.Regarding)
		}
		if !containsAll(e.Note, "zone-c", "spec.topologySpreadConstraints[0]") {
			t.Errorf("event on %s has note %q, want the denial's numbers", owner, e.Note)
		}
	}
	if d := got["Deployment/web"]; len(d) == 1 && d[0].Regarding.UID != web.UID {
		t.Errorf("the Deployment's event regards uid %s, want %s", d[0].Regarding.UID, web.UID)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestApplyAndScaleOfADeploymentThatCannotSpreadReturnTheForecastWarning(t *testing.T) {
	ns, _ := unsatisfiableSetup(t, "forecast", "")
	web := deploymentObj(ns, "web", 3, map[string]string{"app": "web"})
	want := "spreadguard: replica 3 of 3 would be refused: zone-c has no schedulable node; " +
		"zone: zone-a=1 zone-b=1 zone-c=0, maxSkew 1 (policy " + ns + "/zones)"
	// The policy reached the webhook's cache when a dry run of a probe pod
	// was mutated; a dry-run create of the Deployment shows the forecast
	// sees it too.
	eventually(t, "a dry-run create of the Deployment is warned about", func(ctx context.Context) (bool, error) {
		c, rec := clientWithWarnings(t)
		err := c.Create(ctx, web.DeepCopy(), client.DryRunAll)
		return err == nil && rec.contains(want), fmt.Errorf("create: %v, warnings %q", err, rec.warnings)
	})

	c, rec := clientWithWarnings(t)
	if err := c.Create(t.Context(), web); err != nil {
		t.Fatalf("create = %v: a forecast never refuses", err)
	}
	if diff := cmp.Diff([]string{want}, rec.warnings); diff != "" {
		t.Errorf("warnings of the create (-want +got):\n%s", diff)
	}

	// What the deployment controller would have made of it (no controller
	// runs here): its ReplicaSet, which names the pod-template-hash the
	// forecast of a scale reads, and its 3 pods, bound where the forecast
	// put them, on a1, b1 and a1. Bound pods are not checked.
	var stored appsv1.Deployment
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(web), &stored); err != nil {
		t.Fatal(err)
	}
	hash := forecast.PodTemplateHash(&stored.Spec.Template, stored.Status.CollisionCount)
	rs := replicaSet(ns, "web-"+hash, map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash})
	rs.Annotations = map[string]string{workload.RevisionAnnotation: "1"}
	rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(&stored, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
	create(t, rs)
	for i, node := range []string{"a1", "b1", "a1"} {
		create(t, podObj(spreadtest.MakePod().Namespace(ns).Name(fmt.Sprintf("web-%s-%d", hash, i)).Label("app", "web").
			Label(appsv1.DefaultDeploymentUniqueLabelKey, hash).Node(node)))
	}
	wantScaled := "spreadguard: replica 4 of 5 would be refused: zone-c has no schedulable node; " +
		"zone: zone-a=2 zone-b=1 zone-c=0, maxSkew 1 (policy " + ns + "/zones)"
	eventually(t, "a dry-run scale from 3 to 5 is warned about from the 3 pods that exist", func(ctx context.Context) (bool, error) {
		c, rec := clientWithWarnings(t)
		err := c.SubResource("scale").Update(ctx, stored.DeepCopy(), client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}), client.DryRunAll)
		return err == nil && rec.contains(wantScaled), fmt.Errorf("scale: %v, warnings %q", err, rec.warnings)
	})

	c, rec = clientWithWarnings(t)
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	if err := c.SubResource("scale").Update(t.Context(), stored.DeepCopy(), client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale = %v: a forecast never refuses", err)
	}
	if diff := cmp.Diff([]string{wantScaled}, rec.warnings); diff != "" {
		t.Errorf("warnings of the scale (-want +got):\n%s", diff)
	}
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(web), &stored); err != nil || *stored.Spec.Replicas != 5 {
		t.Errorf("stored Deployment has %v replicas (%v), want the scale applied", stored.Spec.Replicas, err)
	}
}
