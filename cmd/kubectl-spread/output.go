package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// report is SPEC's "offline contract" object, printed by `check -o json`
// and `explain -o json` (and as YAML by -o yaml) under messageDetail nodes;
// under domains, domainsReport. Its fields are the contract: add none
// silently.
type report struct {
	Allowed       bool     `json:"allowed"`
	Action        string   `json:"action"`
	Message       string   `json:"message"`
	Warnings      []string `json:"warnings"`
	Policy        string   `json:"policy"`
	Pod           *v1.Pod  `json:"pod"`
	FeasibleNodes []string `json:"feasibleNodes"`
	// FeasibleTemplates are the nodes an autoscaler can add that would
	// take the pod (NodeTemplates, nodepool/<pool>/<values>,
	// nodegroup/<group>/<zone>), sorted.
	FeasibleTemplates []string            `json:"feasibleTemplates"`
	Constraints       []constraintCounted `json:"constraints"`
}

// constraintCounted is one hard constraint's counting.
type constraintCounted struct {
	TopologyKey       string                           `json:"topologyKey"`
	MaxSkew           int32                            `json:"maxSkew"`
	WhenUnsatisfiable v1.UnsatisfiableConstraintAction `json:"whenUnsatisfiable"`
	GlobalMin         int                              `json:"globalMin"`
	Domains           map[string]int                   `json:"domains"`
}

func newReport(rev *engine.Review) report {
	v := rev.Validation
	r := report{
		Allowed: v.Allowed,
		Action:  string(v.Action),
		Message: v.Message,
		// Empty lists print as [], never null: a consumer can index them
		// without a nil check.
		Warnings:          append([]string{}, v.Warnings...),
		Policy:            policyName(rev),
		Pod:               rev.Pod,
		FeasibleNodes:     []string{},
		FeasibleTemplates: []string{},
		Constraints:       []constraintCounted{},
	}
	if v.Result != nil {
		r.FeasibleNodes = append(r.FeasibleNodes, v.Result.FeasibleNodes...)
		slices.Sort(r.FeasibleNodes)
		r.FeasibleTemplates = append(r.FeasibleTemplates, v.Result.FeasibleTemplates...)
		slices.Sort(r.FeasibleTemplates)
		for _, c := range v.Result.Constraints {
			domains := map[string]int{}
			maps.Copy(domains, c.Domains)
			r.Constraints = append(r.Constraints, constraintCounted{
				TopologyKey:       c.TopologyKey,
				MaxSkew:           c.MaxSkew,
				WhenUnsatisfiable: c.WhenUnsatisfiable,
				GlobalMin:         c.GlobalMin,
				Domains:           domains,
			})
		}
	}
	return r
}

// policyName is the policy whose action decided, or else the one whose
// constraints were injected: the policy that applies to the pod.
func policyName(rev *engine.Review) string {
	if rev.Validation.Policy != nil {
		return rev.Validation.Policy.Name
	}
	if rev.Mutation != nil && rev.Mutation.Policy != nil {
		return rev.Mutation.Policy.Name
	}
	return ""
}

// writeReview prints rev as format says. Its message and warnings are
// worded as the engine's configuration said (engine.Config.MessageDetail);
// the readable report's own tables follow detail, which should be the
// same. Under the nodes detail the JSON (or YAML) object is the offline
// contract's data: feasibleNodes, feasibleTemplates and the domains of
// each constraint, by name. Under domains it is reduced to what domains
// may name (domainsReport).
func writeReview(w io.Writer, format string, rev *engine.Review, detail spread.MessageDetail) error {
	if format == "" {
		return writeReadable(w, rev, detail)
	}
	if !detail.NamesNodes() {
		return encode(w, format, newDomainsReport(newReport(rev)))
	}
	return encode(w, format, newReport(rev))
}

