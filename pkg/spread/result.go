package spread

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// evaluation is what a checker (Snapshot or Index) computes for one pod;
// assemble turns it into the Result, so that both checkers share every
// rule about what a Result holds.
type evaluation struct {
	constraints []constraint
	// domains holds, per constraint, the matching pods per counted domain.
	// When detailed it holds every counted domain; otherwise at least the
	// domains with a non-zero count.
	domains     []map[string]int
	domainCount []int
	globalMin   []int
	// smallest is, per constraint, the smallest count of a counted domain
	// (math.MaxInt32 when there is none), before minDomains.
	smallest []int
	// templates holds each template's outcome, in name order, when they
	// were checked: with Explain, or when no existing node is feasible.
	templates []templateReport
	// candidates pass node affinity, nodeSelector, taints and
	// unschedulable; feasible ones also pass the spread constraints.
	candidates int
	feasible   int
	// detailed is set when nodes holds every node, sorted by name, and
	// domains holds every counted domain.
	detailed bool
	nodes    []nodeReport
	// detail is what the messages may name (message_detail.go).
	detail MessageDetail
	// facts answers the questions of a denial's message; when nil, the
	// per-node reports do.
	facts denialFacts
	// unserved are the zones an autoscaler's node pool requires that its
	// node class cannot serve, sorted.
	unserved []UnservedZone
}

// newEvaluation returns an evaluation of constraints cs with its
// per-constraint slices made.
func newEvaluation(cs []constraint) *evaluation {
	return &evaluation{
		constraints: cs,
		domains:     make([]map[string]int, len(cs)),
		domainCount: make([]int, len(cs)),
		globalMin:   make([]int, len(cs)),
		smallest:    make([]int, len(cs)),
	}
}

// nodeReport holds the facts about one node from which the explanations
// are derived.
type nodeReport struct {
	name   string
	labels map[string]string
	// cordoned: spec.unschedulable and the pod does not tolerate it.
	cordoned bool
	// taint is the first NoSchedule/NoExecute taint the pod does not
	// tolerate, if any.
	taint *v1.Taint
	// affinity: the node matches the pod's nodeSelector and required node
	// affinity.
	affinity bool
	// missingKey is the first hard topology key the node lacks.
	missingKey string
}

// globalMinimum is minMatchNum upstream: the smallest domain count, or 0
// when there are fewer domains than minDomains. With minDomains >= 1, no
// domain at all also means 0.
func globalMinimum(c *constraint, domainCount int, smallest int) int {
	if domainCount < int(c.minDomains) {
		return 0
	}
	return smallest
}

// filterReason is why a node is not a candidate, in the scheduler's filter
// order (NodeUnschedulable, TaintToleration, NodeAffinity), or "".
func (r *nodeReport) filterReason() (ExclusionReason, string) {
	switch {
	case r.cordoned:
		return ReasonUnschedulable, "spec.unschedulable is true"
	case r.taint != nil:
		return ReasonUntoleratedTaint, r.taint.ToString()
	case !r.affinity:
		return ReasonNodeAffinity, ""
	}
	return "", ""
}

// skewOf is the left side of the Filter rule for node r and constraint i.
func (ev *evaluation) skewOf(i int, r *nodeReport) (domain string, count, skew int) {
	c := &ev.constraints[i]
	domain = r.labels[c.topologyKey]
	count = ev.domains[i][domain]
	// 'existing matching num' + 'if self-match (1 or 0)' - 'global minimum' <= 'maxSkew'
	return domain, count, count + c.selfMatch - ev.globalMin[i]
}

// nodeVerdict is why node r is not feasible, or "" when it is.
func (ev *evaluation) nodeVerdict(r *nodeReport) (ExclusionReason, string) {
	if reason, detail := r.filterReason(); reason != "" {
		return reason, detail
	}
	if r.missingKey != "" {
		return ReasonMissingTopologyKey, r.missingKey
	}
	for i := range ev.constraints {
		c := &ev.constraints[i]
		domain, count, skew := ev.skewOf(i, r)
		if skew > int(c.maxSkew) {
			return ReasonSkew, fmt.Sprintf("spec.topologySpreadConstraints[%d]: %s=%s has %d matching pods; %d + %d - %d = %d > maxSkew %d",
				c.index, c.topologyKey, domain, count, count, c.selfMatch, ev.globalMin[i], skew, c.maxSkew)
		}
	}
	return "", ""
}

// countingExclusion is why node r took no part in constraint i's counting,
// in the order PreFilter checks: topology keys, then the inclusion
// policies.
func (ev *evaluation) countingExclusion(i int, r *nodeReport) (ExclusionReason, string) {
	c := &ev.constraints[i]
	switch {
	case r.missingKey != "":
		return ReasonMissingTopologyKey, r.missingKey
	case c.nodeAffinityPolicy == v1.NodeInclusionPolicyHonor && !r.affinity:
		return ReasonNodeAffinity, "nodeAffinityPolicy: Honor"
	case c.nodeTaintsPolicy == v1.NodeInclusionPolicyHonor && r.taint != nil:
		return ReasonUntoleratedTaint, r.taint.ToString() + " (nodeTaintsPolicy: Honor)"
	}
	return "", ""
}

