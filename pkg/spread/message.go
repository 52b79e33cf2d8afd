package spread

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The message of an unsatisfiable pod. It is worded from denialFacts, so it
// reads the same from both checkers, with or without Explain.

const (
	maxListedDomains = 10
	maxListedGroups  = 4
)

// unsatisfiableMessage explains why no candidate node passes the hard
// constraints, naming the constraint to look at, its numbers, the nodes
// that are left out and why, and one remedy.
func (ev *evaluation) unsatisfiableMessage() string {
	candidates, keyed := ev.facts.nodeCounts()
	if keyed == 0 {
		return ev.missingKeyMessage(candidates)
	}
	for i := range ev.constraints {
		if ev.facts.rejected(i, -1) == keyed {
			return ev.skewMessage(i)
		}
	}
	return ev.conflictMessage()
}

func (ev *evaluation) describe(i int) string {
	c := &ev.constraints[i]
	return fmt.Sprintf("spec.topologySpreadConstraints[%d] (topologyKey %s, maxSkew %d)", c.index, c.topologyKey, c.maxSkew)
}

func (ev *evaluation) missingKeyMessage(candidates int) string {
	for i := range ev.constraints {
		key := ev.constraints[i].topologyKey
		lacking := ev.facts.lacking(i)
		if lacking.n == 0 {
			continue
		}
		return fmt.Sprintf("%s cannot be satisfied: none of the %s that pass the pod's node affinity, nodeSelector and taints carries every topology key of its hard constraints; %s %s the label %s. Remedy: label the nodes the pod may use with %s, or remove the constraint.",
			ev.describe(i), plural(candidates, "node"), ev.nodeList(lacking), verb(lacking.n, "lacks", "lack"), key, key)
	}
	// Unreachable: a candidate without a missing key would be keyed.
	return "The pod's hard topology spread constraints cannot be satisfied on any node."
}

func (ev *evaluation) skewMessage(i int) string {
	c := &ev.constraints[i]
	usable := ev.facts.usable(i, -1)
	var b strings.Builder
	fmt.Fprintf(&b, "%s cannot be satisfied on any node. ", ev.describe(i))
	ev.writeCounts(&b, i)
	fmt.Fprintf(&b, " Every node the pod can use is in a domain where the skew would exceed %d: %s.", c.maxSkew, ev.skewList(i, usable))
	if s := ev.exclusionSummary(i); s != "" {
		fmt.Fprintf(&b, " %s.", s)
	}
	if reach, out := ev.minDomainsOutOfReach(i); out {
		fmt.Fprintf(&b, " The nodes and every node an autoscaler can add reach only %s of %s, fewer than minDomains %d, so the global minimum stays 0",
			plural(reach, "domain"), c.topologyKey, c.minDomains)
		if c.selfMatch == 1 {
			fmt.Fprintf(&b, " and each domain is full at maxSkew %d matching %s", c.maxSkew, verb(int(c.maxSkew), "pod", "pods"))
		}
		b.WriteString(": the pods beyond stay Pending until a node exists in another domain.")
		fmt.Fprintf(&b, " Remedy: %s.", ev.reachRemedy(i, reach))
		return b.String()
	}
	fmt.Fprintf(&b, " Remedy: %s.", ev.skewRemedy(i, usable))
	return b.String()
}

// minDomainsOutOfReach reports whether constraint i asks for more domains
// than the nodes and the nodes an autoscaler can add (the templates) can
// ever give the pod's counting, and how many they give. Without
// templates there is nothing to say beyond the skew: the remedy already
// asks for nodes in more domains.
func (ev *evaluation) minDomainsOutOfReach(i int) (reach int, out bool) {
	if len(ev.templates) == 0 {
		return 0, false
	}
	reach, bounded := ev.reach(i)
	return reach, bounded && reach < int(ev.constraints[i].minDomains)
}

// reachRemedy is the remedy of a minDomains out of reach: a source of
// nodes in more domains, or a lower minDomains. It names no NodePool, node
// class or template, so it reads the same under every messageDetail.
func (ev *evaluation) reachRemedy(i, reach int) string {
	c := &ev.constraints[i]
	missing := int(c.minDomains) - reach
	where := plural(missing, "more domain") + " of " + c.topologyKey
	if c.topologyKey == v1.LabelTopologyZone {
		where = plural(missing, "more zone")
	}
	return fmt.Sprintf("let the autoscaler add nodes the pod can use in %s (the zones of a NodePool or of its node class, or the chart's autoscaler.zones), or lower minDomains to %d",
		where, max(reach, 1))
}

