package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spreadguard/spreadguard/pkg/health"
	"helm.sh/helm/v3/pkg/releaseutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	sigsyaml "sigs.k8s.io/yaml"
)

// The cluster binaries hack/build-binaries.sh builds from source into bin/,
// at the versions the Makefile pins (and exports).
var (
	binDir            = "../../bin"
	wantKubeVersion   = envOr("KUBE_VERSION", "v1.37.1")
	wantEtcdVersion   = envOr("ETCD_VERSION", "v3.7.0")
	chartCRDDir       = filepath.Join(chartDir, "files", "crds")
	certManagerModule = "github.com/cert-manager/cert-manager"
	// The ServiceMonitor CRD ships in the operator's root module, at the
	// version of the API types this module requires.
	monitoringTypesModule = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring"
	monitoringRootModule  = "github.com/prometheus-operator/prometheus-operator"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// warnings records the warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// stampFile is the stamp hack/build-binaries.sh writes for name at version,
// with the build recipe the Makefile exports (BINARY_RECIPE).
func stampFile(name, version string) string {
	recipe := os.Getenv("BINARY_RECIPE")
	if recipe == "" {
		recipe = "static"
	}
	return filepath.Join(binDir, ".stamps", name+"-"+version+"."+recipe)
}

// startAPIServer starts etcd and kube-apiserver from bin/ with the chart's
// CRDs, cert-manager's, the ServiceMonitor's and the PrometheusRule's installed. Missing binaries
// fail the test with the command that builds them.
func startAPIServer(t *testing.T) (*rest.Config, client.Client, *warnings) {
	t.Helper()
	for _, b := range []struct{ name, version string }{{"etcd", wantEtcdVersion}, {"kube-apiserver", wantKubeVersion}} {
		stamp := stampFile(b.name, b.version)
		if _, err := os.Stat(stamp); err != nil {
			t.Fatalf("%s %s is not built in bin/ (no %s): run `make test-chart`, which builds it from source, or `hack/build-binaries.sh %s`", b.name, b.version, stamp, b.name)
		}
	}
	crds, err := filepath.Glob(filepath.Join(chartCRDDir, "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRD in %s: run `make generate`", chartCRDDir)
	}
	certManagerDir := moduleDir(t, certManagerModule, "")
	monitoringDir := moduleDir(t, monitoringRootModule, moduleVersion(t, monitoringTypesModule))
	bin, err := filepath.Abs(binDir)
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths: []string{
			chartCRDDir,
			filepath.Join(certManagerDir, "deploy", "crds"),
			filepath.Join(monitoringDir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"),
			filepath.Join(monitoringDir, "example", "prometheus-operator-crd", "monitoring.coreos.com_prometheusrules.yaml"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start etcd and kube-apiserver from %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the API server: %v", err)
		}
	})
	w := &warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = w
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != wantKubeVersion {
		t.Fatalf("bin/kube-apiserver is %s, want %s", v.GitVersion, wantKubeVersion)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c, w
}

// moduleDir downloads module (at version, or at the version this module
// requires when empty) through the Go module proxy and returns its directory.
func moduleDir(t *testing.T, module, version string) string {
	t.Helper()
	arg := module
	if version != "" {
		arg += "@" + version
	}
	out, err := exec.Command("go", "mod", "download", "-json", arg).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", arg, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", arg, err, m.Error)
	}
	return m.Dir
}

func moduleVersion(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// unstructuredDocs decodes a manifest as the API server will receive it,
// without Go types in between, so that strict field validation sees every
// field as written.
func unstructuredDocs(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(manifest) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("decode:\n%s\n%v", doc, err)
		}
		out = append(out, u)
	}
	return out
}

func createNamespace(t *testing.T, c client.Client, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

var dryRunStrict = &client.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}

