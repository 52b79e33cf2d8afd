package lookup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/lookup"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// listFails answers List from a Store, but fails the lists of the kinds in
// fail with their error.
type listFails struct {
	*lookup.Store
	fail map[string]error
}

func (r listFails) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	k, _ := cache.KindOf(list)
	if err := r.fail[k.GVK.Kind]; err != nil {
		return err
	}
	return r.Store.List(ctx, list, opts...)
}

func TestReadListsEveryKindOfTheNamespace(t *testing.T) {
	store, err := lookup.NewStore(
		spreadtest.MakeNode().Name("n1").Obj(),
		spreadtest.MakePod().Namespace("shop").Name("web-1").Obj(),
		spreadtest.MakePod().Namespace("blog").Name("post-1").Obj(),
		spreadtest.MakeService().Namespace("shop").Name("web").Obj(),
		policytest.MakeNamespace("shop").Obj(),
		policytest.MakeSpreadPolicy().Namespace("shop").Name("zones").Obj(),
	)
	if err != nil {
		t.Fatal(err)
	}
	noCRD := &meta.NoKindMatchError{GroupKind: v1alpha1.Kind(v1alpha1.KindSpreadPolicy)}
	tests := []struct {
		name    string
		fail    map[string]error
		want    []string
		wantErr bool
	}{
		{
			name: "namespace shop -> the cluster-scoped objects and shop's, not blog's",
			want: []string{"Node n1", "Pod shop/web-1", "Service shop/web", "Namespace shop", "SpreadPolicy shop/zones"},
		},
		{
			name: "spreadguard's CRDs not installed -> no policies, and no error",
			fail: map[string]error{v1alpha1.KindSpreadPolicy: noCRD, v1alpha1.KindClusterSpreadPolicy: noCRD},
			want: []string{"Node n1", "Pod shop/web-1", "Service shop/web", "Namespace shop"},
		},
		{
			name:    "pods forbidden -> an error, not a cluster without pods",
			fail:    map[string]error{"Pod": errors.New(`pods is forbidden`)},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := lookup.Read(t.Context(), listFails{store, tt.fail}, "shop")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Read() error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, names(objs)); diff != "" {
				t.Errorf("Read() (-want +got):\n%s", diff)
			}
		})
	}
}

func names(objs []runtime.Object) []string {
	var out []string
	for _, obj := range objs {
		o := obj.(client.Object)
		k, _ := cache.KindOf(o)
		n := o.GetName()
		if o.GetNamespace() != "" {
			n = o.GetNamespace() + "/" + n
		}
		out = append(out, k.GVK.Kind+" "+n)
	}
	return out
}
