//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/server"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// Names that make the webhook's lookups fail (see injectFaults): a
// ReplicaSet whose name starts with faultyOwnerPrefix cannot be read, one
// with panickyOwnerPrefix panics the read, and the SpreadPolicies of a
// namespace whose name starts with faultyPoliciesPrefix cannot be listed.
const (
	faultyOwnerPrefix    = "faulty-"
	panickyOwnerPrefix   = "panicky-"
	faultyPoliciesPrefix = "faulty-policies"
)

// injectFaults wraps the webhook's lookups with the faults a live read can
// meet: a 403, an etcd timeout, and a bug.
func injectFaults(src engine.Sources) engine.Sources { return faultySources{src} }

type faultySources struct{ engine.Sources }

func (f faultySources) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	switch {
	case strings.HasPrefix(name, faultyOwnerPrefix):
		return nil, apierrors.NewForbidden(appsv1.Resource("replicasets"), name, errors.New("injected fault"))
	case strings.HasPrefix(name, panickyOwnerPrefix):
		panic("injected panic reading replicaset " + namespace + "/" + name)
	}
	return f.Sources.ReplicaSet(namespace, name)
}

func (f faultySources) SpreadPolicies(namespace string) ([]*v1alpha1.SpreadPolicy, error) {
	if strings.HasPrefix(namespace, faultyPoliciesPrefix) {
		return nil, errors.New("etcdserver: request timed out (injected fault)")
	}
	return f.Sources.SpreadPolicies(namespace)
}

// ServicesSelecting keeps the Service index of the wrapped lookups in use.
func (f faultySources) ServicesSelecting(namespace string, podLabels map[string]string) ([]*v1.Service, error) {
	if c, ok := f.Sources.(spread.ServiceCandidates); ok {
		return c.ServicesSelecting(namespace, podLabels)
	}
	return f.Sources.Services(namespace)
}

// faultScenario is one way spreadguard fails on a pod create.
type faultScenario struct {
	name string
	// nsPrefix names the namespace; owner is the pod's ReplicaSet.
	nsPrefix, owner string
	// hard gives the pod a hard constraint no node can meet, so that the
	// validating webhook resolves its policy.
	hard bool
	// webhook is the configuration whose server fails.
	webhook string
	reason  string
}

func faultScenarios() []faultScenario {
	return []faultScenario{
		{name: "the owner read from the API server is forbidden", nsPrefix: "fault-owner", owner: faultyOwnerPrefix + "web",
			webhook: "pods.mutate.spreadguard.io", reason: "lookup"},
		{name: "the owner read panics", nsPrefix: "fault-panic", owner: panickyOwnerPrefix + "web",
			webhook: "pods.mutate.spreadguard.io", reason: "panic"},
		{name: "listing the policies times out for a pod that cannot be placed", nsPrefix: faultyPoliciesPrefix, owner: "api",
			hard: true, webhook: "pods.validate.spreadguard.io", reason: "lookup"},
	}
}

// faultyPod sets up sc's namespace, with a zone policy, a ReplicaSet and,
// for a hard pod, two bound pods in zones a and b and a cordoned zone c, and
// returns the pod to create.
func faultyPod(t *testing.T, sc faultScenario, nsLabels map[string]string) *v1.Pod {
	t.Helper()
	ensureZoneNodes(t)
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: sc.nsPrefix + "-", Labels: nsLabels}}
	create(t, ns)
	create(t, zonePolicy(ns.Name).Obj())
	if !strings.HasPrefix(ns.Name, faultyPoliciesPrefix) { // whose policies cannot be read
		waitForPolicy(t, ns.Name)
	}
	rs := replicaSet(ns.Name, sc.owner, map[string]string{"app": "api"})
	create(t, rs)
	w := spreadtest.MakePod().Namespace(ns.Name).Name(sc.owner+"-x1").Label("app", "api")
	if sc.hard {
		for name, node := range map[string]string{"api-on-a1": "a1", "api-on-b1": "b1"} {
			// Skipped, so that the faults of this namespace spare them.
			create(t, podObj(spreadtest.MakePod().Namespace(ns.Name).Name(name).Label("app", "api").Node(node).
				Annotation(v1alpha1.AnnotationSkip, "true")))
		}
		w.SpreadConstraint(spreadtest.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "api").
			NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj())
	}
	return controlledBy(podObj(w), rs, "ReplicaSet")
}

