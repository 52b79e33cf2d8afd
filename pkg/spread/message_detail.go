package spread

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// What a message may name under each MessageDetail is decided here, for
// every string spreadguard words: the denial and its warnings (this
// package), the forecast (pkg/forecast), the Reports (pkg/health) and
// kubectl-spread's output.
//
// Under DetailDomains a message names the domains a constraint counts by
// (its topology key and, but for kubernetes.io/hostname, their values: the
// pod's creator needs "zone c" to act) and nothing else of the nodes: no
// node name or hostname, no other node label, no taint key or value, and no
// node an autoscaler can add by its template, NodeTemplate, NodePool or
// node group.

// NamesNodes reports whether a message under d may name nodes, their labels
// and taints, and the templates of the nodes an autoscaler can add.
func (d MessageDetail) NamesNodes() bool { return d != DetailDomains }

// NamesDomainsOf reports whether a message under d may name the domains of
// topology key key: always, but under DetailDomains the values of
// kubernetes.io/hostname, which are node names.
func (d MessageDetail) NamesDomainsOf(key string) bool {
	return d.NamesNodes() || key != v1.LabelHostname
}

// DomainName names value, a domain of topology key key, in a sentence:
// "zone a", "region r", "node n", or "key=value"; "a node" when d does not
// name key's domains.
func (d MessageDetail) DomainName(key, value string) string {
	if !d.NamesDomainsOf(key) {
		return "a node"
	}
	switch key {
	case v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone:
		return "zone " + value
	case v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion:
		return "region " + value
	case v1.LabelHostname:
		return "node " + value
	}
	return key + "=" + value
}

// NodesPerCount words the counts of a constraint whose domains may not be
// named (see NamesDomainsOf) as how many domains (nodes) hold each count,
// fullest first: "2 nodes with 2, 1 node with 0". counts maps domains to
// their matching pods and may leave out the empty ones; domains is the
// number of counted domains, the empty ones included.
func NodesPerCount(counts map[string]int, domains int) string {
	nodesWith := map[int]int{}
	listed := 0
	for _, n := range counts {
		if n > 0 {
			nodesWith[n]++
			listed++
		}
	}
	if empty := domains - listed; empty > 0 {
		nodesWith[0] = empty
	}
	if len(nodesWith) == 0 {
		return "no node"
	}
	parts := make([]string, 0, len(nodesWith))
	for _, n := range slices.Backward(slices.Sorted(maps.Keys(nodesWith))) {
		parts = append(parts, fmt.Sprintf("%s with %d", plural(nodesWith[n], "node"), n))
	}
	return strings.Join(parts, ", ")
}

// UnservedSentence words zs, sorted, as the reason pods needing them stay
// Pending, naming the NodePools and node classes only where d names nodes:
// "Zone d is required by an autoscaler's node pool whose node class cannot
// serve it: no node comes up there, so pods that need it stay Pending."
// It is "" for no zone.
func (d MessageDetail) UnservedSentence(zs []UnservedZone) string {
	if len(zs) == 0 {
		return ""
	}
	var zones, pools []string
	for _, z := range zs {
		if !slices.Contains(zones, z.Zone) {
			zones = append(zones, z.Zone)
		}
		if p := "NodePool " + z.NodePool + " (" + z.NodeClass + ")"; !slices.Contains(pools, p) {
			pools = append(pools, p)
		}
	}
	what, it := "Zone "+zones[0]+" is", "it"
	if len(zones) > 1 {
		what, it = "Zones "+strings.Join(zones, ", ")+" are", "them"
	}
	by := "an autoscaler's node pool whose node class cannot serve " + it
	if d.NamesNodes() {
		by = strings.Join(pools, " and ") + ", whose node class cannot serve " + it
	}
	return fmt.Sprintf("%s required by %s: no node comes up there, so pods that need %s stay Pending.", what, by, it)
}
