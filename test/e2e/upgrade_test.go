//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
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

// envPreviousWebhooks is the directory where hack/previous-webhook.sh built
// the webhook of each previous chart's commit, as COMMIT/spreadguard-webhook.
const envPreviousWebhooks = "SPREADGUARD_E2E_PREVIOUS_WEBHOOKS"

// previousRelease is a released chart TestUpgrade starts from, packaged by
// hack/previous-chart.sh as testdata/previous/LABEL-COMMIT.tgz.
type previousRelease struct {
	label, commit, chart string
	// crds are the CRDs of its crds/, which its install creates.
	crds []string
}

// TestUpgrade is what a platform team does on day two: `helm upgrade` from
// a released chart to this one, under a steady stream of pod creates with
// failurePolicy Fail, then the rolling restart the upgrade's Deployment
// goes through: a replica of the upgraded release started, the old one
// stopped (SIGTERM). It starts from the first and from the last chart
// 0.1.0 (packaged in testdata/previous by hack/previous-chart.sh), each
// with the webhook binary of its own commit serving, on its own chart's
// RBAC and configuration, until the rollout, so that an old replica that
// cannot run beside the upgraded chart, or stops badly, is seen. The new
// replica runs this checkout's binary. The CRDs are adopted as the chart
// README says: from the newest (three CRDs) with its kubectl command, from
// the oldest (two) with `helm upgrade --take-ownership`. Their Service is
// modelled by a front that routes connections only to replicas whose
// /readyz passes, as kube-proxy keeps only ready endpoints.
func TestUpgrade(t *testing.T) {
	if os.Getenv(envPhase) != phaseUpgrade {
		t.Skipf("%s is not %q: the upgrade scenario installs spreadguard itself, on a cluster of its own (hack/e2e.sh runs it first; alone: E2E_PHASES=upgrade make e2e)", envPhase, phaseUpgrade)
	}
	for _, env := range []string{envExtraStartCmd, envExtraStopCmd, envExtraKillCmd, envWebhookCertDir, envPreviousWebhooks} {
		if os.Getenv(env) == "" {
			t.Fatalf("%s is unset: the upgrade phase needs it (hack/e2e.sh sets it)", env)
		}
	}
	// Before any replica starts: a replica writes Reports only where the
	// kind is served.
	ensureReportsCRD(t)
	patch, takeOwnership := readmeAdoption(t)
	adoptions := map[string]adoption{
		"newest": {name: "the README's kubectl command", commands: patch},
		"oldest": {name: "helm upgrade --take-ownership", commands: takeOwnership},
	}
	for _, prev := range previousReleases(t) {
		a, ok := adoptions[prev.label]
		if !ok {
			t.Fatalf("no adoption chosen for the previous chart %q (%s)", prev.label, prev.chart)
		}
		t.Run(fmt.Sprintf("from the %s 0.1.0 (%.12s) with its own webhook, the CRDs adopted by %s", prev.label, prev.commit, a.name), func(t *testing.T) {
			upgradeFrom(t, prev, a)
		})
	}
}

// adoption is how the CRDs of a previous release are handed to it and the
// release upgraded: shell commands, with RELEASE, NAMESPACE,
// charts/spreadguard and values.yaml as the chart README writes them.
type adoption struct {
	name     string
	commands []string
}

