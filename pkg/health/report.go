package health

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// The openreports.io Report the audit writes in each namespace: the format
// Kyverno (1.15 and later) writes and Policy Reporter shows.
// https://github.com/openreports/reports-api/blob/main/apis/openreports.io/v1alpha1/report_types.go
const (
	ReportAPIVersion = "openreports.io/v1alpha1"
	ReportKind       = "Report"
	// ReportName is the name of the one Report per namespace.
	ReportName = "spreadguard"
	// ReportSource is the Report's source.
	ReportSource = "spreadguard"
)

// The results of a Report.
const (
	ResultPass  = "pass"
	ResultFail  = "fail"
	ResultWarn  = "warn"
	ResultError = "error"
)

// Report is the content of one namespace's Report: what the audit owns in
// it, everything but the metadata.
type Report struct {
	Source  string         `json:"source"`
	Summary ReportSummary  `json:"summary"`
	Results []ReportResult `json:"results"`
}

// ReportSummary counts a Report's results.
type ReportSummary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error,omitempty"`
}

// ReportResult is one workload's one constraint.
type ReportResult struct {
	// Policy is the spreadguard policy, as the spreadguard.io/policy
	// annotation names it.
	Policy string `json:"policy"`
	// Rule names the constraint: its topology key and whenUnsatisfiable.
	Rule    string `json:"rule"`
	Result  string `json:"result"`
	Message string `json:"message"`
	// Properties hold the counts per domain ("domains": "a=3,b=0"), the
	// skew, maxSkew and the workload's state; the message does not repeat
	// the counts, which are most of a result's size.
	Properties map[string]string    `json:"properties"`
	Resources  []v1.ObjectReference `json:"resources"`
}

// Reports returns the Report of each namespace that holds an audited
// workload, by namespace: one result per workload and constraint, pass
// when within what the constraint allows, fail when a hard constraint is
// skewed, warn when a soft one is and for every constraint of an
// uncovered workload (its pods carry none: the counts are what the policy
// would ask); a workload that could not be audited has one error result.
// Results are sorted, so that an unchanged cluster gives an equal Report.
//
// With detail spread.DetailDomains (the webhook's default on a shared
// cluster) a constraint over kubernetes.io/hostname, whose domains are
// node names, reports how many nodes hold each count instead
// (spread.NodesPerCount): a tenant who may read the Reports of a namespace
// usually may not read Nodes.
func Reports(rs []Result, detail spread.MessageDetail) map[string]*Report {
	out := map[string]*Report{}
	for _, r := range rs {
		rep := out[r.Namespace]
		if rep == nil {
			rep = &Report{Source: ReportSource}
			out[r.Namespace] = rep
		}
		if r.State == StateError {
			rep.add(errorResult(&r))
		}
		for _, s := range r.Constraints {
			rep.add(resultOf(&r, s, detail))
		}
	}
	for _, rep := range out {
		slices.SortFunc(rep.Results, func(a, b ReportResult) int {
			return cmp.Or(strings.Compare(a.Resources[0].Kind, b.Resources[0].Kind),
				strings.Compare(a.Resources[0].Name, b.Resources[0].Name), strings.Compare(a.Rule, b.Rule))
		})
	}
	return out
}

// add appends res to rep and counts it in the summary.
func (rep *Report) add(res ReportResult) {
	switch res.Result {
	case ResultPass:
		rep.Summary.Pass++
	case ResultFail:
		rep.Summary.Fail++
	case ResultWarn:
		rep.Summary.Warn++
	case ResultError:
		rep.Summary.Error++
	}
	rep.Results = append(rep.Results, res)
}

// resource is the reference to r's workload a result names.
func resource(r *Result) []v1.ObjectReference {
	apiVersion := "v1" // a Service's
	if k, ok := workload.ByKind(r.Kind); ok {
		apiVersion = k.GVK.GroupVersion().String()
	}
	return []v1.ObjectReference{{APIVersion: apiVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}}
}

// errorResult is the one result of a workload that could not be audited.
func errorResult(r *Result) ReportResult {
	return ReportResult{
		Policy: r.Policy,
		Result: ResultError,
		Message: fmt.Sprintf("spreadguard cannot audit this workload: %s. "+
			"Correct the value it names in the selector or the topology spread constraints, or recreate the object.", r.Error),
		Properties: map[string]string{"state": string(r.State)},
		Resources:  resource(r),
	}
}

func resultOf(r *Result, s spread.Spread, detail spread.MessageDetail) ReportResult {
	domains := DomainsText(s.Domains)
	if !detail.NamesDomainsOf(s.TopologyKey) {
		domains = spread.NodesPerCount(s.Domains, s.DomainCount)
	}
	res := ReportResult{
		Policy: r.Policy,
		Rule:   s.TopologyKey + " " + string(s.WhenUnsatisfiable),
		Result: ResultPass,
		Properties: map[string]string{
			"domains": boundedDomains(domains),
			"skew":    strconv.Itoa(s.Skew),
			"maxSkew": strconv.Itoa(int(s.MaxSkew)),
			"state":   string(r.State),
		},
		Resources: resource(r),
	}
	skewed := Skewed(s)
	switch {
	case r.State == StateUncovered:
		res.Result = ResultWarn
		res.Message = fmt.Sprintf("the pods carry no topology spread constraint; the policy's constraint over %s sees a skew of %d (maxSkew %d). "+
			"Recreate them (kubectl rollout restart) so that spreadguard gives them the policy's constraints.", s.TopologyKey, s.Skew, s.MaxSkew)
	case skewed && s.WhenUnsatisfiable == v1.DoNotSchedule:
		res.Result = ResultFail
		res.Message = fmt.Sprintf("skew %d over %s exceeds maxSkew %d. "+
			"Restore the missing domains' capacity, or recreate pods from the fullest domains (kubectl rollout restart) so the scheduler spreads them again.",
			s.Skew, s.TopologyKey, s.MaxSkew)
	case skewed:
		res.Result = ResultWarn
		res.Message = fmt.Sprintf("skew %d over %s exceeds the preferred maxSkew %d by more than %d.",
			s.Skew, s.TopologyKey, s.MaxSkew, s.MaxSkew)
	default:
		res.Message = fmt.Sprintf("skew %d over %s is within maxSkew %d.", s.Skew, s.TopologyKey, s.MaxSkew)
	}
	return res
}

// DomainsText writes counts per domain as "a=3,b=0", sorted by domain.
func DomainsText(m map[string]int) string {
	var b strings.Builder
	for i, d := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(m[d]))
	}
	return b.String()
}
