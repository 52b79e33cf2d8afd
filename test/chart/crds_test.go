package chart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// generatedCRDs reads the CRDs `make generate` writes into the chart.
func generatedCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartCRDDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD in %s: run `make generate`", chartCRDDir)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := sigsyaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[crd.Name] = crd
	}
	return out
}

func TestCRDsAreRenderedFromTheGeneratedFiles(t *testing.T) {
	t.Parallel()
	generated := generatedCRDs(t)
	tests := []struct {
		name     string
		vals     string
		wantCRDs bool
		wantKeep bool
	}{
		{name: "defaults -> every generated CRD, kept on uninstall", vals: "{}", wantCRDs: true, wantKeep: true},
		{name: "crds.keep false -> every generated CRD, deleted on uninstall", vals: "crds: {keep: false}", wantCRDs: true},
		{name: "crds.enabled false -> no CRD: they are applied apart", vals: "crds: {enabled: false}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, valuesYAML(t, tc.vals))
			rendered := all[*apiextensionsv1.CustomResourceDefinition](r.objects)
			var names []string
			for _, crd := range rendered {
				names = append(names, crd.Name)
			}
			var want []string
			if tc.wantCRDs {
				for name := range generated {
					want = append(want, name)
				}
			}
			slices.Sort(want)
			if diff := cmp.Diff(want, names); diff != "" {
				t.Fatalf("rendered CRDs (-want +got):\n%s", diff)
			}
			for _, crd := range rendered {
				if diff := cmp.Diff(generated[crd.Name].Spec, crd.Spec); diff != "" {
					t.Errorf("%s: the template changed the generated spec (-generated +rendered):\n%s", crd.Name, diff)
				}
				if got := crd.Annotations["controller-gen.kubebuilder.io/version"]; got == "" {
					t.Errorf("%s lost controller-gen's annotation", crd.Name)
				}
				if _, keep := crd.Annotations["helm.sh/resource-policy"]; keep != tc.wantKeep {
					t.Errorf("%s: helm.sh/resource-policy set = %v, want %v (annotations %v)", crd.Name, keep, tc.wantKeep, crd.Annotations)
				}
				if got := crd.Labels["app.kubernetes.io/instance"]; got != releaseName {
					t.Errorf("%s: label app.kubernetes.io/instance = %q, want %q", crd.Name, got, releaseName)
				}
			}
		})
	}
}

// TestChartShipsNoCRDsDirectory: Helm installs crds/ before the templates,
// without ownership metadata, so a CRD there and in the templates would
// make every install fail as a conflict, and one there alone would never
// be upgraded.
func TestChartShipsNoCRDsDirectory(t *testing.T) {
	t.Parallel()
	if crds := loadChart(t).CRDObjects(); len(crds) > 0 {
		var names []string
		for _, c := range crds {
			names = append(names, c.Filename)
		}
		t.Errorf("the chart has CRDs in crds/: %v; they belong in files/crds/, rendered by templates/webhook-crds.yaml", names)
	}
}

func TestChartCustomResourcesAreHooksUntilTheirKindIsServed(t *testing.T) {
	t.Parallel()
	const vals = `{policy: {namespaces: {team: {constraints: [{topologyKey: topology.kubernetes.io/zone, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}}},
		nodeTemplates: [{name: gpu-c, labels: {topology.kubernetes.io/zone: c}}]}`
	policies := []string{"spreadguard.io/v1alpha1/ClusterSpreadPolicy", "spreadguard.io/v1alpha1/SpreadPolicy"}
	every := append(slices.Clone(policies), "spreadguard.io/v1alpha1/NodeTemplate")
	ours := []string{
		"ClusterSpreadPolicy/" + fullname + "-default",
		"NodeTemplate/gpu-c",
		"SpreadPolicy/team/" + fullname + "-default",
	}
	tests := []struct {
		name      string
		vals      string
		served    []string
		wantHooks []string
	}{
		{name: "fresh install, no spreadguard.io kind served -> every custom resource of the chart is a hook", vals: vals, wantHooks: ours},
		{
			name:      "upgrade from 0.1.0, which had the policies' CRDs and not NodeTemplate's -> only the NodeTemplate is a hook",
			vals:      vals,
			served:    policies,
			wantHooks: []string{"NodeTemplate/gpu-c"},
		},
		{name: "upgrade with every kind served -> no hook: all are objects of the release", vals: vals, served: every},
		{
			name: "crds.enabled false and nothing served -> no hook: the CRDs are the user's to apply first, and Helm says so",
			vals: "{crds: {enabled: false}, nodeTemplates: [{name: gpu-c}]}",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := renderErr(t, valuesYAML(t, tc.vals), installOptions{name: releaseName, namespace: releaseNamespace, apiVersions: tc.served})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantHooks, r.hooks); diff != "" {
				t.Errorf("hooks (-want +got):\n%s", diff)
			}
			for _, o := range r.objects {
				if !strings.HasPrefix(o.GetObjectKind().GroupVersionKind().Group, "spreadguard.io") || !slices.Contains(r.hooks, id(o)) {
					continue
				}
				// The next upgrade finds the kind served and the object
				// rendered as part of the release: Helm adopts it only
				// if it carries the release's ownership metadata.
				want := map[string]string{
					"app.kubernetes.io/managed-by":   "Helm",
					"meta.helm.sh/release-name":      releaseName,
					"meta.helm.sh/release-namespace": releaseNamespace,
					"helm.sh/hook":                   "post-install,post-upgrade",
					"helm.sh/hook-delete-policy":     "before-hook-creation",
				}
				got := map[string]string{}
				for k := range want {
					if v, ok := o.GetLabels()[k]; ok {
						got[k] = v
					}
					if v, ok := o.GetAnnotations()[k]; ok {
						got[k] = v
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: ownership and hook metadata (-want +got):\n%s", id(o), diff)
				}
			}
		})
	}
}

func TestKubeVersionIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version string
		wantErr bool
	}{
		{name: "v1.30.14 -> refused: older than the oldest supported minor", version: "v1.30.14", wantErr: true},
		{name: "v1.31.0 -> accepted", version: "v1.31.0"},
		{name: "v1.31.4-eks-1a2b3c4 (a managed cluster's pre-release suffix) -> accepted", version: "v1.31.4-eks-1a2b3c4"},
		{name: "v1.37.1 -> accepted", version: "v1.37.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderErr(t, map[string]any{}, installOptions{name: releaseName, namespace: releaseNamespace, kubeVersion: tc.version})
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("render for %s: error %v, want an error: %v", tc.version, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "kubeVersion") {
				t.Errorf("the error does not name kubeVersion: %v", err)
			}
		})
	}
}