// domainsReport is the offline contract's object under messageDetail
// domains: what a tenant may read, as the webhook's messages word it. The
// feasible nodes and templates are counted, not named (feasibleNodes and
// feasibleTemplates are left out); a constraint over kubernetes.io/hostname
// says how many nodes hold each count (nodesPerCount) instead of its
// domains, which are node names; and the pod, the tenant's own after
// mutation, is shown unbound: no nodeName, no status.
type domainsReport struct {
	report
	// FeasibleNodes and FeasibleTemplates shadow the report's, always
	// nil, so that the names never print.
	FeasibleNodes         []string         `json:"feasibleNodes,omitempty"`
	FeasibleTemplates     []string         `json:"feasibleTemplates,omitempty"`
	FeasibleNodeCount     int              `json:"feasibleNodeCount"`
	FeasibleTemplateCount int              `json:"feasibleTemplateCount"`
	Constraints           []domainsCounted `json:"constraints"`
}

// domainsCounted is one hard constraint's counting under domains.
type domainsCounted struct {
	constraintCounted
	// Domains is the report's, but for kubernetes.io/hostname: absent.
	Domains any `json:"domains,omitempty"`
	// NodesPerCount words a hostname constraint's counts: "2 nodes with
	// 1, 3 nodes with 0".
	NodesPerCount string `json:"nodesPerCount,omitempty"`
}

func newDomainsReport(r report) domainsReport {
	out := domainsReport{report: r, FeasibleNodeCount: len(r.FeasibleNodes), FeasibleTemplateCount: len(r.FeasibleTemplates),
		Constraints: []domainsCounted{}}
	if r.Pod != nil {
		out.Pod = unbound(r.Pod)
	}
	for _, c := range r.Constraints {
		d := domainsCounted{constraintCounted: c, Domains: c.Domains}
		if !spread.DetailDomains.NamesDomainsOf(c.TopologyKey) {
			d.Domains, d.NodesPerCount = nil, spread.NodesPerCount(c.Domains, len(c.Domains))
		}
		out.Constraints = append(out.Constraints, d)
	}
	return out
}

func podName(pod *v1.Pod) string {
	if pod.Name == "" && pod.GenerateName != "" {
		return pod.GenerateName + "<generated>"
	}
	return pod.Name
}

// writeReadable prints the verdict first, then the reasons in the order the
// webhook reached them: the policy, what was injected, the counting of each
// hard constraint, the nodes, the message. When detail names no node, the
// nodes and templates are counted by reason instead of listed, and a
// hostname constraint's domains by how many nodes hold each count, so that
// the report can be shown to the pod's creator as the webhook's messages
// are.
func writeReadable(out io.Writer, rev *engine.Review, detail spread.MessageDetail) error {
	w := &errWriter{w: out}
	v, m, pod := rev.Validation, rev.Mutation, rev.Pod

	w.printf("Pod %s/%s: %s\n", pod.Namespace, podName(pod), verdict(v))
	w.printf("\n")

	if p := policyName(rev); p != "" {
		if m != nil && m.Policy != nil && m.Policy.Name == p {
			w.printf("Policy:    %s %s (priority %d)\n", m.Policy.Kind, p, m.Policy.Priority)
		} else {
			w.printf("Policy:    %s\n", p)
		}
	} else {
		w.printf("Policy:    none\n")
	}
	switch {
	case m == nil:
	case len(m.Injected) > 0:
		w.printf("Injected:  %d constraint(s) into spec.topologySpreadConstraints\n", len(m.Injected))
		for i, c := range m.Injected {
			w.printf("  [%d] %s\n", i, describeConstraint(c))
		}
	default:
		w.printf("Injected:  nothing (%s)\n", m.Skipped)
	}
	if v.Skipped != engine.NotSkipped {
		w.printf("Checked:   no (%s)\n", v.Skipped)
	}

	if res := v.Result; res != nil {
		w.printf("Verdict:   %s\n", res.Verdict)
		for _, c := range res.Constraints {
			writeConstraint(w, c, detail)
		}
		w.printf("\n")
		switch {
		case res.FeasibleCount == 0:
			w.printf("Feasible nodes: none\n")
		case !detail.NamesNodes():
			w.printf("Feasible nodes: %d\n", res.FeasibleCount)
		default:
			w.printf("Feasible nodes (%d): %s\n", len(res.FeasibleNodes), strings.Join(res.FeasibleNodes, ", "))
		}
		if len(res.Excluded) > 0 {
			w.printf("Not feasible:\n")
			writeExcluded(w, res.Excluded, "node", detail)
		}
		writeTemplates(w, res, detail)
	}

	if len(v.Warnings) > 0 {
		w.printf("\nWarnings:\n")
		for _, warning := range v.Warnings {
			w.printf("  - %s\n", warning)
		}
	}
	if v.Message != "" {
		w.printf("\nMessage: %s\n", v.Message)
	}
	return w.err
}

