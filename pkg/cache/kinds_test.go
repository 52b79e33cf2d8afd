package cache

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKindsAreConsistent(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, k := range Kinds {
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

func TestReadRulesGrantGetListWatchOnEveryKindAndNothingElse(t *testing.T) {
	read := []string{"get", "list", "watch"}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods", "services", "replicationcontrollers", "namespaces"}, Verbs: read},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "statefulsets", "deployments"}, Verbs: read},
		{APIGroups: []string{"spreadguard.io"}, Resources: []string{"spreadpolicies", "clusterspreadpolicies", "nodetemplates"}, Verbs: read},
		{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodepools"}, Verbs: read},
	}
	if diff := cmp.Diff(want, ReadRules(nil)); diff != "" {
		t.Errorf("ReadRules(nil) (-want +got):\n%s", diff)
	}
}
