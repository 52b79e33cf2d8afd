package deletioncost

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the keeper's, exported by the replica that leads: the others
// export zeros.
type metrics struct {
	patches   *prometheus.CounterVec
	foreign   prometheus.Gauge
	pending   prometheus.Gauge
	workloads *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spreadguard_deletion_cost_patches_total",
			Help: "Deletion cost patches sent, by result: applied, foreign (another field manager owns the cost: the pod is left alone), gone (the pod was deleted), error (tried again with backoff).",
		}, []string{"result"}),
		foreign: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spreadguard_deletion_cost_foreign_pods",
			Help: "Pods whose deletion cost another field manager owns, which the keeper leaves alone.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spreadguard_deletion_cost_pending_pods",
			Help: "Pods whose deletion cost is queued to be written, at the rate cap.",
		}),
		workloads: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spreadguard_deletion_cost_workloads",
			Help: "ReplicaSets and ReplicationControllers with pods, by what the keeper does with them: kept, waiting (a pod is to be read), unconstrained, disabled (by policy), excluded (namespace), invalid, shared (a selector that selects another workload's pods).",
		}, []string{"state"}),
	}
	for _, c := range []prometheus.Collector{m.patches, m.foreign, m.pending, m.workloads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the deletion cost metrics: %w", err)
		}
	}
	return m, nil
}

// reset zeroes the gauges of a replica that does not lead.
func (m *metrics) reset() {
	m.foreign.Set(0)
	m.pending.Set(0)
	m.workloads.Reset()
}

// setWorkloads counts the workloads by state; waiting ones without pods
// (a Deployment's old revisions) are not counted.
func (m *metrics) setWorkloads(ws map[workloadKey]*workload) {
	counts := make([]int, len(stateNames))
	for _, w := range ws {
		if w.state == stateWaiting && len(w.names) == 0 {
			continue
		}
		counts[w.state]++
	}
	for s, n := range counts {
		m.workloads.WithLabelValues(stateNames[s]).Set(float64(n))
	}
}
