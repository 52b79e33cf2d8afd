package chart_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	action4 "helm.sh/helm/v4/pkg/action"
	common4 "helm.sh/helm/v4/pkg/chart/common"
	loader4 "helm.sh/helm/v4/pkg/chart/loader"
	release4 "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// renderHelm4 renders the chart as Helm 4's `helm template` does.
func renderHelm4(t *testing.T, vals map[string]any) release {
	t.Helper()
	c, err := loader4.Load(chartDir)
	if err != nil {
		t.Fatalf("helm 4: load chart: %v", err)
	}
	kv, err := common4.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install := action4.NewInstall(&action4.Configuration{})
	install.DryRunStrategy = action4.DryRunClient
	install.Replace = true
	install.ReleaseName = releaseName
	install.Namespace = releaseNamespace
	install.KubeVersion = kv
	r, err := install.RunWithContext(context.Background(), c, vals)
	if err != nil {
		t.Fatalf("helm 4: render: %v", err)
	}
	rel, ok := r.(*release4.Release)
	if !ok {
		t.Fatalf("helm 4 returned a %T, want a *v1.Release", r)
	}
	manifest := rel.Manifest
	for _, h := range rel.Hooks {
		manifest += "\n---\n" + h.Manifest
	}
	objs, err := decodeManifest(manifest)
	if err != nil {
		t.Fatalf("helm 4: %v", err)
	}
	return release{manifest: manifest, notes: rel.Info.Notes, objects: objs}
}

// withoutGeneratedCerts blanks what differs between two renders on purpose:
// the certificate generated anew by each render without a cluster.
func withoutGeneratedCerts(t *testing.T, objs []client.Object) []client.Object {
	t.Helper()
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		o = o.DeepCopyObject().(client.Object)
		switch x := o.(type) {
		case *secret:
			if x.Name == fullname+"-tls" {
				x.Data = nil
			}
		case *mutatingConfig:
			for i := range x.Webhooks {
				x.Webhooks[i].ClientConfig.CABundle = nil
			}
		case *validatingConfig:
			for i := range x.Webhooks {
				x.Webhooks[i].ClientConfig.CABundle = nil
			}
		}
		out = append(out, o)
	}
	return out
}

func TestHelm4RendersWhatHelm3Renders(t *testing.T) {
	t.Parallel()
	for _, f := range ciFiles {
		t.Run(f.name, func(t *testing.T) {
			v3 := render(t, ciValues(t, f.file))
			v4 := renderHelm4(t, ciValues(t, f.file))
			// Helm 4 orders the manifest differently (webhook configurations
			// are known kinds to it); the objects must be the same.
			if diff := cmp.Diff(byID(withoutGeneratedCerts(t, v3.objects)), byID(withoutGeneratedCerts(t, v4.objects))); diff != "" {
				t.Errorf("objects (-helm 3 +helm 4):\n%s", diff)
			}
			if diff := cmp.Diff(v3.notes, v4.notes); diff != "" {
				t.Errorf("NOTES.txt (-helm 3 +helm 4):\n%s", diff)
			}
			if f.mode == selfSigned {
				// The certificate is generated once per render and shared by
				// the templates in Helm 4 as well.
				checkBundlesMatch(t, v4.objects, find[*secret](t, v4.objects, fullname+"-tls"))
			}
		})
	}
}

func byID(objs []client.Object) map[string]client.Object {
	out := make(map[string]client.Object, len(objs))
	for _, o := range objs {
		out[id(o)] = o
	}
	return out
}
