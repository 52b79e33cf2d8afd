//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
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