// verdict applies the rules of api.go to the counts.
func (ev *evaluation) verdict() Verdict {
	switch {
	case len(ev.constraints) == 0:
		return VerdictNoHardConstraints
	case ev.feasible > 0:
		return VerdictFeasible
	case len(ev.feasibleTemplates()) > 0:
		return VerdictFeasibleOnNewNode
	case ev.candidates > 0 || ev.templateCandidates() > 0:
		return VerdictUnsatisfiable
	}
	return VerdictNoCandidateNodes
}

// assemble builds the Result.
func assemble(ev *evaluation, opts Options) (*Result, error) {
	res := &Result{
		Verdict:       ev.verdict(),
		Constraints:   make([]ConstraintResult, len(ev.constraints)),
		FeasibleCount: ev.feasible,
	}
	for i := range ev.constraints {
		c := &ev.constraints[i]
		// The Result may share the evaluation's map: nothing changes it
		// afterwards.
		domains := ev.domains[i]
		if !opts.Explain && hasZero(domains) {
			domains = make(map[string]int, len(ev.domains[i]))
			for d, n := range ev.domains[i] {
				if n > 0 {
					domains[d] = n
				}
			}
		}
		res.Constraints[i] = ConstraintResult{
			Index:              c.index,
			TopologyKey:        c.topologyKey,
			MaxSkew:            c.maxSkew,
			WhenUnsatisfiable:  v1.DoNotSchedule,
			MinDomains:         c.minDomains,
			NodeAffinityPolicy: c.nodeAffinityPolicy,
			NodeTaintsPolicy:   c.nodeTaintsPolicy,
			Selector:           c.selector.String(),
			SelfMatch:          c.selfMatch,
			GlobalMin:          ev.globalMin[i],
			Domains:            domains,
			DomainCount:        ev.domainCount[i],
		}
		if opts.Explain {
			res.Constraints[i].AddedDomains = ev.addedDomains(i)
		}
	}
	if ev.detailed {
		// Each node's verdict, derived from its facts, must reproduce the
		// checker's own counts: a disagreement is a fault in this package,
		// returned as an error rather than answered.
		candidates := 0
		feasible := make([]bool, len(ev.nodes))
		reasons := make([]ExcludedNode, len(ev.nodes))
		for i := range ev.nodes {
			r := &ev.nodes[i]
			if reason, _ := r.filterReason(); reason == "" {
				candidates++
			}
			reason, detail := ev.nodeVerdict(r)
			feasible[i] = reason == ""
			reasons[i] = ExcludedNode{Name: r.name, Reason: reason, Detail: detail}
		}
		if n := countTrue(feasible); candidates != ev.candidates || n != ev.feasible {
			return nil, fmt.Errorf("checking spread: internal inconsistency: %d candidate and %d feasible nodes counted, %d and %d explained",
				ev.candidates, ev.feasible, candidates, n)
		}
		if opts.Explain {
			for i := range ev.nodes {
				if feasible[i] {
					res.FeasibleNodes = append(res.FeasibleNodes, ev.nodes[i].name)
				} else {
					res.Excluded = append(res.Excluded, reasons[i])
				}
				for ci := range ev.constraints {
					if reason, detail := ev.countingExclusion(ci, &ev.nodes[i]); reason != "" {
						res.Constraints[ci].Excluded = append(res.Constraints[ci].Excluded, ExcludedNode{Name: ev.nodes[i].name, Reason: reason, Detail: detail})
					}
				}
			}
		}
	}
	if opts.Explain || res.Verdict == VerdictFeasibleOnNewNode {
		res.FeasibleTemplates = ev.feasibleTemplates()
	}
	if opts.Explain {
		for _, r := range ev.templates {
			if r.reason != "" {
				res.ExcludedTemplates = append(res.ExcludedTemplates, ExcludedNode{Name: r.template.Name, Reason: r.reason, Detail: r.detail})
			}
		}
	}
	ev.detail = opts.Detail
	switch res.Verdict {
	case VerdictFeasibleOnNewNode:
		res.Message = ev.newNodeMessage()
		if note := ev.unservedNote(); note != "" {
			// Karpenter counts the unserved zone at 0 pods too: the new
			// node it picks for the pod may be one it cannot add.
			res.Message += "." + note
		}
	case VerdictUnsatisfiable:
		if ev.candidates == 0 {
			res.Message = "No node passes the pod's node affinity, nodeSelector, taints and cordons." + ev.templatesNote() + ev.unservedNote()
			break
		}
		if ev.facts == nil {
			ev.facts = reportFacts{ev}
		}
		res.Message = ev.unsatisfiableMessage() + ev.templatesNote() + ev.unservedNote()
	case VerdictNoCandidateNodes:
		res.Message = "No node passes the pod's node affinity, nodeSelector, taints and cordons, so topology spread is not what keeps it from being scheduled; the scheduler will leave it Pending until such a node exists." + ev.unservedNote()
	}
	res.Unserved = ev.unservedZones()
	return res, nil
}

func hasZero(m map[string]int) bool {
	for _, n := range m {
		if n == 0 {
			return true
		}
	}
	return false
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