func upgradeFrom(t *testing.T, prev previousRelease, adopt adoption) {
	ctx := t.Context()
	ca, err := os.ReadFile(filepath.Join(os.Getenv(envWebhookCertDir), "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	oldBinary := filepath.Join(os.Getenv(envPreviousWebhooks), prev.commit, "spreadguard-webhook")
	if _, err := os.Stat(oldBinary); err != nil {
		t.Fatalf("the webhook of %s: %v (hack/previous-webhook.sh builds it)", prev.commit, err)
	}
	front := newRoundRobin(t)
	webhook := map[string]any{
		"url":           "https://" + front.ln.Addr().String(),
		"caBundle":      base64.StdEncoding.EncodeToString(ca),
		"failurePolicy": "Fail",
	}

	helm(t, "install", upgradeRelease, prev.chart, "--namespace", upgradeNamespace, "--create-namespace",
		"-f", valuesFile(t, map[string]any{"webhook": webhook}), "--wait", "--timeout", "2m")
	t.Cleanup(func() { uninstall(t) })
	t.Run("the previous chart installed the CRDs of its crds/, unowned by the release", func(t *testing.T) {
		crds := installedCRDs(t)
		for name, crd := range crds {
			if crd.Labels["app.kubernetes.io/managed-by"] == "Helm" {
				t.Errorf("%s is labelled as Helm's: crds/ CRDs carry no ownership", name)
			}
		}
		if diff := cmp.Diff(prev.crds, slices.Sorted(maps.Keys(crds))); diff != "" {
			t.Errorf("spreadguard's CRDs after the install of %s (-its crds/ +installed):\n%s", prev.chart, diff)
		}
	})

	// The previous release's replica: its own binary, on its chart's
	// configuration and RBAC.
	old := startExtraReplica(t, oldBinary)
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
	t.Run("helm upgrade before the CRDs are adopted -> refused, naming the ownership metadata, no CRD added", func(t *testing.T) {
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
		if diff := cmp.Diff(prev.crds, slices.Sorted(maps.Keys(installedCRDs(t)))); diff != "" {
			t.Errorf("the refused upgrade changed the CRDs (-before +after):\n%s", diff)
		}
	})

	// The adoption and the upgrade the chart README documents, as written.
	upgradeStart := time.Now()
	for _, command := range adopt.commands {
		runREADME(t, command, chart, upgraded)
	}
	t.Logf("the adoption and helm upgrade took %s", time.Since(upgradeStart).Round(time.Millisecond))

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

	t.Logf("helm upgrade from the %s 0.1.0 (%.12s, its own webhook) and a rolling restart under %d creates/s for %s with failurePolicy Fail: %d creates, %d failed, %d admitted without the webhook's mutation, %d slower than 1s, %d in flight at the SIGTERM; connections to the old replica %d (%d before its SIGTERM, %d refused), to the new one %d",
		prev.label, prev.commit, rate, time.Since(streamStart).Round(time.Second), r.sent, r.failed, r.unmutated, r.slow, inFlight,
		oldBackend.conns.Load(), connsBefore, oldBackend.dialFailures.Load(), nextBackend.conns.Load())
	if before := oldBackend.unreadyBefore(signalled); len(before) > 0 {
		t.Logf("the old replica was seen not ready before its SIGTERM: %s", strings.Join(before, "; "))
	}
	if unready := oldBackend.unreadyServingFrom(signalled); !unready.IsZero() {
		t.Logf("the old replica was not ready %s after SIGTERM and exited %s after it",
			unready.Sub(signalled).Round(time.Millisecond), exited.Sub(signalled).Round(time.Millisecond))
	} else {
		t.Logf("the old replica was not seen not ready while it still served; it exited %s after its SIGTERM", exited.Sub(signalled).Round(time.Millisecond))
	}
	// How the old replica stops is its release's: one that closes its port
	// before its readiness fails (0.1.0 had no shutdown delay) gets
	// connections the front can only refuse, which the API server sees
	// reset and sends again. Today's replica's stop is held to no such
	// connection by the replica scenario of the suite.
	if n := oldBackend.dialFailures.Load(); n != 0 {
		t.Logf("%d connections were sent to the old replica after its port closed", n)
	}
	// An old replica that stops without draining (0.1.0 at b36a217 had no
	// shutdown delay: it closes its port at SIGTERM, before its readiness
	// fails) drops the creates it holds, or that reach it before the front
	// sees its port closed, as a crash does; its release decides that, not
	// this one, so such a stop is held to the crash's bound of the replica
	// scenario (docs/faults.md): the creates in flight at the signal and
	// the connections refused after it. A replica that drains is held to
	// none.
	drained := !oldBackend.unreadyServingFrom(signalled).IsZero()
	var allowed int64
	if !drained {
		allowed = inFlight + int64(oldBackend.dialFailures.Load())
	}
	t.Run("no create failed or missed the webhook, and the restart moved the traffic", func(t *testing.T) {
		if r.failed > allowed || r.unmutated != 0 {
			t.Errorf("%d creates failed and %d were admitted without the webhook, want at most %d failed (the old replica drained: %v) and none unmutated",
				r.failed, r.unmutated, allowed, drained)
		}
		if r.failed > 0 {
			t.Logf("%d creates failed at the stop of the old replica, which closed its port without draining (at most %d: %d in flight at its SIGTERM, %d connections refused after it)",
				r.failed, allowed, inFlight, oldBackend.dialFailures.Load())
		}
		if connsBefore == 0 || nextBackend.conns.Load() == 0 {
			t.Errorf("connections: %d to the old replica before its SIGTERM, %d to the new one; the restart moved no traffic", connsBefore, nextBackend.conns.Load())
		}
	})

	t.Run("the upgrade adopted and updated the CRDs, added NodeTemplate's where missing and created the release's NodeTemplate", func(t *testing.T) {
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
		eventually(t, healthTimeout, "kubectl get spreadpolicies shows the Deployment spread", func(ctx context.Context) error {
			return wantPolicyRow(ctx, f.ns, "True", "1", "0", "0")
		})
		eventually(t, healthTimeout, "kubectl get reports shows the Deployment passing", func(ctx context.Context) error {
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

// uninstall removes the release and what it leaves behind (its CRDs, kept
// on uninstall, with their objects, and its namespace), so that the next
// previous chart installs on a cluster without spreadguard.
func uninstall(t *testing.T) {
	// A cleanup: the test's context is done.
	ctx := context.Background()
	bin := os.Getenv(envHelm)
	if bin == "" {
		bin = filepath.Join("..", "..", "bin", "helm")
	}
	if out, err := exec.CommandContext(ctx, bin, "uninstall", upgradeRelease, "--namespace", upgradeNamespace, "--wait", "--timeout", "2m").CombinedOutput(); err != nil {
		t.Errorf("helm uninstall: %v\n%s", err, out)
	}
	for _, name := range spreadguardCRDs {
		if _, err := kubectlOut(ctx, "delete", "crd", name, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
			t.Error(err)
		}
	}
	if _, err := kubectlOut(ctx, "delete", "namespace", upgradeNamespace, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
		t.Error(err)
	}
}

// previousReleases lists the packaged previous charts of testdata/previous,
// with the CRDs of each one's crds/.
func previousReleases(t *testing.T) []previousRelease {
	t.Helper()
	found, err := filepath.Glob(filepath.Join("testdata", "previous", "*.tgz"))
	if err != nil || len(found) == 0 {
		t.Fatalf("want the packaged previous charts in testdata/previous (hack/previous-chart.sh), found %v (%v)", found, err)
	}
	var out []previousRelease
	for _, chart := range found {
		label, commit, ok := strings.Cut(strings.TrimSuffix(filepath.Base(chart), ".tgz"), "-")
		if !ok || len(commit) != 40 {
			t.Fatalf("%s is not named LABEL-COMMIT.tgz", chart)
		}
		out = append(out, previousRelease{label: label, commit: commit, chart: chart, crds: chartCRDs(t, chart)})
	}
	return out
}

// chartCRDs returns the sorted names of the CRDs in a packaged chart's
// crds/.
func chartCRDs(t *testing.T, chart string) []string {
	t.Helper()
	f, err := os.Open(chart)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", chart, err)
	}
	var names []string
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", chart, err)
		}
		if filepath.Base(filepath.Dir(h.Name)) != "crds" {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", chart, h.Name, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := sigsyaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %s: %v", chart, h.Name, err)
		}
		names = append(names, crd.Name)
	}
	slices.Sort(names)
	return names
}

// readmeAdoption returns the commands of the chart README's "From 0.1.0"
// section: those of its first sh block (adopt the CRDs with kubectl, then
// helm upgrade) and of its second (helm upgrade --take-ownership), each
// command one line, its continuation lines joined.
func readmeAdoption(t *testing.T) (patch, takeOwnership []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "spreadguard", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "### From 0.1.0")
	if start < 0 {
		t.Fatal(`the chart README has no section "From 0.1.0"`)
	}
	section := text[start:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks [][]string
	for i, part := range strings.Split(section, "```") {
		if i%2 == 0 || !strings.HasPrefix(part, "sh\n") {
			continue
		}
		var commands []string
		for _, line := range strings.Split(strings.ReplaceAll(strings.TrimPrefix(part, "sh\n"), "\\\n", " "), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				commands = append(commands, line)
			}
		}
		blocks = append(blocks, commands)
	}
	if len(blocks) != 2 {
		t.Fatalf(`the chart README's section "From 0.1.0" has %d sh blocks, want 2 (kubectl then helm upgrade; helm upgrade --take-ownership):\n%s`, len(blocks), section)
	}
	return blocks[0], blocks[1]
}

// runREADME runs a command of the chart README with the test's release,
// namespace, chart and values file, and the suite's helm and kubectl; a
// helm upgrade waits for the release, as the scenario's others do.
func runREADME(t *testing.T, command, chart, values string) {
	t.Helper()
	// Quoted for the shell: a test's temporary directory is named after
	// the test, parentheses and all.
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	line := strings.NewReplacer("RELEASE", upgradeRelease, "NAMESPACE", upgradeNamespace,
		"charts/spreadguard", quote(chart), "values.yaml", quote(values)).Replace(command)
	if strings.HasPrefix(line, "helm upgrade") {
		line += " --wait --timeout 2m"
	}
	helmBin := os.Getenv(envHelm)
	if helmBin == "" {
		helmBin = filepath.Join("..", "..", "bin", "helm")
	}
	var path []string
	for _, dir := range []string{filepath.Dir(helmBin), filepath.Join("..", "..", "bin")} {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		path = append(path, abs)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+strings.Join(append(path, os.Getenv("PATH")), string(os.PathListSeparator)))
	out, err := cmd.CombinedOutput()
	t.Logf("%s\n%s", line, bytes.TrimSpace(out))
	if err != nil {
		t.Fatalf("the chart README's %q: %v", command, err)
	}
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
