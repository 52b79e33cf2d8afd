package admission

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spreadguard/spreadguard/pkg/engine"
)

// Webhook names, the values of the "webhook" label.
const (
	WebhookMutatePod                   = "mutate-pod"
	WebhookValidatePod                 = "validate-pod"
	WebhookValidateSpreadPolicy        = "validate-spreadpolicy"
	WebhookValidateClusterSpreadPolicy = "validate-clusterspreadpolicy"
)

// Results, the values of the "result" label: how a request was answered.
const (
	ResultAllowed  = "allowed"
	ResultPatched  = "patched"
	ResultSkipped  = "skipped"
	ResultWarned   = "warned"
	ResultAudited  = "audited"
	ResultDenied   = "denied"
	ResultInvalid  = "invalid"
	ResultErrored  = "errored"
	ResultUnsynced = "unsynced"
)

// Denial reasons, the values of the "reason" label of the denials counter.
const (
	DenialUnsatisfiable = "unsatisfiable"
	DenialNotSynced     = "not_synced"
	DenialInvalidPolicy = "invalid_policy"
)

// Metrics are spreadguard's own Prometheus metrics. They sit beside
// controller-runtime's webhook metrics, which count HTTP requests; these
// count decisions.
type Metrics struct {
	// Requests counts admission requests by webhook and result.
	Requests *prometheus.CounterVec
	// Latency is the time from decoding a request to its answer.
	Latency *prometheus.HistogramVec
	// Injected counts the constraints written into pods.
	Injected prometheus.Counter
	// Denials counts refused requests by reason and the namespace of the
	// refused object. Namespaces are bounded by the cluster's, as the
	// namespace label of NewNodes is.
	Denials *prometheus.CounterVec
	// Audits counts unsatisfiable pods admitted under the Audit action.
	Audits prometheus.Counter
	// NewNodes counts pods no current node takes, admitted because a node
	// an autoscaler can add would, by namespace.
	NewNodes *prometheus.CounterVec
	// CacheSynced is 1 once the informer caches have synced.
	CacheSynced prometheus.Gauge
	// Skips counts pods left alone, by webhook and the reason's label
	// (engine.SkipReason's Label, or LabelNotCreate).
	Skips *prometheus.CounterVec
	// Errors counts pod requests spreadguard could not decide because of a
	// fault of its own, by webhook and reason (FaultLookup, FaultEngine,
	// FaultPanic); each was answered as the failure policy says.
	Errors *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (the
// controller-runtime registry in the server, a fresh one in tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Requests: counterVec("spreadguard_admission_requests_total",
			"Admission requests answered, by webhook and result.", "webhook", "result"),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "spreadguard_admission_decision_duration_seconds",
			Help: "Time taken to decide an admission request, by webhook.",
			// The decision budget is 1 ms at p99, which the low buckets
			// resolve; the high ones reach the longest webhook timeout
			// (30 s), with half and all of the default 3 s among them, so
			// that a p99 near the timeout (SpreadguardWebhookSlow) is
			// seen as such and not as the top bucket's bound.
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 1.5, 3, 5, 10, 15, 30},
		}, []string{"webhook"}),
		Injected: counter("spreadguard_injected_constraints_total",
			"Topology spread constraints injected into pods."),
		Denials: counterVec("spreadguard_denials_total",
			"Admission requests denied, by reason and namespace (empty for a ClusterSpreadPolicy).", "reason", "namespace"),
		Audits: counter("spreadguard_audited_pods_total",
			"Pods whose hard spread constraints cannot be met, admitted under the Audit action."),
		NewNodes: counterVec("spreadguard_admitted_for_new_node_total",
			"Pods that no current node takes, admitted because a node an autoscaler can add (a NodeTemplate, "+
				"a Karpenter NodePool or a node group) would, by namespace.", "namespace"),
		CacheSynced: gauge("spreadguard_cache_synced", "1 once the informer caches have synced, else 0."),
		Skips: counterVec("spreadguard_skipped_pods_total",
			"Pods left unmutated or unchecked, by webhook and reason.", "webhook", "reason"),
		Errors: counterVec("spreadguard_admission_errors_total",
			"Pod admission requests not decided because of an internal error, by webhook and reason; "+
				"each was admitted unchanged (failurePolicy Ignore) or refused (Fail).", "webhook", "reason"),
	}
	for _, c := range []prometheus.Collector{m.Requests, m.Latency, m.Injected, m.Denials, m.Audits, m.NewNodes, m.CacheSynced, m.Skips, m.Errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the metrics: %w", err)
		}
	}
	return m, nil
}

// The metrics other than the latency histogram need a name and a help
// text, and labels if they have any.

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// observe records one answered request.
func (m *Metrics) observe(webhook, result string, start time.Time) {
	if m == nil {
		return
	}
	m.Requests.WithLabelValues(webhook, result).Inc()
	m.Latency.WithLabelValues(webhook).Observe(time.Since(start).Seconds())
}

// LabelNotCreate is the reason label of a request skipped because it is
// not a pod's CREATE (nor the UPDATE that removes its last scheduling
// gate): the webhook configurations send none, so a count means one that
// sends more.
const LabelNotCreate = "not_create"

// skipped counts a pod left alone for reason.
func (m *Metrics) skipped(webhook string, reason engine.SkipReason) {
	if m != nil {
		m.Skips.WithLabelValues(webhook, reason.Label()).Inc()
	}
}

// notCreate counts a request skipped because it is not a pod's CREATE.
func (m *Metrics) notCreate(webhook string) {
	if m != nil {
		m.Skips.WithLabelValues(webhook, LabelNotCreate).Inc()
	}
}

func (m *Metrics) denied(reason, namespace string) {
	if m != nil {
		m.Denials.WithLabelValues(reason, namespace).Inc()
	}
}
