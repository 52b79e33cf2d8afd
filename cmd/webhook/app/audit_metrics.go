package app

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/admission"
	"github.com/spreadguard/spreadguard/pkg/controller/policies"
	"github.com/spreadguard/spreadguard/pkg/health"
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
	// ready is 1 for a policy whose Ready condition is True, else 0.
	ready *prometheus.GaugeVec
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
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spreadguard_policy_ready",
			Help: "1 when the policy's Ready condition is True, 0 when it is False (the condition's reason and message say why), by kind, namespace (empty for a ClusterSpreadPolicy) and name.",
		}, []string{"kind", "namespace", "name", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.workloads, m.skew, m.ready} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the audit's metrics: %w", err)
		}
	}
	return m, nil
}

// set replaces the gauges with what results say.
func (m *auditMetrics) set(results []health.Result) {
	m.workloads.Reset()
	m.skew.Reset()
	for _, r := range results {
		m.workloads.WithLabelValues(r.Namespace, r.Policy, string(r.State)).Inc()
		if r.State != health.StateSkewed {
			continue
		}
		worst := map[string]int{}
		for _, s := range r.Constraints {
			if health.Skewed(s) {
				worst[s.TopologyKey] = max(worst[s.TopologyKey], s.Skew)
			}
		}
		for key, skew := range worst {
			m.skew.WithLabelValues(r.Namespace, r.Name, r.Kind, key).Set(float64(skew))
		}
	}
}

// setReady replaces the readiness gauges with conds, one per policy.
func (m *auditMetrics) setReady(conds []policyCondition) {
	m.ready.Reset()
	for _, c := range conds {
		v := 0.0
		if c.cond.Status == metav1.ConditionTrue {
			v = 1
		}
		m.ready.WithLabelValues(c.kind, c.namespace, c.name, c.cond.Reason).Set(v)
	}
}

// policyCondition is the Ready condition a pass computed for a policy.
type policyCondition struct {
	kind, namespace, name string
	cond                  metav1.Condition
}

// MetricNames returns the names of spreadguard's own metrics, sorted: the
// admission and policy metrics every replica exports and the audit's, which
// the leader exports. The chart's dashboard and alerts are held to them, so
// that neither queries a metric the server does not have.
func MetricNames() ([]string, error) {
	reg := &describingRegistry{}
	if _, err := admission.NewMetrics(reg); err != nil {
		return nil, err
	}
	if _, err := newAuditMetrics(reg); err != nil {
		return nil, err
	}
	if _, err := policies.New(nil, logr.Discard(), nil, reg); err != nil {
		return nil, err
	}
	slices.Sort(reg.names)
	return reg.names, nil
}

// describingRegistry collects the names of the metrics registered with it.
// A Desc exposes its name only in its String form.
type describingRegistry struct{ names []string }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *describingRegistry) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() {
		c.Describe(descs)
		close(descs)
	}()
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			return fmt.Errorf("no name in the metric description %s", d)
		}
		r.names = append(r.names, m[1])
	}
	return nil
}

func (r *describingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *describingRegistry) Unregister(prometheus.Collector) bool { return false }
