package chart_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

const (
	chartDir = "../../charts/spreadguard"
	// releaseName and releaseNamespace differ from the chart's name and the
	// plain manifests' namespace on purpose, so that a name or namespace
	// written into a template instead of derived shows up.
	releaseName      = "guard"
	releaseNamespace = "spreadguard-system"
	// fullname is what the chart derives from releaseName.
	fullname = "guard-spreadguard"
	// kubeVersion is the version the chart is rendered for, as in the
	// cluster the chart is tested against.
	kubeVersion = "v1.37.1"
)

// ciFile is one values file of charts/spreadguard/ci, which `helm lint` and
// these tests render.
type ciFile struct {
	name string // the scenario
	file string
	// mode is how the serving certificate is obtained.
	mode certMode
}

type certMode int

const (
	selfSigned certMode = iota
	certManager
	externalURL
)

var ciFiles = []ciFile{
	{name: "defaults", file: "default-values.yaml", mode: selfSigned},
	{name: "cert-manager mode", file: "cert-manager-values.yaml", mode: certManager},
	{name: "self-signed mode, strict settings", file: "self-signed-values.yaml", mode: selfSigned},
	{name: "namespace defaults", file: "namespace-defaults-values.yaml", mode: selfSigned},
	{name: "external URL", file: "external-url-values.yaml", mode: externalURL},
}

// TestEveryCIFileIsCovered keeps ciFiles and the ci directory in step: a new
// values file there gets rendered here too.
func TestEveryCIFileIsCovered(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(filepath.Join(chartDir, "ci"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk, covered []string
	for _, e := range entries {
		onDisk = append(onDisk, e.Name())
	}
	for _, f := range ciFiles {
		covered = append(covered, f.file)
	}
	slices.Sort(covered)
	if diff := cmp.Diff(onDisk, covered); diff != "" {
		t.Errorf("values files in ci/ (-on disk +covered by the tests):\n%s", diff)
	}
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, cmapi.AddToScheme, monitoringv1.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strictDecoder refuses unknown and duplicate fields, so a misspelt field in
// a template fails here instead of being dropped by the API server.
var strictDecoder = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// readValues reads a values file as Helm does (YAML through JSON).
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read values: %v", err)
	}
	vals := map[string]any{}
	if err := sigsyaml.Unmarshal(data, &vals); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return vals
}

func ciValues(t *testing.T, file string) map[string]any {
	t.Helper()
	return readValues(t, filepath.Join(chartDir, "ci", file))
}

// valuesYAML parses literal values written in a test.
func valuesYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if err := sigsyaml.Unmarshal([]byte(s), &vals); err != nil {
		t.Fatalf("parse values %q: %v", s, err)
	}
	return vals
}

// release is a chart rendered as `helm template` renders it.
type release struct {
	manifest string
	notes    string
	objects  []client.Object
	// hooks are the ids (id()) of the objects Helm takes for hooks.
	hooks []string
}

// installOptions are the release name and namespace of a render, and the
// API versions the cluster serves beyond the built-in ones (as
// .Capabilities.APIVersions sees them).
type installOptions struct {
	name, namespace string
	apiVersions     []string
	// kubeVersion is the cluster's; empty means kubeVersion.
	kubeVersion string
}

var defaultInstall = installOptions{name: releaseName, namespace: releaseNamespace}

// renderErr renders the chart with Helm 3's install action in client-only
// dry-run mode, the code path of `helm template`, schema validation included.
func renderErr(t *testing.T, vals map[string]any, opts installOptions) (release, error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = opts.name
	install.Namespace = opts.namespace
	version := opts.kubeVersion
	if version == "" {
		version = kubeVersion
	}
	install.KubeVersion = mustKubeVersion(t, version)
	install.APIVersions = opts.apiVersions
	rel, err := install.RunWithContext(context.Background(), loadChart(t), vals)
	if err != nil {
		return release{}, err
	}
	// `helm template` prints the hooks after the release's objects; so
	// does this (the chart's own policies are hooks on a fresh install).
	manifest := rel.Manifest
	var hooks []string
	for _, h := range rel.Hooks {
		manifest += "\n---\n" + h.Manifest
		objs, err := decodeManifest(h.Manifest)
		if err != nil {
			return release{}, err
		}
		hooks = append(hooks, ids(objs)...)
	}
	slices.Sort(hooks)
	objs, err := decodeManifest(manifest)
	if err != nil {
		return release{}, err
	}
	return release{manifest: manifest, notes: rel.Info.Notes, objects: objs, hooks: hooks}, nil
}

