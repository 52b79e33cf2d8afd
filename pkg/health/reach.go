package health

import (
	"fmt"
	"slices"
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

// RuleUnservedZone is the rule of a Report result that says a policy
// spreads over zones an autoscaler's node pool requires but cannot serve.
const RuleUnservedZone = "unservedZone"

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

// Unserved is what the audit says of a policy whose hard constraints spread
// over topology.kubernetes.io/zone while an autoscaler's node pool requires
// zones its node class cannot serve (zones, spread.UnservedZone): Karpenter
// counts such a zone as a domain with 0 pods but never adds a node there,
// so the pods whose spread needs it stay Pending
// (https://github.com/kubernetes-sigs/karpenter/issues/3272). The rule is
// kept simple: every such policy is affected, whatever its pods' node
// affinity, since which NodePool a pod lands on is the autoscaler's choice.
//
// As Reach: ready is kept unless True, else it is False with
// ReasonZoneNotServed; results hold one fail for the policy. Under
// spread.DetailDomains the message and properties name the zones only,
// never the NodePools or node classes, which tenants may not read.
func Unserved(ready metav1.Condition, policy string, ref v1.ObjectReference, cs []v1alpha1.Constraint, zones []spread.UnservedZone, detail spread.MessageDetail) (metav1.Condition, []ReportResult) {
	if len(zones) == 0 {
		return ready, nil
	}
	var fields []string
	for i, c := range cs {
		if c.WhenUnsatisfiable == v1.DoNotSchedule && c.TopologyKey == v1.LabelTopologyZone {
			fields = append(fields, fmt.Sprintf("spec.constraints[%d]", i))
		}
	}
	if len(fields) == 0 {
		return ready, nil
	}
	var names, pools []string
	for _, z := range zones {
		if !slices.Contains(names, z.Zone) {
			names = append(names, z.Zone)
		}
		if !slices.Contains(pools, z.NodePool) {
			pools = append(pools, z.NodePool)
		}
	}
	remedy := "ask the cluster's operator to remove " + strings.Join(names, ", ") + " from the node pool's zone requirement, or to let its node class serve it"
	props := map[string]string{"topologyKey": v1.LabelTopologyZone, "zones": strings.Join(names, ",")}
	if detail.NamesNodes() {
		remedy = "remove " + strings.Join(names, ", ") + " from the " + v1.LabelTopologyZone + " requirement of NodePool " + strings.Join(pools, ", NodePool ") + ", or give its node class a subnet there"
		props["nodePools"] = strings.Join(pools, ",")
	}
	msg := fmt.Sprintf("%s spread over %s. %s Remedy: %s.", strings.Join(fields, ", "), v1.LabelTopologyZone, detail.UnservedSentence(zones), remedy)
	result := ReportResult{Policy: policy, Rule: RuleUnservedZone, Result: ResultFail, Properties: props, Message: msg, Resources: []v1.ObjectReference{ref}}
	if ready.Status == metav1.ConditionTrue {
		ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonZoneNotServed, Message: msg}
	}
	return ready, []ReportResult{result}
}

// count is n nouns, in the singular for 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
