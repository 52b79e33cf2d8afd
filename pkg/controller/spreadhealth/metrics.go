package spreadhealth

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/health"
)

// What a failure of the controller was about, as the errors counter
// labels it.
const (
	objectWorkload = "workload"
	objectStatus   = "status"
	objectReport   = "report"
)

// Metrics are the gauges of spread health, exported by the leader only
// (the other replicas do not audit), and the count of what the leader
// failed at. Their cardinality is bounded: the workload gauge has one
// series per namespace, policy and state; only skewed workloads carry a
// per-workload series, so that a healthy cluster of 5,000 workloads
// exports a handful of series, not 5,000.
//
// The gauges are a prometheus.Collector over the series of the last pass,
// built whole and swapped in at once: a scrape during a pass sees the last
// pass's set or this one's, never half of one.
type Metrics struct {
	// workloads counts the audited workloads by namespace, policy and
	// state; skew is the largest skew over a constraint's key of each
	// skewed workload; ready is 1 for a policy whose Ready condition is
	// True, else 0.
	workloads, skew, ready *prometheus.Desc
	series                 atomic.Pointer[[]prometheus.Metric]
	// errors counts the workloads that could not be audited and the
	// statuses and Reports that could not be written, pass after pass.
	errors *prometheus.CounterVec
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics returns the controller's metrics, registered with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		workloads: prometheus.NewDesc("spreadguard_workloads",
			"Workloads the policies select, by namespace, policy and state (spread, skewed, uncovered, error), as the last audit pass found them.",
			[]string{"namespace", "policy", "state"}, nil),
		skew: prometheus.NewDesc("spreadguard_workload_skew",
			"Skew (pods in the fullest domain minus the global minimum) of each skewed workload, by topology key; workloads within maxSkew have no series.",
			[]string{"namespace", "workload", "kind", "topology_key"}, nil),
		ready: prometheus.NewDesc("spreadguard_policy_ready",
			"1 when the policy's Ready condition is True, 0 when it is False (the condition's reason and message say why), by kind, namespace (empty for a ClusterSpreadPolicy) and name.",
			[]string{"kind", "namespace", "name", "reason"}, nil),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spreadguard_health_errors_total",
			Help: "Failures of the audit of spread health, by object: a workload it could not audit (object=workload, once per pass), a policy status or a Report it could not write (status, report). The log says which and why.",
		}, []string{"object"}),
	}
	for _, c := range []prometheus.Collector{m, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the metrics of spread health: %w", err)
		}
	}
	return m, nil
}

// Describe sends the gauges' descriptions.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.workloads
	ch <- m.skew
	ch <- m.ready
}

// Collect sends the series of the last pass.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if s := m.series.Load(); s != nil {
		for _, metric := range *s {
			ch <- metric
		}
	}
}

// failed counts one failure about object.
func (m *Metrics) failed(object string) { m.errors.WithLabelValues(object).Inc() }

// publish replaces the gauges with what results and conds (one per
// policy) say; nil and nil leave none.
func (m *Metrics) publish(results []health.Result, conds []policyCondition) {
	type workloadKey struct{ namespace, policy, state string }
	counts := map[workloadKey]int{}
	var order []workloadKey
	var series []prometheus.Metric
	for _, r := range results {
		k := workloadKey{r.Namespace, r.Policy, string(r.State)}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
		if r.State != health.StateSkewed {
			continue
		}
		worst := map[string]int{}
		var keys []string
		for _, s := range r.Constraints {
			if !health.Skewed(s) {
				continue
			}
			if _, ok := worst[s.TopologyKey]; !ok {
				keys = append(keys, s.TopologyKey)
			}
			worst[s.TopologyKey] = max(worst[s.TopologyKey], s.Skew)
		}
		for _, key := range keys {
			series = append(series, prometheus.MustNewConstMetric(m.skew, prometheus.GaugeValue, float64(worst[key]),
				r.Namespace, r.Name, r.Kind, key))
		}
	}
	for _, k := range order {
		series = append(series, prometheus.MustNewConstMetric(m.workloads, prometheus.GaugeValue, float64(counts[k]),
			k.namespace, k.policy, k.state))
	}
	for _, c := range conds {
		v := 0.0
		if c.cond.Status == metav1.ConditionTrue {
			v = 1
		}
		series = append(series, prometheus.MustNewConstMetric(m.ready, prometheus.GaugeValue, v, c.kind, c.namespace, c.name, c.cond.Reason))
	}
	m.series.Store(&series)
}
