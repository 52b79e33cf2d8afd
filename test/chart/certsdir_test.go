package chart_test

import (
	"os"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const plainCertManagerManifests = "../../certs/cert-manager.yaml"

// TestPlainCertManagerManifestsMatchTheChart keeps certs/cert-manager.yaml, for
// installs without Helm, equal to what the chart renders in cert-manager mode
// for a release named spreadguard in namespace spreadguard.
func TestPlainCertManagerManifestsMatchTheChart(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(plainCertManagerManifests)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := decodeManifest(string(data))
	if err != nil {
		t.Fatalf("%s: %v", plainCertManagerManifests, err)
	}
	r, err := renderErr(t, valuesYAML(t, "certManager: {enabled: true}"), installOptions{name: "spreadguard", namespace: "spreadguard"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(certManagerObjects(r.objects), certManagerObjects(plain)); diff != "" {
		t.Errorf("cert-manager objects (-chart +%s):\n%s", plainCertManagerManifests, diff)
	}
}

// certManagerObjects keeps what a plain install must reproduce: kind,
// namespace, name and spec (Helm's labels are the chart's own business).
func certManagerObjects(objs []client.Object) map[string]any {
	out := map[string]any{}
	for _, o := range objs {
		switch x := o.(type) {
		case *cmapi.Issuer:
			out[id(o)] = x.Spec
		case *cmapi.Certificate:
			out[id(o)] = x.Spec
		}
	}
	return out
}