// writeTemplates lists the nodes an autoscaler can add apart from the
// nodes that exist: which would take the pod, and why the others would not.
func writeTemplates(w *errWriter, res *spread.Result, detail spread.MessageDetail) {
	if len(res.FeasibleTemplates)+len(res.ExcludedTemplates) == 0 {
		return
	}
	w.printf("\nNodes an autoscaler can add:\n")
	if !detail.NamesNodes() {
		if n := len(res.FeasibleTemplates); n > 0 {
			w.printf("  %s: feasible\n", countOf(n, "template"))
		}
		writeExcluded(w, res.ExcludedTemplates, "template", detail)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range res.FeasibleTemplates {
		fmt.Fprintf(tw, "  %s\tfeasible\n", name)
	}
	for _, e := range res.ExcludedTemplates {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Name, e.Reason, e.Detail)
	}
	w.check(tw.Flush())
}

// writeExcluded lists excluded nodes or templates (noun) with their reason
// and detail, or, when detail names no node, how many there are of each
// reason: the names and the details (a taint, a node's domain) are the
// nodes'.
func writeExcluded(w *errWriter, excluded []spread.ExcludedNode, noun string, detail spread.MessageDetail) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if detail.NamesNodes() {
		for _, e := range excluded {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Name, e.Reason, e.Detail)
		}
		w.check(tw.Flush())
		return
	}
	for _, r := range byReason(excluded) {
		fmt.Fprintf(tw, "  %s\t%s\n", r.reason, countOf(r.n, noun))
	}
	w.check(tw.Flush())
}

// reasonCount is how many nodes are left out for one reason.
type reasonCount struct {
	reason spread.ExclusionReason
	n      int
}

// byReason counts excluded by reason, sorted by reason.
func byReason(excluded []spread.ExcludedNode) []reasonCount {
	n := map[spread.ExclusionReason]int{}
	for _, e := range excluded {
		n[e.Reason]++
	}
	out := make([]reasonCount, 0, len(n))
	for _, reason := range slices.Sorted(maps.Keys(n)) {
		out = append(out, reasonCount{reason, n[reason]})
	}
	return out
}

// countOf is "1 node" or "3 nodes".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func verdict(v *engine.Validation) string {
	switch {
	case !v.Allowed:
		return fmt.Sprintf("DENIED (action %s)", v.Action)
	case v.NewNode:
		return "ALLOWED: no current node fits, a node an autoscaler can add would"
	case v.Action != "":
		return fmt.Sprintf("ALLOWED, but its hard spread constraints cannot be met (action %s)", v.Action)
	default:
		return "ALLOWED"
	}
}

