package health

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// RuleMinDomains is the rule of a Report result that says a policy's
// constraint asks for more domains than can ever exist.
const RuleMinDomains = "minDomains"

// Reach is what the audit says of a policy whose hard constraints ask for
// a minDomains that the nodes and every node an autoscaler can add cannot
// reach (autoscale.ConstraintsOutOfReach): the pods they select beyond one
// per domain and maxSkew stay Pending, since the global minimum stays 0.
// The admission check of each pod says the same in its own words
// (pkg/spread); this is the policy's side, for whoever reads its status
// and Reports rather than a pod's warning.
//
// ready is the Ready condition health.Ready gave: a policy found wrong
// for another reason keeps it. Otherwise, with a constraint out of reach,
// Ready is False with ReasonMinDomainsOutOfReach. results are the Report
// results, one per constraint out of reach, fail, for policy (named as
// Result.Policy names it, its object ref): the domains are listed where
// detail lets them be named.
func Reach(ready metav1.Condition, policy string, ref v1.ObjectReference, out []autoscale.OutOfReach, detail spread.MessageDetail) (metav1.Condition, []ReportResult) {
	if len(out) == 0 {
		return ready, nil
	}
	var msgs []string
	var results []ReportResult
	for _, o := range out {
		msg := reachMessage(o, detail)
		msgs = append(msgs, fmt.Sprintf("spec.constraints[%d]: %s", o.Index, msg))
		results = append(results, ReportResult{
			Policy: policy,
			Rule:   RuleMinDomains,
			Result: ResultFail,
			Properties: map[string]string{
				"topologyKey":      o.TopologyKey,
				"minDomains":       strconv.Itoa(int(o.MinDomains)),
				"reachableDomains": strconv.Itoa(len(o.Domains)),
			},
			Message:   msg,
			Resources: []v1.ObjectReference{ref},
		})
	}
	if ready.Status == metav1.ConditionTrue {
		ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonMinDomainsOutOfReach,
			Message: strings.Join(msgs, "; ")}
	}
	return ready, results
}

// reachMessage words one constraint out of reach with its remedy, as the
// denial of one of its pods does (spread's reachRemedy).
func reachMessage(o autoscale.OutOfReach, detail spread.MessageDetail) string {
	reach := count(len(o.Domains), "domain")
	if detail.NamesDomainsOf(o.TopologyKey) && len(o.Domains) > 0 {
		reach += " (" + strings.Join(o.Domains, ", ") + ")"
	}
	missing := int(o.MinDomains) - len(o.Domains)
	where := count(missing, "more domain") + " of " + o.TopologyKey
	if o.TopologyKey == v1.LabelTopologyZone {
		where = count(missing, "more zone") + " (the zones of a NodePool or of its node class, or the chart's autoscaler.zones)"
	}
	return fmt.Sprintf("minDomains %d over %s, but the nodes and every node an autoscaler can add reach only %s, so the global minimum stays 0 and the pods beyond maxSkew per domain stay Pending. "+
		"Remedy: let the autoscaler add nodes in %s, or lower minDomains to %d.",
		o.MinDomains, o.TopologyKey, reach, where, max(len(o.Domains), 1))
}

// count is n nouns, in the singular for 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
