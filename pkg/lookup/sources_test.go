package lookup

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// countingReader counts reads and fails them all with err when set.
type countingReader struct {
	client.Reader
	gets, lists int
	err         error
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	if r.err != nil {
		return r.err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.lists++
	if r.err != nil {
		return r.err
	}
	return r.Reader.List(ctx, list, opts...)
}

func reader(t *testing.T, objs ...client.Object) *countingReader {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return &countingReader{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()}
}

// ignoreServerFields leaves out what the fake client fills in.
var ignoreServerFields = cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion")

func TestSourcesReplicaSet(t *testing.T) {
	rs := spreadtest.MakeReplicaSet().Namespace("shop").Name("web-7d").MatchLabel("app", "web").Obj()
	tests := []struct {
		name     string
		cached   *countingReader
		live     *countingReader
		unsynced bool
		want     *appsv1.ReplicaSet
		wantErr  string
		wantGets [2]int // cache, live
	}{
		{
			name:     "ReplicaSet in the cache -> read from the cache only",
			cached:   reader(t, rs),
			live:     reader(t, rs),
			want:     rs,
			wantGets: [2]int{1, 0},
		},
		{
			name:     "ReplicaSet younger than the cache -> read from the API server",
			cached:   reader(t),
			live:     reader(t, rs),
			want:     rs,
			wantGets: [2]int{1, 1},
		},
		{
			name:     "ReplicaSet in neither -> nil, nil",
			cached:   reader(t),
			live:     reader(t),
			wantGets: [2]int{1, 1},
		},
		{
			name:     "caches not synced -> read from the API server only",
			cached:   reader(t, rs),
			live:     reader(t, rs),
			unsynced: true,
			want:     rs,
			wantGets: [2]int{0, 1},
		},
		{
			name:     "cache read fails -> the error, not a guess",
			cached:   &countingReader{err: errors.New("informer stopped")},
			live:     reader(t, rs),
			wantErr:  "informer stopped",
			wantGets: [2]int{1, 0},
		},
		{
			name:     "live read after a miss fails -> the error, never nil",
			cached:   reader(t),
			live:     &countingReader{err: errors.New("connection refused")},
			wantErr:  "connection refused",
			wantGets: [2]int{1, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSources(tt.cached).WithFallback(tt.live, func() bool { return !tt.unsynced }).WithContext(t.Context())
			got, err := s.ReplicaSet("shop", "web-7d")
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, tt.live.err) && !errors.Is(err, tt.cached.err) {
					t.Fatalf("error = %v, want one wrapping %q", err, tt.wantErr)
				}
				if got != nil {
					t.Errorf("got %v with an error", got)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreServerFields, cmpopts.IgnoreFields(metav1.TypeMeta{}, "Kind", "APIVersion")); diff != "" {
				t.Errorf("ReplicaSet (-want +got):\n%s", diff)
			}
			if got := [2]int{tt.cached.gets, tt.live.gets}; got != tt.wantGets {
				t.Errorf("gets [cache, live] = %v, want %v", got, tt.wantGets)
			}
		})
	}
}

func TestSourcesEveryLookup(t *testing.T) {
	svc := spreadtest.MakeService().Namespace("shop").Name("web").Selector("app", "web").Obj()
	other := spreadtest.MakeService().Namespace("other").Name("web").Selector("app", "web").Obj()
	rc := spreadtest.MakeReplicationController().Namespace("shop").Name("legacy").Selector("app", "old").Obj()
	ss := spreadtest.MakeStatefulSet().Namespace("shop").Name("db").MatchLabel("app", "db").Obj()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "a"}}}
	sp := policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Obj()
	csp := policytest.MakeClusterSpreadPolicy().Name("default").Obj()
	objs := []client.Object{svc, other, rc, ss, ns, sp, csp}

	for _, synced := range []bool{true, false} {
		name := "caches synced -> every lookup answered from the cache"
		if !synced {
			name = "caches not synced -> every lookup answered by the API server"
		}
		t.Run(name, func(t *testing.T) {
			cached, live := reader(t, objs...), reader(t, objs...)
			s := NewSources(cached).WithFallback(live, func() bool { return synced }).WithContext(t.Context())
			opts := []cmp.Option{ignoreServerFields, cmpopts.IgnoreFields(metav1.TypeMeta{}, "Kind", "APIVersion")}

			gotSvcs, err := s.Services("shop")
			check(t, "Services", err, []*v1.Service{svc}, gotSvcs, opts...)
			gotRC, err := s.ReplicationController("shop", "legacy")
			check(t, "ReplicationController", err, rc, gotRC, opts...)
			gotSS, err := s.StatefulSet("shop", "db")
			check(t, "StatefulSet", err, ss, gotSS, opts...)
			gotNS, err := s.Namespace("shop")
			check(t, "Namespace", err, ns, gotNS, opts...)
			gotSP, err := s.SpreadPolicies("shop")
			check(t, "SpreadPolicies", err, []*v1alpha1.SpreadPolicy{sp}, gotSP, opts...)
			gotCSP, err := s.ClusterSpreadPolicies()
			check(t, "ClusterSpreadPolicies", err, []*v1alpha1.ClusterSpreadPolicy{csp}, gotCSP, opts...)
			missing, err := s.StatefulSet("shop", "gone")
			check(t, "missing StatefulSet", err, (*appsv1.StatefulSet)(nil), missing)

			// 4 gets and 3 lists from the cache, the miss read again live;
			// before the sync, all of them live, once.
			wantReads := [2]int{7, 1}
			if !synced {
				wantReads = [2]int{0, 7}
			}
			if reads := [2]int{cached.gets + cached.lists, live.gets + live.lists}; reads != wantReads {
				t.Errorf("reads [cache, live] = %v, want %v", reads, wantReads)
			}
		})
	}
}

func check[T any](t *testing.T, what string, err error, want, got T, opts ...cmp.Option) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if diff := cmp.Diff(want, got, opts...); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

func TestServicesSelectingUsesTheIndexOnceSynced(t *testing.T) {
	web := spreadtest.MakeService().Namespace("shop").Name("web").Selector("app", "web").Obj()
	db := spreadtest.MakeService().Namespace("shop").Name("db").Selector("app", "db").Obj()
	// The index knows only web: answers from it are told apart from a list.
	x := cache.NewServiceIndex()
	x.Set(web)
	tests := []struct {
		name      string
		synced    bool
		want      []string
		wantLists [2]int // [cache, live]
	}{
		{name: "caches synced -> the index's candidates, no list", synced: true, want: []string{"shop/web"}},
		{name: "caches not synced -> every Service of the namespace, listed live", want: []string{"shop/db", "shop/web"}, wantLists: [2]int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cached, live := reader(t, web, db), reader(t, web, db)
			s := NewSources(cached).WithFallback(live, func() bool { return tt.synced }).WithServiceIndex(x).WithContext(t.Context())
			got, err := s.ServicesSelecting("shop", map[string]string{"app": "web"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, serviceNames(got)); diff != "" {
				t.Errorf("Services (-want +got):\n%s", diff)
			}
			if lists := [2]int{cached.lists, live.lists}; lists != tt.wantLists {
				t.Errorf("lists [cache, live] = %v, want %v", lists, tt.wantLists)
			}
		})
	}
}

func serviceNames(svcs []*v1.Service) []string {
	out := make([]string, len(svcs))
	for i, s := range svcs {
		out[i] = s.Namespace + "/" + s.Name
	}
	return out
}
