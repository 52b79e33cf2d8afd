//go:build integration

package integration

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/spreadguard/spreadguard/pkg/cache"
)

// TestKindsMatchTheAPIServer holds the table of kinds to what a real API
// server serves: the resource each kind is read and granted as, and its
// scope, which the offline decoder and the live reads rely on.
func TestKindsMatchTheAPIServer(t *testing.T) {
	mapper := suite.client.RESTMapper()
	for _, k := range cache.InformedKinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			m, err := mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
			if err != nil {
				t.Fatalf("the API server does not serve %s: %v", k.GVK, err)
			}
			if m.Resource.Resource != k.Resource {
				t.Errorf("Resource = %q, the API server serves %q", k.Resource, m.Resource.Resource)
			}
			if namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace; namespaced != k.Namespaced {
				t.Errorf("Namespaced = %v, the API server says %v", k.Namespaced, namespaced)
			}
		})
	}
}
