// Package health answers, for the workloads that spread policies select, how
// their pods are spread now: per topology spread constraint, the pods per
// domain and the skew, and whether the workload is spread, skewed or not
// covered by any constraint at all.
//
// Admission sees a pod once, when it is created; the audit sees the cluster
// as it is, after zone outages, node-group replacements and pods that
// predate spreadguard. It is pure, like pkg/spread: it reads counts from a
// spread.Index, policies and owners through engine.Sources, and objects the
// caller lists. The controller in pkg/controller/spreadhealth runs it on the
// leader and writes what it finds into policy status and Reports.
package health

import (
	"cmp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// State is what the audit concludes about a workload.
type State string

// The states of a workload.
const (
	// StateSpread: every constraint its pods carry is within its maxSkew.
	StateSpread State = "spread"
	// StateSkewed: a hard constraint's skew exceeds its maxSkew, or a soft
	// constraint's exceeds it by more than maxSkew (the scheduler only
	// prefers a soft constraint, so a little more skew is expected).
	StateSkewed State = "skewed"
	// StateUncovered: its pods carry no topology spread constraint (they
	// predate spreadguard, or were skipped); the counts are those of the
	// constraints its policy would inject.
	StateUncovered State = "uncovered"
	// StateError: the workload could not be audited (its selector or a
	// constraint of its pods does not parse); Result.Error says why.
	StateError State = "error"
)

// Counter is the read-only side of spread.Index the audit needs.
type Counter interface {
	Spreads(pod *v1.Pod) ([]spread.Spread, error)
	PodsMatching(namespace string, sel labels.Selector) int
}

var _ Counter = (*spread.Index)(nil)

// Result is the audit of one workload.
type Result struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Policy is the policy that selects the workload's pods, as the
	// spreadguard.io/policy annotation names it; PolicyKind is its kind.
	Policy     string `json:"policy"`
	PolicyKind string `json:"policyKind"`
	State      State  `json:"state"`
	// Pods is the number of the workload's running and pending pods bound
	// to a node.
	Pods int `json:"pods"`
	// Constraints holds one entry per constraint the pods carry or, for an
	// uncovered workload, per constraint its policy would inject.
	Constraints []spread.Spread `json:"constraints"`
	// Error is why a workload in StateError could not be audited.
	Error string `json:"error,omitempty"`
}

// Skewed reports whether s exceeds what its constraint allows: maxSkew for
// a hard constraint, twice maxSkew for a soft one.
func Skewed(s spread.Spread) bool {
	if s.WhenUnsatisfiable == v1.DoNotSchedule {
		return s.Skew > int(s.MaxSkew)
	}
	return s.Skew > 2*int(s.MaxSkew)
}

// Run audits ws. A workload no policy selects is left out; so is one whose
// policy would inject nothing (no selector can be derived for its pods).
// The namespaces cfg does not serve (engine.Config.Scope) are left out, as
// the webhook leaves them. A workload that cannot be audited is in
// StateError, with the error, and the others are audited all the same: one
// object the engine cannot read degrades its own result only. Results are sorted by namespace, kind and
// name.
func Run(c Counter, src engine.Sources, cfg engine.Config, ws []Workload) []Result {
	out := make([]Result, 0, len(ws))
	serves := map[string]bool{}
	for i := range ws {
		w := &ws[i]
		served, ok := serves[w.Namespace]
		if !ok {
			ns, _ := src.Namespace(w.Namespace)
			served = cfg.Scope().Serves(w.Namespace, ns)
			serves[w.Namespace] = served
		}
		if !served {
			continue
		}
		r, ok, err := checkOne(c, src, cfg, w)
		if err != nil {
			r, ok = failed(src, w, err)
		}
		if ok {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Result) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return out
}

// failed is the result of a workload whose audit failed with err: in
// StateError, under the policy its template's labels select, if one can be
// found. A workload no policy selects is left out, as Run leaves it out
// when it can be audited.
func failed(src engine.Sources, w *Workload, err error) (Result, bool) {
	r := Result{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, State: StateError, Error: err.Error()}
	applied, perr := policy.Resolve(w.Pod, src)
	switch {
	case perr != nil:
		r.Error += "; finding its policy: " + perr.Error()
	case applied == nil:
		return r, false
	default:
		r.Policy, r.PolicyKind = applied.Name, applied.Kind
	}
	return r, true
}

func checkOne(c Counter, src engine.Sources, cfg engine.Config, w *Workload) (Result, bool, error) {
	r := Result{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}
	if w.Err != nil {
		return r, false, w.Err
	}
	pod := w.Pod
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		applied, err := policy.Resolve(pod, src)
		if err != nil || applied == nil {
			return r, false, err
		}
		r.Policy, r.PolicyKind = applied.Name, applied.Kind
	} else {
		// Pods skipped by annotation are uncovered too; what their policy
		// would inject is what they lack.
		bare := *pod
		bare.Annotations = nil
		m, err := engine.Mutate(&bare, src, cfg)
		if err != nil || m.Policy == nil || m.Pod == nil {
			return r, false, err
		}
		r.Policy, r.PolicyKind, r.State = m.Policy.Name, m.Policy.Kind, StateUncovered
		pod = m.Pod
	}
	spreads, err := c.Spreads(pod)
	if err != nil {
		return r, false, err
	}
	r.Constraints = spreads
	r.Pods = c.PodsMatching(w.Namespace, w.Selector)
	if r.State == "" {
		r.State = StateSpread
		if slices.ContainsFunc(spreads, Skewed) {
			r.State = StateSkewed
		}
	}
	return r, true, nil
}

// Counts are the workloads of one policy by state.
type Counts struct {
	Workloads int `json:"workloads"`
	Spread    int `json:"spread"`
	Skewed    int `json:"skewed"`
	Uncovered int `json:"uncovered"`
}

// PolicyKey names a policy: its kind and its annotation name.
type PolicyKey struct{ Kind, Name string }

// Tally counts the results per policy.
func Tally(rs []Result) map[PolicyKey]Counts {
	out := map[PolicyKey]Counts{}
	for _, r := range rs {
		k := PolicyKey{r.PolicyKind, r.Policy}
		c := out[k]
		c.Workloads++
		switch r.State {
		case StateSpread:
			c.Spread++
		case StateSkewed:
			c.Skewed++
		case StateUncovered:
			c.Uncovered++
		}
		out[k] = c
	}
	return out
}