func TestFaultsUnderFailurePolicyIgnore(t *testing.T) {
	for _, sc := range faultScenarios() {
		t.Run(sc.name+" -> the pod is stored unchanged and the client is warned", func(t *testing.T) {
			pod := faultyPod(t, sc, nil)
			// A hard pod reaches the policy lookup only once the index has
			// counted the bound pods that make it unplaceable.
			eventually(t, "a dry run of the pod meets the fault", func(ctx context.Context) (bool, error) {
				c, rec := clientWithWarnings(t)
				err := c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
				return err == nil && rec.contains("internal error"), err
			})
			read := func(series string) float64 { return metricValue(t, suite.metricsURL, series) }
			before := errorsCounted(read, sc)
			c, rec := clientWithWarnings(t)
			if err := c.Create(t.Context(), pod.DeepCopy()); err != nil {
				t.Fatalf("create = %v, want the pod admitted: a fault of spreadguard's is no refusal under Ignore", err)
			}
			if !rec.contains("spreadguard could not") || !rec.contains("because of an internal error") {
				t.Errorf("warnings %q do not say spreadguard failed", rec.warnings)
			}
			stored := storedPod(t, pod.Namespace, pod.Name)
			if sc.hard {
				if len(stored.Spec.TopologySpreadConstraints) != 1 {
					t.Errorf("stored constraints = %v, want the pod's own one", stored.Spec.TopologySpreadConstraints)
				}
			} else if len(stored.Spec.TopologySpreadConstraints) != 0 || stored.Annotations[v1alpha1.AnnotationPolicy] != "" {
				t.Errorf("stored pod has constraints %v and policy %q, want it unchanged",
					stored.Spec.TopologySpreadConstraints, stored.Annotations[v1alpha1.AnnotationPolicy])
			}
			if after := errorsCounted(read, sc); after != before+1 {
				t.Errorf("spreadguard_admission_errors_total for %s went from %v to %v, want one more", sc.reason, before, after)
			}
		})
	}
}

func TestFaultsUnderFailurePolicyFail(t *testing.T) {
	// A second server configured for Fail, behind configurations with
	// failurePolicy Fail for namespaces labelled failurePolicyLabel=Fail.
	// The suite's own server (Ignore) answers those pods too and admits
	// them; the API server refuses a create if any webhook refuses it.
	reg := startServer(t, admissionregistrationv1.Fail, map[string]string{failurePolicyLabel: "Fail"}).reg
	read := func(series string) float64 { return registryValue(t, reg, series) }
	for _, sc := range faultScenarios() {
		t.Run(sc.name+" -> the create is refused as spreadguard's own error", func(t *testing.T) {
			pod := faultyPod(t, sc, map[string]string{failurePolicyLabel: "Fail"})
			eventually(t, "a dry run of the pod meets the fault", func(ctx context.Context) (bool, error) {
				err := suite.client.Create(ctx, pod.DeepCopy(), client.DryRunAll)
				return err != nil && strings.Contains(err.Error(), "internal error"), nil
			})
			before := errorsCounted(read, sc)
			err := suite.client.Create(t.Context(), pod.DeepCopy())
			if err == nil {
				t.Fatal("create succeeded, want it refused: the server's failurePolicy is Fail")
			}
			msg := err.Error()
			for _, want := range []string{
				fmt.Sprintf("admission webhook %q denied the request", sc.webhook),
				"internal error of its own, not a problem with this pod",
				"failurePolicy is Fail",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, msg)
				}
			}
			if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(pod), &v1.Pod{}); !apierrors.IsNotFound(err) {
				t.Errorf("the refused pod was stored (get: %v)", err)
			}
			if after := errorsCounted(read, sc); after != before+1 {
				t.Errorf("spreadguard_admission_errors_total for %s went from %v to %v, want one more", sc.reason, before, after)
			}
		})
	}
}