func (ev *evaluation) conflictMessage() string {
	// Some constraint rejects a keyed candidate: none is feasible.
	first := 0
	for ev.facts.rejected(first, -1) == 0 {
		first++
	}
	allowed := ev.facts.accepted(first)
	// The constraint that rejects the most of what the first one allows.
	second, most := -1, -1
	for j := range ev.constraints {
		if j == first {
			continue
		}
		if n := ev.facts.rejected(j, first); n > most {
			second, most = j, n
		}
	}
	var b strings.Builder
	allows := fmt.Sprintf("the %s the first allows (%s)", plural(allowed.n, "node"), allowed.list(3))
	if !ev.detail.NamesNodes() {
		allows = fmt.Sprintf("the %s the first allows", plural(allowed.n, "node"))
	}
	fmt.Fprintf(&b, "No node satisfies %s and %s together: %s would break the second. ",
		ev.describe(first), ev.describe(second), allows)
	ev.writeCounts(&b, first)
	b.WriteString(" ")
	ev.writeCounts(&b, second)
	if s := ev.exclusionSummary(second); s != "" {
		fmt.Fprintf(&b, " %s.", s)
	}
	fmt.Fprintf(&b, " Remedy: raise maxSkew of spec.topologySpreadConstraints[%d] to %d, or relax one of the two constraints.",
		ev.constraints[second].index, ev.neededSkew(second, ev.facts.usable(second, first)))
	return b.String()
}

// writeCounts writes the domain counts and the global minimum of
// constraint i.
func (ev *evaluation) writeCounts(b *strings.Builder, i int) {
	c := &ev.constraints[i]
	domains := ev.formatDomains(i)
	if c.countsPods() {
		fmt.Fprintf(b, "Matching pods (selector %q) per %s: %s.", c.selector.String(), c.topologyKey, domains)
	} else {
		fmt.Fprintf(b, "Its selector is empty, which counts no pods (as the scheduler does); domains of %s: %s.", c.topologyKey, domains)
	}
	fmt.Fprintf(b, " The global minimum of spec.topologySpreadConstraints[%d] is %d: %s.", c.index, ev.globalMin[i], ev.minimumReason(i))
}

func (ev *evaluation) minimumReason(i int) string {
	c := &ev.constraints[i]
	if ev.domainCount[i] < int(c.minDomains) {
		return fmt.Sprintf("fewer domains (%d) than minDomains (%d)", ev.domainCount[i], c.minDomains)
	}
	lowest := ev.lowestDomains(i)
	if lowest.n == 1 {
		return fmt.Sprintf("%s has the fewest matching pods", ev.domainName(c.topologyKey, lowest.first[0]))
	}
	if !ev.detail.NamesDomainsOf(c.topologyKey) {
		return fmt.Sprintf("%d nodes have the fewest matching pods", lowest.n)
	}
	return fmt.Sprintf("%d domains have the fewest matching pods (%s)", lowest.n, lowest.list(3))
}

// lowestDomains are the domains holding the global minimum.
func (ev *evaluation) lowestDomains(i int) nameSample {
	if ev.globalMin[i] == 0 {
		return ev.facts.zeros(i)
	}
	var s nameSample
	for d, n := range ev.domains[i] {
		if n == ev.globalMin[i] {
			s.add(d)
		}
	}
	return s
}

// skewList names the domains of the usable nodes with their arithmetic.
func (ev *evaluation) skewList(i int, usable domainSample) string {
	c := &ev.constraints[i]
	part := func(domain string, count int) string {
		return fmt.Sprintf("%s (%d + %d - %d = %d)", ev.domainName(c.topologyKey, domain), count, c.selfMatch, ev.globalMin[i], count+c.selfMatch-ev.globalMin[i])
	}
	var parts []string
	if !ev.detail.NamesDomainsOf(c.topologyKey) {
		// Every domain reads "a node (...)": the parts differ only by
		// count, and each is repeated once per domain holding it.
		var distinct []string
		repeat := map[string]int{}
		for n, domains := range usable.byCount {
			p := part("", n)
			distinct = append(distinct, p)
			repeat[p] = domains
		}
		slices.Sort(distinct)
		for _, p := range distinct {
			for range min(repeat[p], 5-len(parts)) {
				parts = append(parts, p)
			}
		}
	} else {
		// The domain names share their prefix, and a label value sorts
		// before its extensions, so the parts sort as the values do.
		for _, d := range usable.first {
			parts = append(parts, part(d.value, d.n))
		}
	}
	return shortList(parts, usable.n)
}

