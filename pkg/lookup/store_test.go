package lookup_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

func TestStoreReadsAsAClientReader(t *testing.T) {
	web := spreadtest.MakeService().Namespace("shop").Name("web").Selector("app", "web").Obj()
	web.Labels = map[string]string{"tier": "front"}
	db := spreadtest.MakeService().Namespace("shop").Name("db").Selector("app", "db").Obj()
	other := spreadtest.MakeService().Namespace("blog").Name("web").Selector("app", "web").Obj()
	store, err := lookup.NewStore(web, db, other)
	if err != nil {
		t.Fatal(err)
	}
	list := func(opts ...client.ListOption) ([]string, error) {
		var l v1.ServiceList
		if err := store.List(t.Context(), &l, opts...); err != nil {
			return nil, err
		}
		var names []string
		for _, s := range l.Items {
			names = append(names, s.Namespace+"/"+s.Name)
		}
		return names, nil
	}
	tests := []struct {
		name    string
		opts    []client.ListOption
		want    []string
		wantErr bool
	}{
		{name: "no options -> every Service, in the order added", want: []string{"shop/web", "shop/db", "blog/web"}},
		{name: "in namespace shop -> shop's two", opts: []client.ListOption{client.InNamespace("shop")}, want: []string{"shop/web", "shop/db"}},
		{name: "labelled tier=front -> the one so labelled", opts: []client.ListOption{client.MatchingLabels{"tier": "front"}}, want: []string{"shop/web"}},
		{name: "a field selector -> an error, not a silently unfiltered list",
			opts: []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", "web")}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := list(tt.opts...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("List() error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("List() (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("Get copies: changing what it returns changes nothing stored", func(t *testing.T) {
		var got v1.Service
		if err := store.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "web"}, &got); err != nil {
			t.Fatal(err)
		}
		got.Spec.Selector["app"] = "changed"
		var again v1.Service
		if err := store.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "web"}, &again); err != nil {
			t.Fatal(err)
		}
		if again.Spec.Selector["app"] != "web" {
			t.Errorf("stored selector = %v after changing a copy, want app=web", again.Spec.Selector)
		}
	})
	t.Run("Get of an absent object -> NotFound, as the API server answers", func(t *testing.T) {
		err := store.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "web-abc"}, &appsv1.ReplicaSet{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("Get() error = %v, want NotFound", err)
		}
	})
	t.Run("Get of a kind spreadguard does not read -> an error naming the type", func(t *testing.T) {
		err := store.Get(t.Context(), client.ObjectKey{Namespace: "shop", Name: "web"}, &appsv1.DaemonSet{})
		if err == nil || apierrors.IsNotFound(err) {
			t.Errorf("Get() error = %v, want one that is not NotFound", err)
		}
	})
}