func render(t *testing.T, vals map[string]any) release {
	t.Helper()
	r, err := renderErr(t, vals, defaultInstall)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

func mustKubeVersion(t *testing.T, version string) *chartutil.KubeVersion {
	t.Helper()
	v, err := chartutil.ParseKubeVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// renderWithLookup renders with the template engine itself, the way an
// install or upgrade against a cluster does, with lookup answered by lookup.
// It returns the objects of every template, in file order.
func renderWithLookup(t *testing.T, vals map[string]any, upgrade bool, lookup engine.ClientProvider) []client.Object {
	t.Helper()
	c := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *mustKubeVersion(t, kubeVersion)
	revision := 1
	if upgrade {
		revision = 2
	}
	top, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNamespace, Revision: revision, IsInstall: !upgrade, IsUpgrade: upgrade,
	}, caps)
	if err != nil {
		t.Fatalf("render values: %v", err)
	}
	files, err := engine.RenderWithClientProvider(c, top, lookup)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		fmt.Fprintf(&b, "---\n%s\n", files[name])
	}
	objs, err := decodeManifest(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decodeManifest decodes every document of a multi-document manifest into
// its typed object.
func decodeManifest(manifest string) ([]client.Object, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	// SplitManifests names documents manifest-0, manifest-1, ...; sort them
	// numerically to keep the manifest's order.
	slices.SortFunc(keys, func(a, b string) int {
		var x, y int
		fmt.Sscanf(a, "manifest-%d", &x)
		fmt.Sscanf(b, "manifest-%d", &y)
		return x - y
	})
	var out []client.Object
	for _, k := range keys {
		doc := docs[k]
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, gvk, err := strictDecoder.Decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode document:\n%s\n: %w", doc, err)
		}
		co, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%v is not an object with metadata", gvk)
		}
		co.GetObjectKind().SetGroupVersionKind(*gvk)
		out = append(out, co)
	}
	return out, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(doc, "\n") {
		if t := strings.TrimSpace(line); t == "" || t == "---" || strings.HasPrefix(t, "#") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// ids names each object as Kind/namespace/name (Kind/name when cluster-scoped).
func ids(objs []client.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, id(o))
	}
	slices.Sort(out)
	return out
}

func id(o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if o.GetNamespace() == "" {
		return kind + "/" + o.GetName()
	}
	return kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// find returns the only object of type T named name, failing the test when
// there is none or more than one.
func find[T client.Object](t *testing.T, objs []client.Object, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if x, ok := o.(T); ok && o.GetName() == name {
			found = append(found, x)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("want one %T named %q among %v, found %d", zero, name, ids(objs), len(found))
	}
	return found[0]
}

// all returns every object of type T.
func all[T client.Object](objs []client.Object) []T {
	var out []T
	for _, o := range objs {
		if x, ok := o.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// Short names of the objects the tests look at.
type (
	mutatingConfig     = admissionregistrationv1.MutatingWebhookConfiguration
	validatingConfig   = admissionregistrationv1.ValidatingWebhookConfiguration
	deployment         = appsv1.Deployment
	secret             = corev1.Secret
	configMap          = corev1.ConfigMap
	service            = corev1.Service
	pdb                = policyv1.PodDisruptionBudget
	clusterRole        = rbacv1.ClusterRole
	clusterRoleBinding = rbacv1.ClusterRoleBinding
)