// neededSkew is the smallest maxSkew that would let constraint i accept
// a node of one of the domains.
func (ev *evaluation) neededSkew(i int, domains domainSample) int {
	return domains.fewest() + ev.constraints[i].selfMatch - ev.globalMin[i]
}

func (ev *evaluation) skewRemedy(i int, usable domainSample) string {
	c := &ev.constraints[i]
	if missing := int(c.minDomains) - ev.domainCount[i]; missing > 0 {
		return fmt.Sprintf("add nodes the pod can use in %s, labelled %s, or lower minDomains to %d",
			plural(missing, "more domain"), c.topologyKey, max(ev.domainCount[i], 1))
	}
	// A lowest domain with a usable node would accept the pod, so every
	// lowest domain holds only nodes the pod cannot use: they pin the
	// minimum.
	pinned := ev.lowestDomains(i).first[0]
	where := ev.domainName(c.topologyKey, pinned)
	allTainted, allOutside, anyCordoned := ev.facts.pinned(i, pinned)
	switch {
	case allTainted && c.nodeTaintsPolicy == v1.NodeInclusionPolicyIgnore:
		return fmt.Sprintf("set nodeTaintsPolicy: Honor so tainted and cordoned nodes do not pin the global minimum at %d, or add capacity the pod can use in %s", ev.globalMin[i], where)
	case allOutside && c.nodeAffinityPolicy == v1.NodeInclusionPolicyIgnore:
		return fmt.Sprintf("set nodeAffinityPolicy: Honor so nodes outside the pod's node affinity do not pin the global minimum at %d, or let the pod run in %s", ev.globalMin[i], where)
	case anyCordoned:
		return fmt.Sprintf("uncordon the nodes in %s (kubectl uncordon) or add schedulable nodes there", where)
	}
	return fmt.Sprintf("add capacity the pod can use in %s, or raise maxSkew to %d", where, ev.neededSkew(i, usable))
}

// exclusionSummary summarises, for constraint i, the counted nodes the pod
// cannot use and the nodes left out of counting, grouped by domain and
// reason.
func (ev *evaluation) exclusionSummary(i int) string {
	c := &ev.constraints[i]
	type group struct {
		domain, why string
		nodes       nameSample
	}
	var list []*group
	for _, g := range ev.facts.exclusions(i) {
		why := ev.exclusionWhy(g)
		k := slices.IndexFunc(list, func(o *group) bool { return o.domain == g.domain && o.why == why })
		if k < 0 {
			list = append(list, &group{domain: g.domain, why: why})
			k = len(list) - 1
		}
		list[k].nodes.merge(g.nodes)
	}
	slices.SortFunc(list, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.domain, b.domain), cmp.Compare(a.why, b.why))
	})
	var parts []string
	rest := 0
	for n, g := range list {
		if n >= maxListedGroups {
			rest += g.nodes.n
			continue
		}
		where := ""
		if g.domain != "" {
			where = " in " + ev.domainName(c.topologyKey, g.domain)
		}
		parts = append(parts, fmt.Sprintf("%s%s %s excluded: %s", ev.nodeList(g.nodes), where, verb(g.nodes.n, "is", "are"), g.why))
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("%s more %s excluded for other reasons", plural(rest, "node"), verb(rest, "is", "are")))
	}
	return strings.Join(parts, "; ")
}

// exclusionWhy words why the nodes of g are left out.
func (ev *evaluation) exclusionWhy(g exclusionGroup) string {
	switch {
	case g.counted && g.reason == ReasonMissingTopologyKey:
		return "not counted, missing the label " + g.detail
	case g.counted && g.reason == ReasonNodeAffinity:
		return "not counted (nodeAffinityPolicy: Honor), outside the pod's node affinity or nodeSelector"
	case g.counted && g.reason == ReasonUntoleratedTaint:
		return "not counted (nodeTaintsPolicy: Honor), " + ev.taintWhy(g.detail)
	case g.reason == ReasonUnschedulable:
		return "cordoned (spec.unschedulable)"
	case g.reason == ReasonUntoleratedTaint:
		return ev.taintWhy(g.detail)
	}
	return "outside the pod's node affinity or nodeSelector"
}
