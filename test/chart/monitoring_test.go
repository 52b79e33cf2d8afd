package chart_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/server"
)

// exportedMetric reports whether name is a series of a metric the server
// exports: the metric itself, or a histogram's _bucket, _sum or _count.
func exportedMetric(t *testing.T) func(name string) bool {
	t.Helper()
	names, err := server.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) bool {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(names, base) {
				return true
			}
		}
		return false
	}
}

// queriedMetrics parses a PromQL expression with Prometheus's own parser
// and returns the metrics it selects.
func queriedMetrics(t *testing.T, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Fatalf("%q does not parse: %v", expr, err)
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs.Name)
		}
		return nil
	})
	if len(out) == 0 {
		t.Errorf("%q selects no metric", expr)
	}
	return out
}

// runbookAnchors are the anchors of the headings of docs/alerts.md, as
// GitHub writes them.
func runbookAnchors(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(data), -1) {
		out = append(out, strings.ToLower(m[1]))
	}
	return out
}

func TestPrometheusRuleAlertsParseQueryExportedMetricsAndLinkTheirRunbook(t *testing.T) {
	t.Parallel()
	r := render(t, valuesYAML(t, "prometheusRule: {enabled: true, labels: {release: prometheus}}"))
	rule := find[*monitoringv1.PrometheusRule](t, r.objects, fullname)
	if got := rule.Labels["release"]; got != "prometheus" {
		t.Errorf("label release = %q, want the value's prometheus", got)
	}
	exported := exportedMetric(t)
	anchors := runbookAnchors(t)
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, a := range g.Rules {
			alerts = append(alerts, a.Alert)
			for _, m := range queriedMetrics(t, a.Expr.String()) {
				if !exported(m) {
					t.Errorf("alert %s queries %s, which the server does not export", a.Alert, m)
				}
			}
			_, anchor, _ := strings.Cut(a.Annotations["runbook_url"], "#")
			if !slices.Contains(anchors, anchor) {
				t.Errorf("alert %s links runbook #%s, which docs/alerts.md does not have (it has %v)", a.Alert, anchor, anchors)
			}
			if a.Labels["severity"] == "" || a.Annotations["summary"] == "" || a.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a severity, a summary or a description", a.Alert)
			}
		}
	}
	want := []string{"SpreadguardWebhookErrors", "SpreadguardWebhookSlow", "SpreadguardDenialsRising",
		"SpreadguardWorkloadSkewed", "SpreadguardPolicyNotReady"}
	if diff := cmp.Diff(want, alerts); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
}

// grafanaDashboard is what the test reads of a Grafana dashboard.
type grafanaDashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestDashboardIsForTheGrafanaSidecarAndQueriesExportedMetrics(t *testing.T) {
	t.Parallel()
	r := render(t, valuesYAML(t, "dashboards: {enabled: true}"))
	cm := find[*corev1.ConfigMap](t, r.objects, fullname+"-dashboard")
	if got := cm.Labels["grafana_dashboard"]; got != "1" {
		t.Errorf("label grafana_dashboard = %q, want the sidecar's default 1", got)
	}
	var d grafanaDashboard
	if err := json.Unmarshal([]byte(cm.Data["spreadguard.json"]), &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exported := exportedMetric(t)
	queried := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			for _, m := range queriedMetrics(t, target.Expr) {
				if !exported(m) {
					t.Errorf("panel %q queries %s, which the server does not export", p.Title, m)
				}
				queried[m] = true
			}
		}
	}
	// What the issue asks the dashboard to show.
	for _, m := range []string{"spreadguard_admission_requests_total", "spreadguard_denials_total",
		"spreadguard_admission_decision_duration_seconds_bucket", "spreadguard_workloads"} {
		if !queried[m] {
			t.Errorf("no panel queries %s", m)
		}
	}
}

func TestDashboardAndAlertsAreOffByDefault(t *testing.T) {
	t.Parallel()
	for _, o := range render(t, ciValues(t, "default-values.yaml")).objects {
		if _, ok := o.(*monitoringv1.PrometheusRule); ok || o.GetName() == fullname+"-dashboard" {
			t.Errorf("%s rendered with the default values", id(o))
		}
	}
}