// failurePolicyLabel selects the namespaces of the Fail server.
const failurePolicyLabel = "integration.spreadguard.io/failure-policy"

// startedServer is a webhook server a test started.
type startedServer struct {
	port int
	reg  *prometheus.Registry
}

// startServer runs another webhook server in-process with failurePolicy
// policy and what edits change of its configuration, registers webhook
// configurations for it that select namespaces labelled nsLabels, and
// returns its port and metrics registry. Both stop with the test.
func startServer(t *testing.T, policy admissionregistrationv1.FailurePolicyType, nsLabels map[string]string,
	edits ...func(*app.Config)) startedServer {
	t.Helper()
	port, _, reg := runServer(t, "webhook-"+string(policy), func(cfg *app.Config) {
		cfg.FailurePolicy = policy
		cfg.MetricsSecure = false
		for _, edit := range edits {
			edit(cfg)
		}
	})

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mutating, validating, err := webhookConfigurations(root)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	sel := &metav1.LabelSelector{MatchLabels: nsLabels}
	m := mutating[0]
	m.Name = "spreadguard-" + strings.ToLower(string(policy))
	for i := range m.Webhooks {
		m.Webhooks[i].FailurePolicy = &policy
		m.Webhooks[i].NamespaceSelector = sel
		m.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: new(url + server.PathMutatePod), CABundle: suite.caPEM}
	}
	v := validating[0]
	v.Name = m.Name
	v.Webhooks = v.Webhooks[:1] // the pod CREATE only
	v.Webhooks[0].FailurePolicy = &policy
	v.Webhooks[0].NamespaceSelector = sel
	v.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: new(url + server.PathValidatePod), CABundle: suite.caPEM}
	for _, obj := range []client.Object{m, v} {
		create(t, obj)
		t.Cleanup(func() {
			if err := suite.client.Delete(context.Background(), obj); err != nil {
				t.Errorf("deleting %s: %v", obj.GetName(), err)
			}
		})
	}
	// The API server picks new configurations up asynchronously.
	time.Sleep(2 * time.Second)
	return startedServer{port: port, reg: reg}
}

// runServer runs another webhook server in-process, with the suite's
// serving certificate, the lookup faults and a registry of its own, after
// edit has adjusted its configuration; it returns the webhook and metrics
// ports once the server is ready, and stops it with the test.
func runServer(t *testing.T, name string, edit func(*app.Config)) (port, metricsPort int, reg *prometheus.Registry) {
	t.Helper()
	port, probePort, metricsPort := freePort(), freePort(), freePort()
	if port == 0 || probePort == 0 || metricsPort == 0 {
		t.Fatal("finding free ports")
	}
	cfg := app.NewConfig()
	cfg.Port = port
	cfg.CertDir = suite.certDir
	cfg.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", probePort)
	cfg.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", metricsPort)
	edit(cfg)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// spreadguard's metrics go to a registry of this server's own: the
	// process-wide one, which every /metrics here serves, holds the
	// suite's server's.
	reg = prometheus.NewRegistry()
	go func() {
		done <- app.Run(ctx, cfg,
			app.WithRESTConfig(suite.restConfig),
			app.WithHost("127.0.0.1"),
			app.WithLogger(ctrl.Log.WithName(name)),
			app.WithMetricsRegistry(reg),
			app.WithSourcesWrapper(injectFaults),
		)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Errorf("the %s server did not stop within a minute", name)
		}
	})
	if err := waitReady(fmt.Sprintf("http://127.0.0.1:%d", probePort), done, ctrl.Log); err != nil {
		t.Fatal(err)
	}
	return port, metricsPort, reg
}

