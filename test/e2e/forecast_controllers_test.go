//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
)

// envWebhookMetricsURL is the webhook's /metrics (a local process's, as
// `make e2e` runs it); the scenario that counts its reviews is skipped
// without it.
const envWebhookMetricsURL = "SPREADGUARD_E2E_WEBHOOK_METRICS_URL"

// forecastWebhook names the workloads' webhook, as the chart names it, in
// the API server's metrics.
const forecastWebhook = "workloads.forecast.spreadguard.io"

// TestE2EForecastLeavesControllersAlone cordons a zone, as TestE2EForecast
// does.
func TestE2EForecastLeavesControllersAlone(t *testing.T) {
	t.Run("a rollout and an HPA's scale never reach the workload forecasts; a person's apply and kubectl scale do, "+
		"and the scale is warned", controllersNeverReachTheForecast)
}

// reviewCounts is what the scenario reads before and after each step.
type reviewCounts struct {
	// reviews are the webhook's requests at /forecast-workload
	// (controller_runtime_webhook_requests_total, every code).
	reviews float64
	// excluded are the writes the API server kept from the webhook by its
	// matchConditions (apiserver_admission_match_condition_exclusions_total).
	excluded float64
}

func controllersNeverReachTheForecast(t *testing.T) {
	metricsURL := os.Getenv(envWebhookMetricsURL)
	if metricsURL == "" {
		t.Skipf("%s is not set: the webhook's reviews cannot be counted (make e2e sets it)", envWebhookMetricsURL)
	}
	f := newFramework(t)
	cordonZone(t)
	f.create(policytest.MakeSpreadPolicy().Name("zones").Constraint(
		policytest.MakeConstraint().MaxSkew(1).TopologyKey(zoneKey).DoNotSchedule().NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).Obj()).Obj())
	token := metricsToken(t, f)
	counts := func() reviewCounts {
		t.Helper()
		webhook := scrape(t, metricsURL, token)
		apiserver, err := clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
		if err != nil {
			t.Fatalf("reading the API server's /metrics: %v", err)
		}
		return reviewCounts{
			reviews: sumSeries(webhook, "controller_runtime_webhook_requests_total", `webhook="/forecast-workload"`),
			excluded: sumSeries(string(apiserver), "apiserver_admission_match_condition_exclusions_total",
				`kind="webhook"`, `name="`+forecastWebhook+`"`),
		}
	}
	// step does what a step says and checks what it cost the webhook:
	// reviews at /forecast-workload, and at least minExcluded writes kept
	// from it by its matchConditions (the controllers' writes, which
	// would otherwise have reached it).
	step := func(what string, reviews, minExcluded float64, do func()) {
		t.Helper()
		before := counts()
		do()
		after := counts()
		d := reviewCounts{reviews: after.reviews - before.reviews, excluded: after.excluded - before.excluded}
		t.Logf("%s: %v reviews at /forecast-workload; %v writes kept from it by its matchConditions", what, d.reviews, d.excluded)
		if d.reviews != reviews {
			t.Errorf("%s: %v reviews at /forecast-workload, want %v", what, d.reviews, reviews)
		}
		if d.excluded < minExcluded {
			t.Errorf("%s: the matchConditions kept %v writes from the webhook, want at least %v", what, d.excluded, minExcluded)
		}
	}
	manifest := func(replicas int32, version string) []byte {
		t.Helper()
		web := makeDeployment("web").Replicas(replicas).Obj()
		web.Namespace = f.ns
		web.APIVersion, web.Kind = "apps/v1", "Deployment"
		web.Spec.Template.Annotations = map[string]string{"e2e.spreadguard.io/version": version}
		b, err := sigsyaml.Marshal(web)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	apply := func(data []byte) string {
		t.Helper()
		_, stderr, err := kubectl(t.Context(), data, "apply", "-f", "-")
		if err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, stderr)
		}
		return stderr
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	// The policy must have reached the webhook's cache before the pods.
	f.eventually(policyChangeTimeout, "a dry-run apply of 3 replicas prints the forecast", func(ctx context.Context) error {
		_, stderr, err := kubectl(ctx, manifest(3, "v1"), "apply", "--dry-run=server", "-f", "-")
		if err != nil || !strings.Contains(stderr, "spreadguard: replica 3 of 3 would be refused") {
			return fmt.Errorf("apply --dry-run=server: %v, stderr %q", err, stderr)
		}
		return nil
	})
	apply(manifest(2, "v1"))
	f.waitRunning(web, 2, placeTimeout)

	// A rollout: the person's apply is reviewed; the deployment
	// controller's new ReplicaSet, its scaling of both ReplicaSets and
	// its updates of the Deployment are not (at least 3 writes).
	step("rollout of a new template", 1, 3, func() {
		apply(manifest(2, "v2"))
		if _, stderr, err := kubectl(t.Context(), nil, "rollout", "status", "deployment/web", "-n", f.ns, "--timeout=2m"); err != nil {
			t.Fatalf("kubectl rollout status: %v\n%s", err, stderr)
		}
		f.eventually(time.Minute, "the old ReplicaSet is scaled to 0", func(ctx context.Context) error {
			return replicaSetsAt(ctx, f.ns, web, map[string]int32{"v1": 0, "v2": 2})
		})
	})

	// A person's kubectl scale is reviewed and warned; the deployment
	// controller's scaling of the ReplicaSet is not.
	step("kubectl scale by a person", 1, 1, func() {
		_, stderr, err := kubectl(t.Context(), nil, "scale", "deployment", "web", "-n", f.ns, "--replicas=3")
		if err != nil {
			t.Fatalf("kubectl scale: %v\n%s", err, stderr)
		}
		if want := "Warning: spreadguard: replica 3 of 3 would be refused"; !strings.Contains(stderr, want) {
			t.Errorf("kubectl scale printed %q, want %q", stderr, want)
		}
		f.eventually(time.Minute, "the deployment controller scales the ReplicaSet to 3", func(ctx context.Context) error {
			return replicaSetsAt(ctx, f.ns, web, map[string]int32{"v1": 0, "v2": 3})
		})
	})

	// An HPA's scale: the /scale subresource written as the
	// horizontal-pod-autoscaler's service account, as kube-controller-manager
	// writes it with --use-service-account-credentials; then the
	// deployment controller's scaling of the ReplicaSet.
	step("scale by the horizontal-pod-autoscaler", 0, 2, func() {
		hpa := impersonating(t, "system:serviceaccount:kube-system:horizontal-pod-autoscaler")
		scale, err := hpa.AppsV1().Deployments(f.ns).GetScale(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the scale as the horizontal-pod-autoscaler: %v", err)
		}
		scale.Spec.Replicas = 2
		if _, err := hpa.AppsV1().Deployments(f.ns).UpdateScale(t.Context(), "web", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update the scale as the horizontal-pod-autoscaler: %v", err)
		}
		f.eventually(time.Minute, "the deployment controller scales the ReplicaSet to 2", func(ctx context.Context) error {
			return replicaSetsAt(ctx, f.ns, web, map[string]int32{"v1": 0, "v2": 2})
		})
	})
}