func TestServiceMonitorAuthenticatesWithATokenFromASecret(t *testing.T) {
	t.Parallel()
	scraper := fullname + "-metrics-scraper"
	tests := []struct {
		name string
		vals string
		// wantScheme and wantAuth are the endpoint's; wantScraper says
		// whether the chart makes the scraper's ServiceAccount, token
		// Secret and binding.
		wantScheme  string
		wantAuth    *monitoringv1.SafeAuthorization
		wantScraper bool
	}{
		{
			name:       "secure metrics -> the token of the chart's scraper ServiceAccount, from its Secret",
			vals:       "metrics: {serviceMonitor: {enabled: true}}",
			wantScheme: "https",
			wantAuth: &monitoringv1.SafeAuthorization{Type: "Bearer", Credentials: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: scraper + "-token"}, Key: "token"}},
			wantScraper: true,
		},
		{
			name:       "secure metrics and a token Secret of one's own -> that Secret's key, no scraper",
			vals:       "metrics: {serviceMonitor: {enabled: true, tokenSecret: {name: prometheus-token, key: jwt}}}",
			wantScheme: "https",
			wantAuth: &monitoringv1.SafeAuthorization{Type: "Bearer", Credentials: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "prometheus-token"}, Key: "jwt"}},
		},
		{
			name:       "plain HTTP metrics -> no credentials, no scraper",
			vals:       "metrics: {secure: false, serviceMonitor: {enabled: true}}",
			wantScheme: "http",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, valuesYAML(t, tc.vals))
			sm := find[*monitoringv1.ServiceMonitor](t, r.objects, fullname)
			if len(sm.Spec.Endpoints) != 1 {
				t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
			}
			e := sm.Spec.Endpoints[0]
			if got := e.Scheme; got != tc.wantScheme {
				t.Errorf("scheme %q, want %q", got, tc.wantScheme)
			}
			// The deprecated fields are read only to hold them unset.
			//lint:ignore SA1019 the chart must leave the deprecated fields unset
			if e.BearerTokenFile != "" || e.BearerTokenSecret != nil {
				//lint:ignore SA1019 the message names the deprecated fields it found set
				t.Errorf("the endpoint uses the deprecated bearerTokenFile %q / bearerTokenSecret %v", e.BearerTokenFile, e.BearerTokenSecret)
			}
			if diff := cmp.Diff(tc.wantAuth, e.Authorization); diff != "" {
				t.Errorf("authorization (-want +got):\n%s", diff)
			}

			var made []string
			for _, o := range r.objects {
				if strings.HasPrefix(o.GetName(), scraper) {
					made = append(made, id(o))
				}
			}
			var want []string
			if tc.wantScraper {
				want = []string{"ClusterRoleBinding/" + scraper, "Secret/" + releaseNamespace + "/" + scraper + "-token",
					"ServiceAccount/" + releaseNamespace + "/" + scraper}
			}
			slices.Sort(made)
			if diff := cmp.Diff(want, made); diff != "" {
				t.Fatalf("scraper objects (-want +got):\n%s", diff)
			}
			if !tc.wantScraper {
				return
			}
			token := find[*corev1.Secret](t, r.objects, scraper+"-token")
			if token.Type != corev1.SecretTypeServiceAccountToken || token.Annotations[corev1.ServiceAccountNameKey] != scraper {
				t.Errorf("the token Secret is of type %q for ServiceAccount %q, want a %s for %s",
					token.Type, token.Annotations[corev1.ServiceAccountNameKey], corev1.SecretTypeServiceAccountToken, scraper)
			}
			crb := find[*clusterRoleBinding](t, r.objects, scraper)
			if crb.RoleRef.Name != fullname+"-metrics-reader" || len(crb.Subjects) != 1 ||
				crb.Subjects[0].Name != scraper || crb.Subjects[0].Namespace != releaseNamespace {
				t.Errorf("the scraper's binding gives %s to %v, want %s-metrics-reader to %s/%s",
					crb.RoleRef.Name, crb.Subjects, fullname, releaseNamespace, scraper)
			}
		})
	}
}
