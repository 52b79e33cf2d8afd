package chart_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cluster answers the templates' lookup calls from the objects it holds, as
// the API server does on `helm install` and `helm upgrade`.
type cluster struct {
	t       *testing.T
	objects []runtime.Object
}

func (c cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	// The chart looks up nothing but its own Secret; anything else is a
	// change these tests must hear about.
	if gvk != (schema.GroupVersionKind{Version: "v1", Kind: "Secret"}) {
		c.t.Errorf("the chart looks up %v; this fake cluster only knows Secrets", gvk)
		return nil, false, fmt.Errorf("unexpected lookup of %v", gvk)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return dynamicfake.NewSimpleDynamicClient(scheme, c.objects...).Resource(gvr), true, nil
}

func TestGeneratedCertificateSurvivesUpgrade(t *testing.T) {
	t.Parallel()
	vals := ciValues(t, "self-signed-values.yaml")
	installed := renderWithLookup(t, vals, false, cluster{t: t})
	first := find[*secret](t, installed, fullname+"-tls")
	checkBundlesMatch(t, installed, first)

	incomplete := first.DeepCopy()
	delete(incomplete.Data, "tls.key")
	foreign := first.DeepCopy()
	foreign.Namespace = "elsewhere"

	tests := []struct {
		name     string
		existing []runtime.Object
		// wantKept says whether the upgrade must keep the first
		// certificate; otherwise it must generate a new one.
		wantKept bool
	}{
		{name: "upgrade with the installed Secret in the cluster -> Secret and caBundle unchanged", existing: []runtime.Object{first}, wantKept: true},
		{name: "upgrade after the Secret was deleted -> a new CA, the caBundle follows", wantKept: false},
		{name: "upgrade with the Secret missing tls.key -> a new CA, the caBundle follows", existing: []runtime.Object{incomplete}, wantKept: false},
		{name: "the same Secret in another namespace only -> a new CA", existing: []runtime.Object{foreign}, wantKept: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			upgraded := renderWithLookup(t, vals, true, cluster{t: t, objects: tc.existing})
			got := find[*secret](t, upgraded, fullname+"-tls")
			checkBundlesMatch(t, upgraded, got)
			if tc.wantKept {
				if diff := cmp.Diff(first.Data, got.Data); diff != "" {
					t.Errorf("Secret data changed on upgrade (-installed +upgraded):\n%s", diff)
				}
				return
			}
			if cmp.Equal(first.Data["ca.crt"], got.Data["ca.crt"]) {
				t.Errorf("the upgrade kept the CA although the cluster holds no usable Secret")
			}
			checkGeneratedSecret(t, got, 730)
		})
	}
}

// checkBundlesMatch checks that every webhook trusts the CA in s.
func checkBundlesMatch(t *testing.T, objs []client.Object, s *secret) {
	t.Helper()
	r := release{objects: objs}
	if diff := cmp.Diff(everyWebhook(s.Data["ca.crt"]), caBundles(t, r)); diff != "" {
		t.Errorf("caBundles differ from the Secret's ca.crt (-secret +webhooks):\n%s", diff)
	}
}
