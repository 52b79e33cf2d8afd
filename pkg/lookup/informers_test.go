package lookup

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// storesOf returns stores holding objs, filed as an informer files them,
// with a store for every kind NewInformerStores gives one.
func storesOf(t *testing.T, objs ...client.Object) *InformerStores {
	t.Helper()
	s := &InformerStores{byType: map[reflect.Type]toolscache.Indexer{}}
	for _, k := range cache.InformedKinds {
		if inStores(k) {
			s.byType[reflect.TypeOf(k.New())] = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc,
				toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
		}
	}
	for _, obj := range objs {
		store, ok := s.byType[reflect.TypeOf(obj)]
		if !ok {
			t.Fatalf("test setup: no store for %T", obj)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestSourcesReadTheInformersObjectsOnceSynced(t *testing.T) {
	rc := spreadtest.MakeReplicationController().Namespace("shop").Name("legacy").Selector("app", "old").Obj()
	rs := spreadtest.MakeReplicaSet().Namespace("shop").Name("web-7d").MatchLabel("app", "web").Obj()
	ss := spreadtest.MakeStatefulSet().Namespace("shop").Name("db").MatchLabel("app", "db").Obj()
	ns := policytest.MakeNamespace("shop").Label("team", "a").Obj()
	sp := policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Obj()
	otherSP := policytest.MakeSpreadPolicy().Namespace("other").Name("zones").Obj()
	csp := policytest.MakeClusterSpreadPolicy().Name("default").Obj()
	objs := []client.Object{rc, rs, ss, ns, sp, otherSP, csp}

	t.Run("caches synced -> the objects the stores hold, not copies, and no read of the cache or the API server", func(t *testing.T) {
		cached, live := reader(t, objs...), reader(t, objs...)
		s := NewSources(cached).WithFallback(live, func() bool { return true }).WithInformerStores(storesOf(t, objs...)).
			WithContext(t.Context())
		same := func(what string, want, got any, err error) {
			t.Helper()
			if err != nil {
				t.Errorf("%s: %v", what, err)
			} else if got != want {
				t.Errorf("%s = %p, want the stored object %p", what, got, want)
			}
		}
		gotRC, err := s.ReplicationController("shop", "legacy")
		same("ReplicationController", any(rc), any(gotRC), err)
		gotRS, err := s.ReplicaSet("shop", "web-7d")
		same("ReplicaSet", any(rs), any(gotRS), err)
		gotSS, err := s.StatefulSet("shop", "db")
		same("StatefulSet", any(ss), any(gotSS), err)
		gotNS, err := s.Namespace("shop")
		same("Namespace", any(ns), any(gotNS), err)
		gotSPs, err := s.SpreadPolicies("shop")
		if err != nil || len(gotSPs) != 1 {
			t.Errorf("SpreadPolicies of shop = %v, %v; want the one of shop", gotSPs, err)
		} else {
			same("SpreadPolicies of shop", any(sp), any(gotSPs[0]), nil)
		}
		gotCSPs, err := s.ClusterSpreadPolicies()
		if err != nil || len(gotCSPs) != 1 {
			t.Errorf("ClusterSpreadPolicies = %v, %v; want one", gotCSPs, err)
		} else {
			same("ClusterSpreadPolicies", any(csp), any(gotCSPs[0]), nil)
		}
		if reads := [2]int{cached.gets + cached.lists, live.gets + live.lists}; reads != [2]int{} {
			t.Errorf("reads [cache, live] = %v, want none", reads)
		}
	})

	t.Run("object younger than the cache -> read from the API server", func(t *testing.T) {
		cached, live := reader(t), reader(t, rs)
		s := NewSources(cached).WithFallback(live, func() bool { return true }).WithInformerStores(storesOf(t)).
			WithContext(t.Context())
		got, err := s.ReplicaSet("shop", "web-7d")
		if err != nil || got == nil || got.Name != "web-7d" {
			t.Errorf("ReplicaSet = %v, %v; want web-7d from the API server", got, err)
		}
		missing, err := s.StatefulSet("shop", "gone")
		if err != nil || missing != nil {
			t.Errorf("StatefulSet in neither = %v, %v; want nil, nil", missing, err)
		}
		if reads := [2]int{cached.gets, live.gets}; reads != [2]int{0, 2} {
			t.Errorf("gets [cache, live] = %v, want [0 2]", reads)
		}
	})

	t.Run("caches not synced -> every lookup answered by the API server", func(t *testing.T) {
		cached, live := reader(t, objs...), reader(t, objs...)
		s := NewSources(cached).WithFallback(live, func() bool { return false }).WithInformerStores(storesOf(t)).
			WithContext(t.Context())
		if got, err := s.ReplicaSet("shop", "web-7d"); err != nil || got == nil {
			t.Errorf("ReplicaSet = %v, %v; want it from the API server", got, err)
		}
		if got, err := s.ClusterSpreadPolicies(); err != nil || len(got) != 1 {
			t.Errorf("ClusterSpreadPolicies = %v, %v; want one from the API server", got, err)
		}
		if reads := [2]int{cached.gets + cached.lists, live.gets + live.lists}; reads != [2]int{0, 2} {
			t.Errorf("reads [cache, live] = %v, want [0 2]", reads)
		}
	})
}

// TestMutationLeavesTheSharedObjectsAsTheyWere holds the contract that
// lets Sources hand out the informers' own objects: a mutation reads the
// pod's controller, its namespace and the policies, and writes into none
// of them.
func TestMutationLeavesTheSharedObjectsAsTheyWere(t *testing.T) {
	rs := spreadtest.MakeReplicaSet().Namespace("shop").Name("web-7d").MatchLabel("app", "web").Obj()
	ns := policytest.MakeNamespace("shop").Label("team", "a").Obj()
	sp := policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Priority(1).PodLabel("pod-template-hash", "7d").
		Constraint(policytest.MakeConstraint().Zone().MaxSkew(1).DoNotSchedule().MatchLabelKeys("pod-template-hash").Obj()).Obj()
	csp := policytest.MakeClusterSpreadPolicy().Name("default").NamespaceLabel("team", "a").
		Constraint(policytest.MakeConstraint().Hostname().MaxSkew(1).ScheduleAnyway().Obj()).Obj()
	objs := []client.Object{rs, ns, sp, csp}
	before := make([]client.Object, len(objs))
	for i, obj := range objs {
		before[i] = obj.DeepCopyObject().(client.Object)
	}
	s := NewSources(reader(t)).WithInformerStores(storesOf(t, objs...)).WithContext(t.Context())
	for _, tc := range []struct {
		pod        *v1.Pod
		wantPolicy string
	}{
		{spreadtest.MakePod().Namespace("shop").Name("web-1").Label("app", "web").Label("pod-template-hash", "7d").
			ControlledBy("ReplicaSet", "apps/v1", "web-7d").Obj(), "shop/zones"},
		// Not selected by the SpreadPolicy: the ClusterSpreadPolicy's
		// namespaceSelector reads the namespace.
		{spreadtest.MakePod().Namespace("shop").Name("web-2").Label("app", "web").
			ControlledBy("ReplicaSet", "apps/v1", "web-7d").Obj(), "default"},
	} {
		m, err := engine.Mutate(tc.pod, s, engine.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Pod == nil || m.Policy.Name != tc.wantPolicy {
			t.Fatalf("test setup: pod %s mutated by %v (%s), want %s", tc.pod.Name, m.Policy, m.Skipped, tc.wantPolicy)
		}
		// What a later webhook or the API server does to the mutated pod
		// must not reach the cache either.
		for i := range m.Pod.Spec.TopologySpreadConstraints {
			c := &m.Pod.Spec.TopologySpreadConstraints[i]
			c.MaxSkew++
			c.MatchLabelKeys = append(c.MatchLabelKeys, "changed")
			if c.LabelSelector != nil {
				c.LabelSelector.MatchLabels["changed"] = "yes"
			}
		}
	}
	for i, obj := range objs {
		if diff := cmp.Diff(before[i], obj); diff != "" {
			t.Errorf("%T %s after the mutations (-before +after):\n%s", obj, obj.GetName(), diff)
		}
	}
}

type fixedVerdict struct{ valid, known bool }

func (f fixedVerdict) PolicyVerdict(types.UID, int64) (valid, known bool) { return f.valid, f.known }

func TestSourcesPassOnThePolicyVerdicts(t *testing.T) {
	if valid, known := NewSources(reader(t)).PolicyVerdict("uid", 1); valid || known {
		t.Errorf("without verdicts: (%v, %v), want none known", valid, known)
	}
	s := NewSources(reader(t)).WithPolicyVerdicts(fixedVerdict{valid: true, known: true}).WithContext(t.Context())
	if valid, known := s.PolicyVerdict("uid", 1); !valid || !known {
		t.Errorf("with verdicts, after WithContext: (%v, %v), want the verdict (true, true)", valid, known)
	}
}