// replicaSetsAt checks that the ReplicaSets selected by sel in ns have the
// replicas want says, by the version their template carries.
func replicaSetsAt(ctx context.Context, ns string, sel labels.Selector, want map[string]int32) error {
	var list appsv1.ReplicaSetList
	if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return err
	}
	got := map[string]int32{}
	for _, rs := range list.Items {
		got[rs.Spec.Template.Annotations["e2e.spreadguard.io/version"]] = *rs.Spec.Replicas
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("ReplicaSets by version: %v, want %v", got, want)
	}
	return nil
}

// impersonating returns a clientset that acts as user.
func impersonating(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metricsToken returns a token that the webhook's secure /metrics accepts:
// a ServiceAccount of the test's namespace bound to the chart's
// metrics-reader ClusterRole.
func metricsToken(t *testing.T, f *framework) string {
	t.Helper()
	ctx := t.Context()
	var roles rbacv1.ClusterRoleList
	if err := k8s.List(ctx, &roles, client.MatchingLabels{"app.kubernetes.io/name": "spreadguard"}); err != nil {
		t.Fatal(err)
	}
	reader := ""
	for _, r := range roles.Items {
		if strings.HasSuffix(r.Name, "-metrics-reader") {
			reader = r.Name
		}
	}
	if reader == "" {
		t.Fatal("no <release>-metrics-reader ClusterRole: the chart's metrics.secure is off, or the release is not spreadguard's")
	}
	f.create(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "metrics"}})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.ns, Name: "metrics"}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	tr, err := clientset.CoreV1().ServiceAccounts(f.ns).CreateToken(ctx, "metrics", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrape reads url (the webhook's /metrics) with token; the local webhook
// serves the development certificate, which is not what is tested here.
func scrape(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // a local test server
	}}
	defer c.CloseIdleConnections()
	var body []byte
	eventually(t, 30*time.Second, "the webhook's /metrics answers", func(context.Context) error {
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return nil
	})
	return string(body)
}

// sumSeries adds up the samples of metric name, in a text exposition,
// whose labels hold every one of matchers (`key="value"`).
func sumSeries(exposition, name string, matchers ...string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series := line[:i]
		ok := true
		for _, m := range matchers {
			ok = ok && strings.Contains(series, m)
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}
