package cache

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

func TestKindsAreConsistent(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, k := range InformedKinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			if seen[k.GVK] {
				t.Fatalf("%s is in the table twice", k.GVK)
			}
			seen[k.GVK] = true
			gvks, _, err := scheme.ObjectKinds(k.New())
			if err != nil || len(gvks) != 1 || gvks[0] != k.GVK {
				t.Errorf("the scheme knows New()'s %T as %v (%v), want %s", k.New(), gvks, err, k.GVK)
			}
			listGVKs, _, err := scheme.ObjectKinds(k.NewList())
			if want := k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"); err != nil || len(listGVKs) != 1 || listGVKs[0] != want {
				t.Errorf("the scheme knows NewList()'s %T as %v (%v), want %s", k.NewList(), listGVKs, err, want)
			}
			if plural, _ := apimeta.UnsafeGuessKindToResource(k.GVK); plural.Resource != k.Resource {
				t.Errorf("Resource = %q, want the API's plural %q", k.Resource, plural.Resource)
			}
			if got, ok := KindOf(k.New()); !ok || got.GVK != k.GVK {
				t.Errorf("KindOf(%T) = %s, %v; want %s", k.New(), got.GVK, ok, k.GVK)
			}
			if got, ok := KindOf(k.NewList()); !ok || got.GVK != k.GVK {
				t.Errorf("KindOf(%T) = %s, %v; want %s", k.NewList(), got.GVK, ok, k.GVK)
			}
			if got, ok := KindFor(k.GVK); !ok || got.Resource != k.Resource {
				t.Errorf("KindFor(%s) = %q, %v; want %q", k.GVK, got.Resource, ok, k.Resource)
			}
			// New hands out a fresh object each time: an informer or a
			// decoder filling it must not fill the table's.
			if a, b := k.New(), k.New(); reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() {
				t.Error("New() returned the same object twice")
			}
		})
	}
}

func TestEveryWorkloadKindIsRead(t *testing.T) {
	for _, w := range workload.Kinds {
		k, ok := KindFor(w.GVK)
		if !ok {
			t.Errorf("workload kind %s is not in InformedKinds: the scale forecast and kubectl-spread plan read it", w.GVK)
			continue
		}
		if k.Resource != w.Resource || !k.Namespaced {
			t.Errorf("InformedKinds reads %s as resource %q, namespaced %v; want %q, namespaced", w.GVK, k.Resource, k.Namespaced, w.Resource)
		}
		if got, want := reflect.TypeOf(k.New()), reflect.TypeOf(w.New()); got != want {
			t.Errorf("InformedKinds reads %s into a %v, the workload table into a %v", w.GVK, got, want)
		}
	}
}

func TestReadRulesGrantGetListWatchOnEveryKindAndNothingElse(t *testing.T) {
	read := []string{"get", "list", "watch"}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods", "services", "replicationcontrollers", "namespaces"}, Verbs: read},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "statefulsets", "deployments"}, Verbs: read},
		{APIGroups: []string{"spreadguard.io"}, Resources: []string{"spreadpolicies", "clusterspreadpolicies", "nodetemplates"}, Verbs: read},
		{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodepools"}, Verbs: read},
		{APIGroups: []string{"karpenter.k8s.aws"}, Resources: []string{"ec2nodeclasses"}, Verbs: read},
		{APIGroups: []string{"eks.amazonaws.com"}, Resources: []string{"nodeclasses"}, Verbs: read},
	}
	if diff := cmp.Diff(want, ReadRules(nil)); diff != "" {
		t.Errorf("ReadRules(nil) (-want +got):\n%s", diff)
	}
}

func TestTheCacheIsMadeWhereNoOptionalKindIsServed(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	// A mapper that knows every kind but the optional ones, as an API
	// server without spreadguard's, Karpenter's and the node classes' CRDs.
	mapper := apimeta.NewDefaultRESTMapper(nil)
	for _, k := range InformedKinds {
		if k.Optional {
			continue
		}
		scope := apimeta.RESTScopeRoot
		if k.Namespaced {
			scope = apimeta.RESTScopeNamespace
		}
		mapper.Add(k.GVK, scope)
	}
	opts := Options()
	opts.Scheme, opts.Mapper = scheme, mapper
	if _, err := crcache.New(&rest.Config{Host: "https://127.0.0.1:1"}, opts); err != nil {
		t.Errorf("making the cache where no optional kind is served: %v", err)
	}
}

func TestTheDefaultTransformStripsTheOptionalKindsAndManagedFields(t *testing.T) {
	transform := Options().DefaultTransform
	managed := []metav1.ManagedFieldsEntry{{Manager: "karpenter"}}
	class := &nodeclassv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", ManagedFields: managed, Annotations: map[string]string{"a": "b"}},
		Status:     nodeclassv1.NodeClassStatus{Subnets: []nodeclassv1.Subnet{{Zone: "b"}, {Zone: "a"}, {Zone: "b"}}},
	}
	got, err := transform(class)
	if err != nil {
		t.Fatal(err)
	}
	want := &nodeclassv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Status: nodeclassv1.NodeClassStatus{Subnets: []nodeclassv1.Subnet{{Zone: "a"}, {Zone: "b"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EC2NodeClass through the default transform (-want +got):\n%s", diff)
	}
	policy := &v1alpha1.SpreadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zones", ManagedFields: managed}}
	got, err = transform(policy)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&v1alpha1.SpreadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zones"}}, got); diff != "" {
		t.Errorf("SpreadPolicy through the default transform (-want +got):\n%s", diff)
	}
}
