package server

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spreadguard/spreadguard/pkg/admission"
	"github.com/spreadguard/spreadguard/pkg/controller/policies"
	"github.com/spreadguard/spreadguard/pkg/controller/spreadhealth"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/state"
)

// MetricNames returns the names of spreadguard's own metrics, sorted: the
// admission and policy metrics every replica exports and those of spread
// health, which the leader exports. The chart's dashboard and alerts are held to
// them, so that neither queries a metric the server does not have.
func MetricNames() ([]string, error) {
	reg := &describingRegistry{}
	if _, err := admission.NewMetrics(reg); err != nil {
		return nil, err
	}
	if _, err := policies.New(state.NewCluster(spread.NewIndex(), nil), logr.Discard(), nil, reg); err != nil {
		return nil, err
	}
	if _, err := spreadhealth.NewMetrics(reg); err != nil {
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