// errorsCounted reads spreadguard_admission_errors_total for sc with read,
// which takes a series as /metrics writes it.
func errorsCounted(read func(series string) float64, sc faultScenario) float64 {
	webhook := "mutate-pod"
	if strings.Contains(sc.webhook, "validate") {
		webhook = "validate-pod"
	}
	return read(fmt.Sprintf(`spreadguard_admission_errors_total{reason=%q,webhook=%q} `, sc.reason, webhook))
}

// registryValue reads one series from reg, written as /metrics writes it
// (name, sorted labels, a space), 0 when absent.
func registryValue(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		if err := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain)).Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return seriesValue(t, b.String(), series)
}

func TestAPolicyStoredPastTheWebhookIsReportedNotSilentlySkipped(t *testing.T) {
	ns := newNamespace(t, "invalid-policy")
	bad := zonePolicy(ns).Obj()
	bad.Name = "bad-key"
	// The schema cannot check label keys; the webhook can, so it is taken
	// out of the way as it is when it is down.
	bad.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key": "web"}}
	withoutPolicyWebhooks(t, func() {
		eventually(t, "the invalid policy is stored past the webhook", func(ctx context.Context) (bool, error) {
			err := suite.client.Create(ctx, bad.DeepCopy())
			return err == nil, err
		})
	})

	eventually(t, "an InvalidPolicy Warning event on the policy", func(ctx context.Context) (bool, error) {
		return warningEvent(ctx, ns, bad.Name, "InvalidPolicy", `spec.podSelector.matchLabels: Invalid value: "bad key"`)
	})
	eventually(t, "spreadguard_invalid_policies counts it", func(context.Context) (bool, error) {
		return metricValue(t, suite.metricsURL, `spreadguard_invalid_policies{kind="SpreadPolicy"} `) >= 1, nil
	})
}

// withoutPolicyWebhooks runs fn with the policy webhooks removed from the
// suite's ValidatingWebhookConfiguration, and waits for them to answer again
// afterwards.
func withoutPolicyWebhooks(t *testing.T, fn func()) {
	t.Helper()
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := suite.client.Get(t.Context(), client.ObjectKey{Name: "spreadguard"}, &cfg); err != nil {
		t.Fatal(err)
	}
	all := cfg.Webhooks
	cfg.Webhooks = nil
	for _, w := range all {
		if !strings.Contains(w.Name, "spreadpolicies") {
			cfg.Webhooks = append(cfg.Webhooks, w)
		}
	}
	if err := suite.client.Update(t.Context(), &cfg); err != nil {
		t.Fatalf("removing the policy webhooks: %v", err)
	}
	defer func() {
		if err := suite.client.Get(context.Background(), client.ObjectKey{Name: "spreadguard"}, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg.Webhooks = all
		if err := suite.client.Update(context.Background(), &cfg); err != nil {
			t.Fatalf("restoring the policy webhooks: %v", err)
		}
		probe := zonePolicy("default").Obj()
		probe.Name = "probe-bad-key"
		probe.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key": "web"}}
		eventually(t, "the policy webhooks answer again", func(ctx context.Context) (bool, error) {
			err := suite.client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), "spreadpolicies.validate.spreadguard.io"), nil
		})
	}()
	fn()
}

// metricValue reads one series (its name and labels, then a space) from a
// server's /metrics, 0 when absent.
func metricValue(t *testing.T, metricsURL, series string) float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("reading %s: %v", metricsURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return seriesValue(t, string(body), series)
}

// seriesValue finds series in a text exposition, 0 when absent.
func seriesValue(t *testing.T, exposition, series string) float64 {
	t.Helper()
	for line := range strings.Lines(exposition) {
		if rest, ok := strings.CutPrefix(line, series); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			return v
		}
	}
	return 0
}
