package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spreadguard/spreadguard/pkg/audit"
)

// auditMetrics are the audit's gauges, exported by the leader only (the
// other replicas do not audit). Their cardinality is bounded: the workload
// gauge has one series per namespace, policy and state; only skewed
// workloads carry a per-workload series, so a healthy cluster of 5,000
// workloads exports a handful of series, not 5,000.
type auditMetrics struct {
	// workloads counts the audited workloads by namespace, policy and
	// state (spread, skewed, uncovered).
	workloads *prometheus.GaugeVec
	// skew is the largest skew over a constraint's key of each skewed
	// workload.
	skew *prometheus.GaugeVec
}

func newAuditMetrics(reg prometheus.Registerer) (*auditMetrics, error) {
	m := &auditMetrics{
		workloads: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spreadguard_workloads",
			Help: "Workloads the policies select, by namespace, policy and state (spread, skewed, uncovered), as the last audit pass found them.",
		}, []string{"namespace", "policy", "state"}),
		skew: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spreadguard_workload_skew",
			Help: "Skew (pods in the fullest domain minus the global minimum) of each skewed workload, by topology key; workloads within maxSkew have no series.",
		}, []string{"namespace", "workload", "kind", "topology_key"}),
	}
	for _, c := range []prometheus.Collector{m.workloads, m.skew} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the audit's metrics: %w", err)
		}
	}
	return m, nil
}

// set replaces the gauges with what results say.
func (m *auditMetrics) set(results []audit.Result) {
	m.workloads.Reset()
	m.skew.Reset()
	for _, r := range results {
		m.workloads.WithLabelValues(r.Namespace, r.Policy, string(r.State)).Inc()
		if r.State != audit.StateSkewed {
			continue
		}
		worst := map[string]int{}
		for _, s := range r.Constraints {
			if audit.Skewed(s) {
				worst[s.TopologyKey] = max(worst[s.TopologyKey], s.Skew)
			}
		}
		for key, skew := range worst {
			m.skew.WithLabelValues(r.Namespace, r.Name, r.Kind, key).Set(float64(skew))
		}
	}
}
