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

	"github.com/spreadguard/spreadguard/cmd/webhook/app"
)

// exportedMetric reports whether name is a series of a metric the server
// exports: the metric itself, or a histogram's _bucket, _sum or _count.
func exportedMetric(t *testing.T) func(name string) bool {
	t.Helper()
	names, err := app.MetricNames()
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
	e, err := parser.ParseExpr(expr)
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
	for _, o := range render(t, ciValues(t, "default-values.yaml")).objects {
		if _, ok := o.(*monitoringv1.PrometheusRule); ok || o.GetName() == fullname+"-dashboard" {
			t.Errorf("%s rendered with the default values", id(o))
		}
	}
}
