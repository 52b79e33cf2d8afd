package chart_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/admission"
)

// promtool is Prometheus's, built by hack/build-binaries.sh at the version
// of github.com/prometheus/prometheus this module requires.
func promtool(t *testing.T) string {
	t.Helper()
	version := moduleVersion(t, "github.com/prometheus/prometheus")
	stamp := stampFile("promtool", version)
	if _, err := os.Stat(stamp); err != nil {
		t.Fatalf("promtool %s is not built in bin/ (no %s): run `make test-chart`, which builds it from source, or `hack/build-binaries.sh promtool`", version, stamp)
	}
	path, err := filepath.Abs(filepath.Join(binDir, "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// ruleFile renders the chart's PrometheusRule and returns its groups as a
// Prometheus rule file, with the rule's annotations by alert.
func ruleFile(t *testing.T, vals map[string]any) (file []byte, annotations map[string]map[string]string) {
	t.Helper()
	r := render(t, vals)
	for _, u := range unstructuredDocs(t, r.manifest) {
		if u.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructuredSlice(u.Object, "spec", "groups")
		annotations = map[string]map[string]string{}
		for _, g := range groups {
			rules, _, _ := unstructuredSlice(g.(map[string]any), "rules")
			for _, rule := range rules {
				rm := rule.(map[string]any)
				a := map[string]string{}
				for k, v := range rm["annotations"].(map[string]any) {
					a[k] = v.(string)
				}
				annotations[rm["alert"].(string)] = a
			}
		}
		data, err := sigsyaml.Marshal(map[string]any{"groups": groups})
		if err != nil {
			t.Fatal(err)
		}
		return data, annotations
	}
	t.Fatal("no PrometheusRule rendered")
	return nil, nil
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("%s is not an object", f)
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

// The files of one `promtool test rules` run, as promtool reads them.
type (
	ruleTestFile struct {
		RuleFiles          []string        `json:"rule_files"`
		EvaluationInterval string          `json:"evaluation_interval"`
		Tests              []ruleTestGroup `json:"tests"`
	}
	ruleTestGroup struct {
		Name          string          `json:"name"`
		Interval      string          `json:"interval"`
		InputSeries   []inputSeries   `json:"input_series"`
		AlertRuleTest []alertRuleTest `json:"alert_rule_test"`
	}
	inputSeries struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	alertRuleTest struct {
		EvalTime  string          `json:"eval_time"`
		Alertname string          `json:"alertname"`
		ExpAlerts []expectedAlert `json:"exp_alerts"`
	}
	expectedAlert struct {
		ExpLabels      map[string]string `json:"exp_labels"`
		ExpAnnotations map[string]string `json:"exp_annotations"`
	}
)

// exported gathers what reg exports as Prometheus series selectors, with
// each one's value: a counter's or gauge's, a histogram's _bucket (one per
// bound and +Inf, cumulative), _sum and _count. The series the tests feed
// promtool are built from what the server's own metrics export, so that a
// label or a bucket bound the rules do not expect shows up here.
func exported(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	selector := func(name string, labels []*dto.LabelPair, extra ...string) string {
		var ls []string
		for _, l := range labels {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		ls = append(ls, extra...)
		slices.Sort(ls)
		return name + "{" + strings.Join(ls, ",") + "}"
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[selector(f.GetName(), m.GetLabel())] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[selector(f.GetName(), m.GetLabel())] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					out[selector(f.GetName()+"_bucket", m.GetLabel(), fmt.Sprintf("le=%q", fmt.Sprint(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
				out[selector(f.GetName()+"_bucket", m.GetLabel(), `le="+Inf"`)] = float64(h.GetSampleCount())
				out[selector(f.GetName()+"_sum", m.GetLabel())] = h.GetSampleSum()
				out[selector(f.GetName()+"_count", m.GetLabel())] = float64(h.GetSampleCount())
			}
		}
	}
	return out
}

// perMinute turns what a registry holds after one minute of traffic into
// input series that grow by as much every minute, for minutes minutes.
func perMinute(exported map[string]float64, minutes int) []inputSeries {
	var out []inputSeries
	for s, v := range exported {
		out = append(out, inputSeries{Series: s, Values: fmt.Sprintf("0+%gx%d", v, minutes)})
	}
	slices.SortFunc(out, func(a, b inputSeries) int { return strings.Compare(a.Series, b.Series) })
	return out
}

// admissionTraffic returns the series spreadguard exports after one minute
// in which observe ran against its admission metrics.
func admissionTraffic(t *testing.T, observe func(m *admission.Metrics)) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := admission.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	observe(m)
	out := map[string]float64{}
	for s, v := range exported(t, reg) {
		// Series nothing was recorded in (the vectors are empty) are
		// not exported; neither are the ones left at 0 by observe.
		if v != 0 || strings.Contains(s, "_bucket{") {
			out[s] = v
		}
	}
	return out
}

// bucketOf returns the bounds of the decision histogram's bucket that holds
// d: when every decision takes d, histogram_quantile interpolates the p99
// linearly within them, lower + (upper-lower)*0.99.
func bucketOf(t *testing.T, d float64) (lower, upper float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := admission.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Latency.WithLabelValues(admission.WebhookValidatePod).Observe(d)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "spreadguard_admission_decision_duration_seconds" {
			continue
		}
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			if b.GetUpperBound() >= d {
				return lower, b.GetUpperBound()
			}
			lower = b.GetUpperBound()
		}
	}
	// Above every bound: histogram_quantile reports the highest one.
	return lower, lower
}

func TestAlertsFireOnTheirSymptomAndStayQuietWhenHealthy(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	const timeoutSeconds = 3
	rules, annotations := ruleFile(t, valuesYAML(t, fmt.Sprintf("{prometheusRule: {enabled: true}, webhook: {timeoutSeconds: %d}}", timeoutSeconds)))
	// annotated is the alert's annotations as rendered, with the
	// description it must carry for these series.
	annotated := func(alert, description string) map[string]string {
		a := map[string]string{}
		for k, v := range annotations[alert] {
			a[k] = v
		}
		a["description"] = description
		return a
	}

	// Every decision takes 2 s, two thirds of the timeout.
	slow := admissionTraffic(t, func(m *admission.Metrics) {
		for range 100 {
			m.Latency.WithLabelValues(admission.WebhookValidatePod).Observe(2)
		}
	})
	lower, upper := bucketOf(t, 2)
	p99 := lower + (upper-lower)*0.99
	fast := admissionTraffic(t, func(m *admission.Metrics) {
		for range 100 {
			m.Latency.WithLabelValues(admission.WebhookValidatePod).Observe(0.0004)
		}
	})
	faults := admissionTraffic(t, func(m *admission.Metrics) {
		m.Errors.WithLabelValues(admission.WebhookValidatePod, admission.FaultLookup).Add(6)
	})
	denials := func(n float64) map[string]float64 {
		return admissionTraffic(t, func(m *admission.Metrics) {
			m.Denials.WithLabelValues(admission.DenialUnsatisfiable, "shop").Add(n)
		})
	}
	// constant is a series that keeps value v for minutes minutes.
	constant := func(series string, v float64, minutes int) inputSeries {
		return inputSeries{Series: series, Values: fmt.Sprintf("%gx%d", v, minutes)}
	}
	// denialsFor is six and a half hours at a denial a minute, then an
	// hour at rate a minute.
	denialsFor := func(rate float64) []inputSeries {
		var out []inputSeries
		low, high := denials(1), denials(rate)
		for s, v := range low {
			out = append(out, inputSeries{Series: s, Values: fmt.Sprintf("0+%gx390 %g+%gx60", v, 390*v+high[s], high[s])})
		}
		return out
	}

	const skew = `spreadguard_workload_skew{kind="Deployment",namespace="shop",topology_key="topology.kubernetes.io/zone",workload="web"}`
	const (
		notReady = `spreadguard_policy_ready{kind="SpreadPolicy",name="zones",namespace="shop",reason="UnknownTopologyKey"}`
		audited  = `spreadguard_policy_ready{kind="SpreadPolicy",name="zones",namespace="shop",reason="Audited"}`
	)
	tests := []struct {
		name   string
		alert  string
		series []inputSeries
		eval   string
		want   []expectedAlert
	}{
		{
			name:   "lookup faults at 0.1/s on validate-pod for 20 minutes -> SpreadguardWebhookErrors fires",
			alert:  "SpreadguardWebhookErrors",
			series: perMinute(faults, 30),
			eval:   "20m",
			want: []expectedAlert{{
				ExpLabels:      map[string]string{"severity": "warning", "webhook": "validate-pod", "reason": "lookup"},
				ExpAnnotations: annotated("SpreadguardWebhookErrors", "validate-pod: 100m faults/s (lookup) for 10 minutes."),
			}},
		},
		{
			name:   "six faults long ago, none for 20 minutes -> SpreadguardWebhookErrors stays quiet",
			alert:  "SpreadguardWebhookErrors",
			series: []inputSeries{constant(perMinute(faults, 1)[0].Series, 6, 30)},
			eval:   "20m",
		},
		{
			name:   "p99 decision 2 s for 20 minutes with a 3 s timeout -> SpreadguardWebhookSlow fires",
			alert:  "SpreadguardWebhookSlow",
			series: perMinute(slow, 30),
			eval:   "20m",
			want: []expectedAlert{{
				ExpLabels: map[string]string{"severity": "warning", "webhook": "validate-pod"},
				// humanizeDuration writes seconds under a minute with
				// four significant digits.
				ExpAnnotations: annotated("SpreadguardWebhookSlow", fmt.Sprintf("validate-pod: p99 %.4gs.", p99)),
			}},
		},
		{
			name:   "decisions of 0.4 ms for 20 minutes -> SpreadguardWebhookSlow stays quiet",
			alert:  "SpreadguardWebhookSlow",
			series: perMinute(fast, 30),
			eval:   "20m",
		},
		{
			name:   "denials up from 1 to 30 a minute for an hour after six and a half -> SpreadguardDenialsRising fires",
			alert:  "SpreadguardDenialsRising",
			series: denialsFor(30),
			eval:   "450m",
			want: []expectedAlert{{
				ExpLabels:      map[string]string{"severity": "info"},
				ExpAnnotations: annotated("SpreadguardDenialsRising", "500m denials/s."),
			}},
		},
		{
			name:   "denials at a steady 1 a minute for seven and a half hours -> SpreadguardDenialsRising stays quiet",
			alert:  "SpreadguardDenialsRising",
			series: denialsFor(1),
			eval:   "450m",
		},
		{
			name:   "a Deployment skewed by 2 over zones for 30 minutes -> SpreadguardWorkloadSkewed fires",
			alert:  "SpreadguardWorkloadSkewed",
			series: []inputSeries{constant(skew, 2, 30)},
			eval:   "30m",
			want: []expectedAlert{{
				ExpLabels: map[string]string{"severity": "warning", "kind": "Deployment", "namespace": "shop",
					"workload": "web", "topology_key": "topology.kubernetes.io/zone"},
				ExpAnnotations: annotated("SpreadguardWorkloadSkewed", "Deployment shop/web: skew 2 over topology.kubernetes.io/zone for 15 minutes."),
			}},
		},
		{
			// The audit exports the skew of skewed workloads only.
			name:   "a Deployment skewed for 10 minutes, then spread again (its series gone) -> SpreadguardWorkloadSkewed stays quiet",
			alert:  "SpreadguardWorkloadSkewed",
			series: []inputSeries{{Series: skew, Values: "2x10 _x20"}},
			eval:   "30m",
		},
		{
			name:   "a SpreadPolicy not Ready (UnknownTopologyKey) for 30 minutes -> SpreadguardPolicyNotReady fires",
			alert:  "SpreadguardPolicyNotReady",
			series: []inputSeries{constant(notReady, 0, 30)},
			eval:   "30m",
			want: []expectedAlert{{
				ExpLabels:      map[string]string{"severity": "warning", "kind": "SpreadPolicy", "namespace": "shop", "name": "zones", "reason": "UnknownTopologyKey"},
				ExpAnnotations: annotated("SpreadguardPolicyNotReady", "SpreadPolicy shop/zones: UnknownTopologyKey."),
			}},
		},
		{
			name:   "a SpreadPolicy Ready (Audited) for 30 minutes -> SpreadguardPolicyNotReady stays quiet",
			alert:  "SpreadguardPolicyNotReady",
			series: []inputSeries{constant(audited, 1, 30)},
			eval:   "30m",
		},
	}
	covered := map[string][]bool{}
	for _, tc := range tests {
		covered[tc.alert] = append(covered[tc.alert], len(tc.want) > 0)
	}
	for alert := range annotations {
		if !slices.Contains(covered[alert], true) || !slices.Contains(covered[alert], false) {
			t.Errorf("alert %s needs a case that fires it and one that must not: has %v", alert, covered[alert])
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = []expectedAlert{}
			}
			file := ruleTestFile{
				RuleFiles:          []string{"rules.yaml"},
				EvaluationInterval: "1m",
				Tests: []ruleTestGroup{{
					Name: tc.name, Interval: "1m", InputSeries: tc.series,
					AlertRuleTest: []alertRuleTest{{EvalTime: tc.eval, Alertname: tc.alert, ExpAlerts: want}},
				}},
			}
			data, err := sigsyaml.Marshal(file)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, fmt.Sprintf("test-%d.yaml", i))
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), bin, "test", "rules", path)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool test rules: %v\n%s\n--- %s ---\n%s", err, out, filepath.Base(path), data)
			}
		})
	}
}