func writeConstraint(w *errWriter, c spread.ConstraintResult, detail spread.MessageDetail) {
	w.printf("\nspec.topologySpreadConstraints[%d]: %s, maxSkew %d, %s\n", c.Index, c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable)
	sel := c.Selector
	if sel == "" {
		sel = "<everything>"
	}
	w.printf("  selector %s; the pod itself matches: %s\n", sel, yesNo(c.SelfMatch == 1))
	w.printf("  nodeAffinityPolicy %s, nodeTaintsPolicy %s, minDomains %d\n", c.NodeAffinityPolicy, c.NodeTaintsPolicy, c.MinDomains)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  DOMAIN\tMATCHING PODS\tSKEW IF PLACED HERE (PODS + SELF - MIN)\tMAXSKEW %d\n", c.MaxSkew)
	row := func(domain string, n int) {
		skew := n + c.SelfMatch - c.GlobalMin
		verdict := "ok"
		if skew > int(c.MaxSkew) {
			verdict = "exceeded"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d + %d - %d = %d\t%s\n", domain, n, n, c.SelfMatch, c.GlobalMin, skew, verdict)
	}
	if detail.NamesDomainsOf(c.TopologyKey) {
		for _, d := range slices.Sorted(maps.Keys(c.Domains)) {
			row(d, c.Domains[d])
		}
	} else {
		// The domains are nodes: one row per count, the nodes that hold
		// it counted, fullest first.
		nodes := map[int]int{}
		for _, n := range c.Domains {
			nodes[n]++
		}
		for _, n := range slices.Backward(slices.Sorted(maps.Keys(nodes))) {
			row(countOf(nodes[n], "node"), n)
		}
	}
	w.check(tw.Flush())
	if len(c.Domains) == 0 {
		w.printf("  (no domain: no node takes part in the counting)\n")
	}
	w.printf("  global minimum: %d\n", c.GlobalMin)
	writeAddedDomains(w, c, detail)
	if !detail.NamesNodes() {
		for _, r := range byReason(c.Excluded) {
			w.printf("  not counted: %s (%s)\n", countOf(r.n, "node"), r.reason)
		}
		return
	}
	for _, e := range c.Excluded {
		detail := ""
		if e.Detail != "" {
			detail = ": " + e.Detail
		}
		w.printf("  not counted: %s %s%s\n", e.Name, e.Reason, detail)
	}
}

// writeAddedDomains puts the domains the nodes an autoscaler can add would
// add beside the domains the scheduler counts: with minDomains above the
// count, they are what decides whether the global minimum stays 0.
func writeAddedDomains(w *errWriter, c spread.ConstraintResult, detail spread.MessageDetail) {
	if len(c.AddedDomains) == 0 {
		return
	}
	added := strings.Join(c.AddedDomains, ", ")
	if !detail.NamesDomainsOf(c.TopologyKey) {
		added = countOf(len(c.AddedDomains), "domain")
	}
	w.printf("  domains counted: %d; nodes an autoscaler can add would add: %s\n", c.DomainCount, added)
}

func describeConstraint(c v1.TopologySpreadConstraint) string {
	parts := []string{
		fmt.Sprintf("%s maxSkew %d %s", c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable),
	}
	if c.MinDomains != nil {
		parts = append(parts, fmt.Sprintf("minDomains %d", *c.MinDomains))
	}
	if c.NodeAffinityPolicy != nil {
		parts = append(parts, "nodeAffinityPolicy "+string(*c.NodeAffinityPolicy))
	}
	if c.NodeTaintsPolicy != nil {
		parts = append(parts, "nodeTaintsPolicy "+string(*c.NodeTaintsPolicy))
	}
	if len(c.MatchLabelKeys) > 0 {
		parts = append(parts, "matchLabelKeys "+strings.Join(c.MatchLabelKeys, ","))
	}
	if c.LabelSelector != nil {
		parts = append(parts, "selector "+metav1.FormatLabelSelector(c.LabelSelector))
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes (+1)"
	}
	return "no (+0)"
}

// errWriter keeps the first write error, so the report reads as a list of
// lines rather than a list of error checks.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}

func (e *errWriter) check(err error) {
	if e.err == nil {
		e.err = err
	}
}