// dryRunAll sends each object to the API server as a server-side dry-run
// create with strict field validation, and fails on any refusal or warning.
// The chart's CRDs, which the API server was started with, are sent as a
// dry-run update of the installed ones, as `helm upgrade` sends them.
func dryRunAll(t *testing.T, c client.Client, w *warnings, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		name := fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		if u.GetKind() == "CustomResourceDefinition" && u.GetAPIVersion() == "apiextensions.k8s.io/v1" {
			installed := &unstructured.Unstructured{}
			installed.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.Get(t.Context(), client.ObjectKey{Name: u.GetName()}, installed); err == nil {
				update := u.DeepCopy()
				update.SetResourceVersion(installed.GetResourceVersion())
				if err := c.Update(t.Context(), update, &client.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
					t.Errorf("the API server refuses %s as an update of the installed one: %v", name, err)
				}
				if got := w.take(); len(got) > 0 {
					t.Errorf("the API server warns about %s: %q", name, got)
				}
				continue
			}
		}
		if err := c.Create(t.Context(), u.DeepCopy(), dryRunStrict); err != nil {
			t.Errorf("the API server refuses %s: %v", name, err)
		}
		if got := w.take(); len(got) > 0 {
			t.Errorf("the API server warns about %s: %q", name, got)
		}
	}
}

