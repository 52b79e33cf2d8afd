package admission

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// ownerEvents records the object each event is about, as
// "<Kind> <name> <type> <reason> <action>: <note>".
type ownerEvents struct{ got []string }

func (r *ownerEvents) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	ref, ok := regarding.(*v1.ObjectReference)
	if !ok {
		r.got = append(r.got, fmt.Sprintf("%T %s %s %s", regarding, eventtype, reason, action))
		return
	}
	r.got = append(r.got, fmt.Sprintf("%s %s/%s(%s) %s %s %s: %s", ref.Kind, ref.Namespace, ref.Name, ref.UID,
		eventtype, reason, action, fmt.Sprintf(note, args...)))
}

func TestEventsOnTheRefusedPodsOwners(t *testing.T) {
	unsatisfiable := &spread.Result{Verdict: spread.VerdictUnsatisfiable, Message: "zone-c has no schedulable node."}
	deployment := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: new(true)}
	rsOfWeb := spreadtest.MakeReplicaSet().Namespace(shop).Name("web-7d").MatchLabel("app", "web").Obj()
	rsOfWeb.OwnerReferences = []metav1.OwnerReference{deployment}
	db := spreadtest.MakeStatefulSet().Namespace(shop).Name("db").MatchLabel("app", "web").Obj()
	warnPolicy := policytest.MakeSpreadPolicy().Namespace(shop).Name("warn-only").Action(v1alpha1.ActionWarn).
		Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()).Obj()
	sources := func(objs ...any) *fakeSources {
		s := shopSources()
		s.FakeSelectorSources = spreadtest.SelectorSources(objs...)
		return s
	}
	onRS := "ReplicaSet shop/web-7d(ReplicaSet/web-7d) Warning SpreadUnsatisfiable CreatePod: " + unsatisfiable.Message
	onDeployment := "Deployment shop/web(uid-web) Warning SpreadUnsatisfiable CreatePod: " + unsatisfiable.Message

	tests := []struct {
		name    string
		sources *fakeSources
		result  *spread.Result
		req     admission.Request
		failRS  bool
		want    []string
	}{
		{
			name:    "a refused pod of a Deployment's ReplicaSet -> one event on the ReplicaSet and one on the Deployment",
			sources: sources(rsOfWeb),
			result:  unsatisfiable,
			req:     makeRequest().Pod(webPod().Obj()).Obj(),
			want:    []string{onRS, onDeployment},
		},
		{
			name: "a pod warned about under a Warn policy -> the same two events",
			sources: func() *fakeSources {
				s := sources(rsOfWeb)
				s.Policies = []*v1alpha1.SpreadPolicy{warnPolicy}
				return s
			}(),
			result: unsatisfiable,
			req:    makeRequest().Pod(webPod().Obj()).Obj(),
			want:   []string{onRS, onDeployment},
		},
		{
			name:    "a dry run of a refused pod -> the denial, no event",
			sources: sources(rsOfWeb),
			result:  unsatisfiable,
			req:     dryRun(makeRequest().Pod(webPod().Obj()).Obj()),
		},
		{
			name:    "a pod that fits -> no event",
			sources: sources(rsOfWeb),
			result:  &spread.Result{Verdict: spread.VerdictFeasible, FeasibleCount: 1},
			req:     makeRequest().Pod(webPod().Obj()).Obj(),
		},
		{
			name:    "a refused pod of a bare ReplicaSet -> the ReplicaSet alone",
			sources: sources(spreadtest.MakeReplicaSet().Namespace(shop).Name("web-7d").MatchLabel("app", "web").Obj()),
			result:  unsatisfiable,
			req:     makeRequest().Pod(webPod().Obj()).Obj(),
			want:    []string{onRS},
		},
		{
			name:    "a refused pod of a StatefulSet -> the StatefulSet, read from the pod's controllerRef",
			sources: sources(db),
			result:  unsatisfiable,
			req: makeRequest().Pod(spreadtest.MakePod().Namespace(shop).Name("db-0").Label("app", "web").
				ControlledBy("StatefulSet", "apps/v1", "db").Obj()).Obj(),
			want: []string{"StatefulSet shop/db(StatefulSet/db) Warning SpreadUnsatisfiable CreatePod: " + unsatisfiable.Message},
		},
		{
			name:    "a refused pod whose ReplicaSet cannot be read -> the event on the ReplicaSet still",
			sources: sources(rsOfWeb),
			failRS:  true,
			result:  unsatisfiable,
			req:     makeRequest().Pod(webPod().Obj()).Obj(),
			want:    []string{onRS},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &ownerEvents{}
			if tt.failRS {
				tt.sources.Fail(spreadtest.LookupReplicaSet, errors.New("connection refused"))
			}
			h := &PodValidator{
				PodWebhook: PodWebhook{Sources: staticSources(tt.sources), Config: testEngineConfig, Metrics: newTestMetrics(t)},
				Checker:    &fakeChecker{result: tt.result},
				Synced:     func() bool { return true },
				Recorder:   rec,
			}
			h.Handle(t.Context(), tt.req)
			if diff := cmp.Diff(tt.want, rec.got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
