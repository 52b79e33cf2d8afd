package policies

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// newWatcher returns a watcher subscribed to a cluster state of its own,
// fed by the test, that records events with rec, its metric registered
// with a registry of its own.
func newWatcher(t *testing.T, rec events.EventRecorder) (*Watcher, *state.Cluster) {
	t.Helper()
	c := state.NewCluster(spread.NewIndex(), nil)
	w, err := New(c, logr.Discard(), rec, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return w, c
}

func TestWatcherReportsARejectedPolicyOncePerGeneration(t *testing.T) {
	zone := policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()
	bad := func(gen int64) *v1alpha1.SpreadPolicy {
		p := policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Generation(gen).
			PodExpression("app", "in", "web").Constraint(zone).Obj()
		p.UID = types.UID("uid-zones")
		return p
	}
	fixed := bad(3)
	fixed.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

	rec := events.NewFakeRecorder(10)
	w, h := newWatcher(t, rec)

	steps := []struct {
		name       string
		do         func()
		wantEvents int
		wantCount  int
	}{
		{name: "a policy with operator 'in' is stored -> one event, counted", do: func() { h.Add(bad(1)) }, wantEvents: 1, wantCount: 1},
		{name: "a resync of the same generation -> no second event", do: func() { h.Update(bad(1), bad(1)) }, wantCount: 1},
		{name: "a new generation still wrong -> a new event", do: func() { h.Update(bad(1), bad(2)) }, wantEvents: 1, wantCount: 1},
		{name: "the policy fixed -> no event, no longer counted", do: func() { h.Update(bad(2), fixed) }, wantCount: 0},
		{name: "broken again, then deleted through a tombstone -> one event, then not counted", do: func() {
			h.Update(fixed, bad(4))
			h.Delete(toolscache.DeletedFinalStateUnknown{Key: "shop/zones", Obj: bad(4)})
		}, wantEvents: 1, wantCount: 0},
	}
	for _, s := range steps {
		s.do()
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		if len(got) != s.wantEvents {
			t.Errorf("%s: events %q, want %d", s.name, got, s.wantEvents)
		}
		for _, e := range got {
			const want = "Warning InvalidPolicy spreadguard ignores this SpreadPolicy: spec.podSelector.matchExpressions[0].operator"
			if diff := cmp.Diff(want, e[:min(len(e), len(want))]); diff != "" {
				t.Errorf("%s: event (-want +got):\n%s\nwhole event: %s", s.name, diff, e)
			}
		}
		if got := testutil.ToFloat64(w.invalid.WithLabelValues(v1alpha1.KindSpreadPolicy)); got != float64(s.wantCount) {
			t.Errorf("%s: spreadguard_invalid_policies{kind=SpreadPolicy} = %v, want %d", s.name, got, s.wantCount)
		}
	}
}

func TestWatcherVerdictIsThatOfTheGenerationItValidated(t *testing.T) {
	zone := policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()
	policy := func(gen int64, podOperator metav1.LabelSelectorOperator) *v1alpha1.SpreadPolicy {
		p := policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Generation(gen).
			PodExpression("app", podOperator, "web").Constraint(zone).Obj()
		p.UID = types.UID("uid-zones")
		return p
	}
	w, h := newWatcher(t, nil)
	type verdict struct{ valid, known bool }
	check := func(step string, gen int64, want verdict) {
		t.Helper()
		var got verdict
		got.valid, got.known = w.PolicyVerdict("uid-zones", gen)
		if got != want {
			t.Errorf("%s: verdict on generation %d = %+v, want %+v", step, gen, got, want)
		}
	}
	check("not observed yet", 1, verdict{})
	h.Add(policy(1, "In"))
	check("a valid policy observed", 1, verdict{valid: true, known: true})
	check("a valid policy observed, asked of the next generation", 2, verdict{})
	h.Update(policy(1, "In"), policy(2, "in"))
	check("a new generation with operator 'in'", 2, verdict{valid: false, known: true})
	check("a new generation observed, asked of the old one", 1, verdict{})
	h.Delete(policy(2, "in"))
	check("deleted", 2, verdict{})
}

func TestWatcherJudgesThePoliciesTheClusterStateHears(t *testing.T) {
	zone := policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().Obj()
	valid := policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Generation(1).Constraint(zone).Obj()
	valid.UID = "uid-valid"
	rejected := policytest.MakeClusterSpreadPolicy().Name("default").Generation(1).
		PodExpression("app", "in", "web").Constraint(zone).Obj()
	rejected.UID = "uid-rejected"
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	informers := &informertest.FakeInformers{Scheme: scheme}
	spreadPolicies, err := informers.FakeInformerFor(t.Context(), &v1alpha1.SpreadPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	clusterPolicies, err := informers.FakeInformerFor(t.Context(), &v1alpha1.ClusterSpreadPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	c := state.NewCluster(spread.NewIndex(), nil)
	if _, err := c.Inform(t.Context(), informers, []client.Object{&v1alpha1.SpreadPolicy{}, &v1alpha1.ClusterSpreadPolicy{}}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := New(c, logr.Discard(), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	spreadPolicies.Add(valid)
	clusterPolicies.Add(rejected)
	type verdict struct{ valid, known bool }
	for _, tc := range []struct {
		name string
		uid  types.UID
		want verdict
	}{
		{"a valid SpreadPolicy added to its informer, heard through the cluster state -> judged valid", valid.UID, verdict{valid: true, known: true}},
		{"a ClusterSpreadPolicy with operator 'in' added to its informer -> judged invalid", rejected.UID, verdict{valid: false, known: true}},
	} {
		var got verdict
		got.valid, got.known = w.PolicyVerdict(tc.uid, 1)
		if got != tc.want {
			t.Errorf("%s: verdict %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := testutil.ToFloat64(w.invalid.WithLabelValues(v1alpha1.KindClusterSpreadPolicy)); got != 1 {
		t.Errorf("spreadguard_invalid_policies{kind=ClusterSpreadPolicy} = %v, want 1", got)
	}
}