func TestManifestsAcceptedByAPIServer(t *testing.T) {
	t.Parallel()
	_, c, w := startAPIServer(t)
	// The release namespace enforces the restricted Pod Security Standard,
	// as a platform team would configure it.
	restricted := map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}
	createNamespace(t, c, releaseNamespace, restricted)
	for _, ns := range []string{"payments", "batch"} {
		createNamespace(t, c, ns, nil)
	}

	for _, f := range ciFiles {
		t.Run(f.name, func(t *testing.T) {
			r := render(t, ciValues(t, f.file))
			objs := unstructuredDocs(t, r.manifest)
			if len(objs) != len(r.objects) {
				t.Fatalf("%d documents sent, %d decoded", len(objs), len(r.objects))
			}
			dryRunAll(t, c, w, objs)
		})
	}

	t.Run("the webhook's pod passes the restricted Pod Security Standard", func(t *testing.T) {
		d := find[*deployment](t, render(t, ciValues(t, "default-values.yaml")).objects, fullname)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: releaseNamespace, Labels: d.Spec.Template.Labels},
			Spec:       d.Spec.Template.Spec,
		}
		if err := c.Create(t.Context(), pod.DeepCopy(), dryRunStrict); err != nil {
			t.Errorf("a pod of the webhook's template is refused in a restricted namespace: %v", err)
		}
		if got := w.take(); len(got) > 0 {
			t.Errorf("warnings for the webhook's pod: %q", got)
		}
		// The control: the same pod without its container securityContext
		// must be refused, or the check above proves nothing.
		loose := pod.DeepCopy()
		loose.Spec.Containers[0].SecurityContext = nil
		if err := c.Create(t.Context(), loose, dryRunStrict); err == nil {
			t.Errorf("a pod without a container securityContext is admitted: Pod Security admission is not enforcing")
		}
		w.take()
	})

	t.Run("reports.installCRD: the Report CRD is established and stores Reports whole", func(t *testing.T) {
		r := render(t, valuesYAML(t, "reports: {installCRD: true}"))
		var crd *unstructured.Unstructured
		for _, u := range unstructuredDocs(t, r.manifest) {
			if u.GetKind() == "CustomResourceDefinition" && u.GetName() == "reports.openreports.io" {
				crd = u
			}
		}
		if crd == nil {
			t.Fatal("no CustomResourceDefinition reports.openreports.io rendered")
		}
		if err := c.Create(t.Context(), crd.DeepCopy()); err != nil {
			t.Fatalf("creating the CRD: %v", err)
		}
		// A Report as the audit writes it, plus what another producer (a
		// policy engine) adds: both must come back as they were written.
		rep, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&health.Report{
			Source:  health.ReportSource,
			Summary: health.ReportSummary{Pass: 1, Fail: 1},
			Results: []health.ReportResult{{
				Policy: "shop/zones", Rule: "topology.kubernetes.io/zone DoNotSchedule", Result: "fail", Message: "skew 2 > maxSkew 1",
				Properties: map[string]string{"domains": "a=3,b=1", "skew": "2"},
				Resources:  []corev1.ObjectReference{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "payments", Name: "web"}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		rep["scope"] = map[string]any{"kind": "Deployment", "name": "web"}
		rep["results"].([]any)[0].(map[string]any)["severity"] = "high"
		want := &unstructured.Unstructured{Object: rep}
		want.SetAPIVersion("openreports.io/v1alpha1")
		want.SetKind("Report")
		want.SetNamespace("payments")
		want.SetName("spreadguard")
		var created error
		for range 100 {
			if created = c.Create(t.Context(), want.DeepCopy()); created == nil || !meta.IsNoMatchError(created) {
				break
			}
			// The client's mapper discovers the new kind once the CRD
			// is established.
			time.Sleep(100 * time.Millisecond)
		}
		if created != nil {
			t.Fatalf("creating a Report: %v", created)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "payments", Name: "spreadguard"}, got); err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{"source", "summary", "results", "scope"} {
			if diff := cmp.Diff(want.Object[field], got.Object[field]); diff != "" {
				t.Errorf("%s of the stored Report (-written +stored):\n%s", field, diff)
			}
		}
	})

	t.Run("failurePolicy Fail and the webhook unreachable -> pod creates refused, the removal of a pod's last scheduling gate admitted", func(t *testing.T) {
		const ns = "ungating"
		createNamespace(t, c, ns, nil)
		// Created before the webhook configuration exists, as a
		// controller (Kueue) creates it long before it ungates it.
		gated := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gated"},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: new(false),
				SchedulingGates:              []corev1.PodSchedulingGate{{Name: "example.com/quota"}},
				Containers:                   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if err := c.Create(t.Context(), gated); err != nil {
			t.Fatal(err)
		}
		// Nothing listens on port 1: every call fails.
		r := render(t, valuesYAML(t, "webhook: {url: 'https://127.0.0.1:1', failurePolicy: Fail}"))
		conf := find[*validatingConfig](t, r.objects, fullname)
		if err := c.Create(t.Context(), conf); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Delete(context.WithoutCancel(t.Context()), conf); err != nil {
				t.Errorf("delete %s: %v", id(conf), err)
			}
		})
		another := gated.DeepCopy()
		another.Name, another.Spec.SchedulingGates = "another", nil
		var refused error
		for range 100 {
			// The API server applies a new configuration within a moment.
			if refused = c.Create(t.Context(), another.DeepCopy(), client.DryRunAll); refused != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if refused == nil || !strings.Contains(refused.Error(), `failed calling webhook "pods.validate.spreadguard.io"`) {
			t.Fatalf("a pod create with the webhook unreachable under Fail: %v, want it refused by the failed call (the control)", refused)
		}
		ungated := gated.DeepCopy()
		ungated.Spec.SchedulingGates = nil
		if err := c.Update(t.Context(), ungated); err != nil {
			t.Errorf("removing the last scheduling gate with the webhook unreachable: %v, want it admitted (failurePolicy Ignore on that update)", err)
		}
		w.take()
	})

	t.Run("plain cert-manager manifests of certs/", func(t *testing.T) {
		data, err := os.ReadFile(plainCertManagerManifests)
		if err != nil {
			t.Fatal(err)
		}
		createNamespace(t, c, "spreadguard", nil)
		dryRunAll(t, c, w, unstructuredDocs(t, string(data)))
	})

	t.Run("the ServiceAccount may read what the server reads, patch pods and write the audit's objects, and nothing else", func(t *testing.T) {
		r := render(t, ciValues(t, "default-values.yaml"))
		for _, o := range r.objects {
			switch o.(type) {
			case *corev1.ServiceAccount, *clusterRole, *clusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
				if err := c.Create(t.Context(), o); err != nil {
					t.Fatalf("create %s: %v", id(o), err)
				}
			}
		}
		user := "system:serviceaccount:" + releaseNamespace + ":" + fullname
		type access struct{ namespace, group, resource, subresource, verb string }
		var want, got []access
		for _, a := range []struct {
			access
			allowed bool
		}{
			{access{"default", "", "pods", "", "list"}, true},
			{access{"default", "", "pods", "", "watch"}, true},
			{access{"default", "", "pods", "", "get"}, true},
			{access{"default", "", "nodes", "", "watch"}, true},
			{access{"default", "", "services", "", "list"}, true},
			{access{"default", "", "namespaces", "", "get"}, true},
			{access{"default", "", "replicationcontrollers", "", "get"}, true},
			{access{"default", "apps", "replicasets", "", "get"}, true},
			{access{"default", "apps", "statefulsets", "", "watch"}, true},
			{access{"default", "spreadguard.io", "spreadpolicies", "", "list"}, true},
			{access{"default", "spreadguard.io", "clusterspreadpolicies", "", "watch"}, true},
			{access{"default", "", "pods", "", "create"}, false},
			// The deletion cost keeper's server-side apply of the annotation.
			{access{"default", "", "pods", "", "patch"}, true},
			{access{"default", "", "pods", "", "update"}, false},
			{access{"default", "", "pods", "eviction", "create"}, false},
			{access{"default", "", "nodes", "", "update"}, false},
			{access{"default", "", "secrets", "", "get"}, false},
			{access{"default", "", "configmaps", "", "list"}, false},
			{access{"default", "", "events", "", "create"}, false},
			{access{"default", "apps", "deployments", "", "list"}, true},
			{access{"default", "apps", "deployments", "scale", "update"}, false},
			{access{"default", "spreadguard.io", "spreadpolicies", "", "update"}, false},
			{access{"default", "spreadguard.io", "spreadpolicies", "status", "patch"}, true},
			{access{"default", "spreadguard.io", "spreadpolicies", "status", "update"}, false},
			{access{"default", "openreports.io", "reports", "", "update"}, true},
			{access{"default", "openreports.io", "reports", "", "watch"}, true},
			{access{"default", "coordination.k8s.io", "leases", "", "create"}, false},
			{access{releaseNamespace, "coordination.k8s.io", "leases", "", "create"}, true},
			{access{releaseNamespace, "coordination.k8s.io", "leases", "", "update"}, true},
			{access{releaseNamespace, "coordination.k8s.io", "leases", "", "delete"}, false},
		} {
			if a.allowed {
				want = append(want, a.access)
			}
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: a.namespace, Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb,
				},
			}}
			if err := c.Create(t.Context(), sar); err != nil {
				t.Fatalf("SubjectAccessReview: %v", err)
			}
			if sar.Status.Allowed {
				got = append(got, a.access)
			}
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(access{})); diff != "" {
			t.Errorf("what the ServiceAccount may do (-want +got):\n%s", diff)
		}
	})

	// After the ServiceAccount's subtest, which creates the metrics-reader
	// ClusterRole this one binds.
	t.Run("the ServiceMonitor's token may GET /metrics and nothing else", func(t *testing.T) {
		r := render(t, valuesYAML(t, "metrics: {serviceMonitor: {enabled: true}}"))
		scraper := fullname + "-metrics-scraper"
		for _, o := range r.objects {
			if o.GetName() != scraper && o.GetName() != fullname+"-metrics-reader" {
				continue
			}
			if _, ok := o.(*corev1.Secret); ok {
				// The token controller, which fills it, is not running.
				continue
			}
			if err := c.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create %s: %v", id(o), err)
			}
		}
		user := "system:serviceaccount:" + releaseNamespace + ":" + scraper
		groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"}
		for _, a := range []struct {
			name    string
			spec    authorizationv1.SubjectAccessReviewSpec
			allowed bool
		}{
			{"GET /metrics", authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}, true},
			{"GET /logs", authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/logs", Verb: "get"}}, false},
			{"list pods", authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Resource: "pods", Verb: "list"}}, false},
			{"get secrets", authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: releaseNamespace, Resource: "secrets", Verb: "get"}}, false},
		} {
			a.spec.User, a.spec.Groups = user, groups
			var allowed bool
			// The authorizer sees a new binding a moment after it is
			// created: the first question, the one allowed, waits for it.
			for range 50 {
				sar := &authorizationv1.SubjectAccessReview{Spec: a.spec}
				if err := c.Create(t.Context(), sar); err != nil {
					t.Fatalf("SubjectAccessReview: %v", err)
				}
				if allowed = sar.Status.Allowed; allowed || !a.allowed {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if allowed != a.allowed {
				t.Errorf("%s may %s: %v, want %v", scraper, a.name, allowed, a.allowed)
			}
		}
	})
}
