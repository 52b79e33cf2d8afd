//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

const (
	// envPhase names the phase of hack/e2e.sh the suite runs in: unset for
	// the suite on a cluster with spreadguard installed, phaseUpgrade for
	// TestUpgrade alone on a cluster without it.
	envPhase     = "SPREADGUARD_E2E_PHASE"
	phaseUpgrade = "upgrade"
	// envWebhookCertDir holds the local replicas' serving certificate and
	// its CA (make certs), which the webhook configurations must trust.
	envWebhookCertDir = "SPREADGUARD_E2E_WEBHOOK_CERT_DIR"
	// envHelm is the helm binary (default ../../bin/helm).
	envHelm = "SPREADGUARD_E2E_HELM"

	upgradeRelease   = "spreadguard"
	upgradeNamespace = "spreadguard-system"
	// upgradeTemplate is a NodeTemplate the upgraded release renders: its
	// kind is new in the upgrade.
	upgradeTemplate = "e2e-upgrade"
)

var spreadguardCRDs = []string{"clusterspreadpolicies.spreadguard.io", "nodetemplates.spreadguard.io", "spreadpolicies.spreadguard.io"}

// TestUpgrade is what a platform team does on day two: `helm upgrade` from
// the previous chart (0.1.0, packaged in testdata by hack/previous-chart.sh:
// two CRDs in crds/, no NodeTemplate kind, no status subresource) to this
// one, under a steady stream of pod creates with failurePolicy Fail, then
// the rolling restart the upgrade's Deployment goes through: a replica with
// the upgraded configuration started, the old one stopped (SIGTERM). The
// local replicas run this checkout's binary; what the upgrade changes is the
// chart's (CRDs, RBAC, configuration, webhook configurations) and which
// replicas serve. Their Service is modelled by a front that routes
// connections only to replicas whose /readyz passes, as kube-proxy keeps
// only ready endpoints.
func TestUpgrade(t *testing.T) {
	if os.Getenv(envPhase) != phaseUpgrade {
		t.Skipf("%s is not %q: the upgrade scenario installs spreadguard itself, on a cluster of its own (hack/e2e.sh runs it first; alone: E2E_PHASES=upgrade make e2e)", envPhase, phaseUpgrade)
	}
	for _, env := range []string{envExtraStartCmd, envExtraStopCmd, envExtraKillCmd, envWebhookCertDir} {
		if os.Getenv(env) == "" {
			t.Fatalf("%s is unset: the upgrade phase needs it (hack/e2e.sh sets it)", env)
		}
	}
	ctx := t.Context()
	// Before any replica starts: a replica writes Reports only where the
	// kind is served.
	ensureReportsCRD(t)

	ca, err := os.ReadFile(filepath.Join(os.Getenv(envWebhookCertDir), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	front := newRoundRobin(t)
	webhook := map[string]any{
		"url":           "https://" + front.ln.Addr().String(),
		"caBundle":      base64.StdEncoding.EncodeToString(ca),
		"failurePolicy": "Fail",
	}

	previous := previousChart(t)
	helm(t, "install", upgradeRelease, previous, "--namespace", upgradeNamespace, "--create-namespace",
		"-f", valuesFile(t, map[string]any{"webhook": webhook}), "--wait", "--timeout", "2m")
	t.Run("the previous chart installed its two CRDs from crds/, unowned by the release, without a status subresource", func(t *testing.T) {
		crds := installedCRDs(t)
		if _, ok := crds["nodetemplates.spreadguard.io"]; ok {
			t.Errorf("the NodeTemplate CRD exists before the upgrade: %s is not the chart before the NodeTemplate kind", previous)
		}
		for _, name := range []string{"clusterspreadpolicies.spreadguard.io", "spreadpolicies.spreadguard.io"} {
			crd, ok := crds[name]
			if !ok {
				t.Fatalf("%s is missing after the install of %s", name, previous)
			}
			if hasStatus(crd) {
				t.Errorf("%s already has a status subresource", name)
			}
			if crd.Labels["app.kubernetes.io/managed-by"] == "Helm" {
				t.Errorf("%s is labelled as Helm's: crds/ CRDs carry no ownership", name)
			}
		}
	})

	// The previous release's replica is played by today's binary with the
	// previous chart's configuration. Today's binary reads kinds the
	// previous ClusterRole does not grant (Deployments, node classes, ...)
	// and is not ready until it may: the stand-in gets them from a
	// ClusterRole of the test's own, removed once the chart is upgraded,
	// so that the upgraded replica runs on the upgraded chart's RBAC alone.
	dropStandIn := grantStandInReads(t)
	old := startExtraReplica(t)
	oldBackend := front.add(t, old.addr(), old.readyz())
	f := newFramework(t)
	f.create(hardZonePolicy(v1alpha1.ActionDeny))
	f.create(service(spreadtest.MakeService().Name("load").Selector("app", "load")))
	f.create(service(spreadtest.MakeService().Name("probe").Selector("e2e-probe", "true")))
	f.eventually(policyChangeTimeout, "the previous release's replica is serving", f.serving)
	// A workload for the audit to report on once the CRDs have a status.
	d := makeDeployment("web").Replicas(3).Obj()
	d.Namespace = f.ns
	f.create(d)
	f.waitRunning(labels.SelectorFromSet(labels.Set{"app": "web"}), 3, placeTimeout)

	const rate = 20
	var stream loadStream
	stop := make(chan time.Time)
	results := make(chan loadResult, 1)
	go func() { results <- stream.run(ctx, f, rate, stop, time.Second) }()
	streamStart := time.Now()
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	pause(3 * time.Second)

	upgraded := valuesFile(t, map[string]any{
		"webhook":       webhook,
		"nodeTemplates": []any{map[string]any{"name": upgradeTemplate, "labels": map[string]any{zoneKey: cluster.zones[0]}}},
	})
	chart := filepath.Join("..", "..", "charts", "spreadguard")
	t.Run("helm upgrade before the CRDs are adopted -> refused, naming the ownership metadata, nothing changed", func(t *testing.T) {
		out, err := helmOut(t, "upgrade", upgradeRelease, chart, "--namespace", upgradeNamespace, "-f", upgraded)
		if err == nil {
			t.Fatalf("helm upgrade over CRDs installed from crds/ succeeded without adopting them:\n%s", out)
		}
		t.Logf("refused: %s", strings.TrimSpace(out))
		for _, want := range []string{"exists and cannot be imported into the current release", "meta.helm.sh/release-name"} {
			if !strings.Contains(out, want) {
				t.Errorf("helm upgrade's error does not say %q:\n%s", want, out)
			}
		}
		if _, ok := installedCRDs(t)["nodetemplates.spreadguard.io"]; ok {
			t.Errorf("the refused upgrade created the NodeTemplate CRD")
		}
	})

	// The adoption the chart README documents, then the upgrade.
	crds := []string{"spreadpolicies.spreadguard.io", "clusterspreadpolicies.spreadguard.io"}
	for _, args := range [][]string{
		append(append([]string{"label", "crd"}, crds...), "app.kubernetes.io/managed-by=Helm", "--overwrite"),
		append(append([]string{"annotate", "crd"}, crds...), "meta.helm.sh/release-name="+upgradeRelease,
			"meta.helm.sh/release-namespace="+upgradeNamespace, "--overwrite"),
	} {
		if _, err := kubectlOut(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	upgradeStart := time.Now()
	helm(t, "upgrade", upgradeRelease, chart, "--namespace", upgradeNamespace, "-f", upgraded, "--wait", "--timeout", "2m")
	t.Logf("helm upgrade took %s", time.Since(upgradeStart).Round(time.Millisecond))
	dropStandIn()

	// The rolling restart: a replica of the upgraded release, ready, then
	// the old one told to stop.
	next := startExtraReplica(t)
	nextBackend := front.add(t, next.addr(), next.readyz())
	eventually(t, 30*time.Second, "the front routes to the new replica", func(context.Context) error {
		if !nextBackend.ready.Load() {
			return fmt.Errorf("%s not ready", next.addr())
		}
		return nil
	})
	connsBefore := oldBackend.conns.Load()
	signalled := time.Now()
	inFlight := stream.inFlight.Load()
	if err := runHook(ctx, t, envExtraStopCmd, strconv.Itoa(old.port)); err != nil {
		t.Fatal(err)
	}
	exited := time.Now()
	pause(3 * time.Second)
	close(stop)
	r := <-results

	t.Logf("helm upgrade from %s and a rolling restart under %d creates/s for %s with failurePolicy Fail: %d creates, %d failed, %d admitted without the webhook's mutation, %d slower than 1s, %d in flight at the SIGTERM; connections to the old replica %d (%d before its SIGTERM, %d refused), to the new one %d",
		filepath.Base(previous), rate, time.Since(streamStart).Round(time.Second), r.sent, r.failed, r.unmutated, r.slow, inFlight,
		oldBackend.conns.Load(), connsBefore, oldBackend.dialFailures.Load(), nextBackend.conns.Load())
	if before := oldBackend.unreadyBefore(signalled); len(before) > 0 {
		t.Logf("the old replica was seen not ready before its SIGTERM: %s", strings.Join(before, "; "))
	}
	if unready := oldBackend.unreadyServingFrom(signalled); !unready.IsZero() {
		t.Logf("the old replica was not ready %s after SIGTERM and exited %s after it",
			unready.Sub(signalled).Round(time.Millisecond), exited.Sub(signalled).Round(time.Millisecond))
	}
	t.Run("no create failed or missed the webhook, and the old replica stopped being ready before it closed its port", func(t *testing.T) {
		if r.failed != 0 || r.unmutated != 0 {
			t.Errorf("%d creates failed and %d were admitted without the webhook, want none", r.failed, r.unmutated)
		}
		if connsBefore == 0 || nextBackend.conns.Load() == 0 {
			t.Errorf("connections: %d to the old replica before its SIGTERM, %d to the new one; the restart moved no traffic", connsBefore, nextBackend.conns.Load())
		}
		if n := oldBackend.dialFailures.Load(); n != 0 {
			t.Errorf("%d connections were sent to the old replica after its port closed", n)
		}
		if unready := oldBackend.unreadyServingFrom(signalled); unready.IsZero() || unready.After(exited) {
			t.Errorf("the old replica was not seen not ready while it still served, between its SIGTERM and its exit")
		}
	})

	t.Run("the upgrade updated and adopted the CRDs, added NodeTemplate's and created the release's NodeTemplate", func(t *testing.T) {
		crds := installedCRDs(t)
		for _, name := range spreadguardCRDs {
			crd, ok := crds[name]
			if !ok {
				t.Errorf("%s is missing after the upgrade", name)
				continue
			}
			if got := crd.Annotations["meta.helm.sh/release-name"]; got != upgradeRelease {
				t.Errorf("%s belongs to release %q, want %q", name, got, upgradeRelease)
			}
			if crd.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s lacks helm.sh/resource-policy: keep", name)
			}
			if name != "nodetemplates.spreadguard.io" && !hasStatus(crd) {
				t.Errorf("%s has no status subresource after the upgrade", name)
			}
		}
		var nt v1alpha1.NodeTemplate
		if err := k8s.Get(ctx, client.ObjectKey{Name: upgradeTemplate}, &nt); err != nil {
			t.Errorf("the release's NodeTemplate: %v", err)
		}
	})

	t.Run("after the upgrade the audit writes the policy's status and the namespace's Report", func(t *testing.T) {
		eventually(t, auditTimeout, "kubectl get spreadpolicies shows the Deployment spread", func(ctx context.Context) error {
			return wantPolicyRow(ctx, f.ns, "True", "1", "0", "0")
		})
		eventually(t, auditTimeout, "kubectl get reports shows the Deployment passing", func(ctx context.Context) error {
			return wantReportResults(ctx, f.ns, "Deployment/web pass")
		})
	})

	t.Run("the next helm upgrade adopts the NodeTemplate the upgrade's hook created", func(t *testing.T) {
		helm(t, "upgrade", upgradeRelease, chart, "--namespace", upgradeNamespace, "-f", upgraded, "--wait", "--timeout", "2m")
		manifest, err := helmOut(t, "get", "manifest", upgradeRelease, "--namespace", upgradeNamespace)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(manifest, "kind: NodeTemplate") || !strings.Contains(manifest, "name: "+upgradeTemplate) {
			t.Errorf("the release's manifest does not hold NodeTemplate %s after the second upgrade:\n%s", upgradeTemplate, manifest)
		}
	})
}

// previousChart is the packaged previous chart of testdata.
func previousChart(t *testing.T) string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join("testdata", "spreadguard-*.tgz"))
	if err != nil || len(found) != 1 {
		t.Fatalf("want one packaged chart in testdata (hack/previous-chart.sh), found %v (%v)", found, err)
	}
	return found[0]
}

// valuesFile writes vals as a Helm values file and returns its path.
func valuesFile(t *testing.T, vals map[string]any) string {
	t.Helper()
	data, err := sigsyaml.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// helmOut runs helm against the suite's cluster and returns its combined
// output.
func helmOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv(envHelm)
	if bin == "" {
		bin = filepath.Join("..", "..", "bin", "helm")
	}
	t.Logf("helm %s", strings.Join(args, " "))
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	return string(out), err
}

func helm(t *testing.T, args ...string) {
	t.Helper()
	if out, err := helmOut(t, args...); err != nil {
		t.Fatalf("helm %s: %v\n%s", args[0], err, out)
	}
}

// installedCRDs returns spreadguard's CRDs by name.
func installedCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, name := range spreadguardCRDs {
		// Read unstructured: the suite's scheme has no apiextensions.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		err := k8s.Get(t.Context(), client.ObjectKey{Name: name}, u)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			t.Fatalf("get CRD %s: %v", name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
		out[name] = crd
	}
	return out
}

// hasStatus says whether every served version of crd has a status
// subresource.
func hasStatus(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return len(crd.Spec.Versions) > 0 && !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Served && (v.Subresources == nil || v.Subresources.Status == nil)
	})
}

// grantStandInReads binds the release's ServiceAccount to a ClusterRole
// that reads every kind today's server reads (cache.ReadRules), and
// returns the function that removes both.
func grantStandInReads(t *testing.T) func() {
	t.Helper()
	name := "e2e-upgrade-stand-in-reads"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: cache.ReadRules(nil)}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: upgradeNamespace, Name: upgradeRelease}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := k8s.Create(t.Context(), obj); err != nil {
			t.Fatalf("granting the stand-in replica today's reads: %v", err)
		}
	}
	drop := func() {
		for _, obj := range []client.Object{binding, role} {
			if err := k8s.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing %s: %v", name, err)
			}
		}
	}
	t.Cleanup(drop)
	return drop
}
