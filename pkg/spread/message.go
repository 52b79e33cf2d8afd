package spread

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The message of an unsatisfiable pod. It is built from a detailed
// evaluation, so it reads the same from both checkers.

const (
	maxListedDomains = 10
	maxListedGroups  = 4
)

// unsatisfiableMessage explains why no candidate node passes the hard
// constraints, naming the constraint to look at, its numbers, the nodes
// that are left out and why, and one remedy.
func (ev *evaluation) unsatisfiableMessage() string {
	var candidates, keyed []*nodeReport
	for i := range ev.nodes {
		r := &ev.nodes[i]
		if reason, _ := r.filterReason(); reason != "" {
			continue
		}
		candidates = append(candidates, r)
		if r.missingKey == "" {
			keyed = append(keyed, r)
		}
	}
	if len(keyed) == 0 {
		return ev.missingKeyMessage(candidates)
	}
	rejects := make([][]*nodeReport, len(ev.constraints))
	for i := range ev.constraints {
		for _, r := range keyed {
			if _, _, skew := ev.skewOf(i, r); skew > int(ev.constraints[i].maxSkew) {
				rejects[i] = append(rejects[i], r)
			}
		}
	}
	for i := range ev.constraints {
		if len(rejects[i]) == len(keyed) {
			return ev.skewMessage(i, keyed)
		}
	}
	return ev.conflictMessage(keyed, rejects)
}

func (ev *evaluation) describe(i int) string {
	c := &ev.constraints[i]
	return fmt.Sprintf("spec.topologySpreadConstraints[%d] (topologyKey %s, maxSkew %d)", c.index, c.topologyKey, c.maxSkew)
}

func (ev *evaluation) missingKeyMessage(candidates []*nodeReport) string {
	for i := range ev.constraints {
		key := ev.constraints[i].topologyKey
		var lacking []string
		for _, r := range candidates {
			if _, ok := r.labels[key]; !ok {
				lacking = append(lacking, r.name)
			}
		}
		if len(lacking) == 0 {
			continue
		}
		return fmt.Sprintf("%s cannot be satisfied: none of the %s that pass the pod's node affinity, nodeSelector and taints carries every topology key of its hard constraints; %s %s the label %s. Remedy: label the nodes the pod may use with %s, or remove the constraint.",
			ev.describe(i), plural(len(candidates), "node"), ev.nodeList(lacking), verb(len(lacking), "lacks", "lack"), key, key)
	}
	// Unreachable: a candidate without a missing key would be keyed.
	return "The pod's hard topology spread constraints cannot be satisfied on any node."
}

func (ev *evaluation) skewMessage(i int, keyed []*nodeReport) string {
	c := &ev.constraints[i]
	var b strings.Builder
	fmt.Fprintf(&b, "%s cannot be satisfied on any node. ", ev.describe(i))
	ev.writeCounts(&b, i)
	fmt.Fprintf(&b, " Every node the pod can use is in a domain where the skew would exceed %d: %s.", c.maxSkew, ev.skewList(i, keyed))
	if s := ev.exclusionSummary(i); s != "" {
		fmt.Fprintf(&b, " %s.", s)
	}
	fmt.Fprintf(&b, " Remedy: %s.", ev.skewRemedy(i, keyed))
	return b.String()
}

func (ev *evaluation) conflictMessage(keyed []*nodeReport, rejects [][]*nodeReport) string {
	first := slices.IndexFunc(rejects, func(r []*nodeReport) bool { return len(r) > 0 })
	rejected := map[*nodeReport]bool{}
	for _, r := range rejects[first] {
		rejected[r] = true
	}
	var allowed []*nodeReport
	for _, r := range keyed {
		if !rejected[r] {
			allowed = append(allowed, r)
		}
	}
	// The constraint that rejects the most of what the first one allows.
	second, most := -1, -1
	for j := range ev.constraints {
		if j == first {
			continue
		}
		n := 0
		for _, r := range allowed {
			if _, _, skew := ev.skewOf(j, r); skew > int(ev.constraints[j].maxSkew) {
				n++
			}
		}
		if n > most {
			second, most = j, n
		}
	}
	names := make([]string, 0, len(allowed))
	for _, r := range allowed {
		names = append(names, r.name)
	}
	var b strings.Builder
	allows := fmt.Sprintf("the %s the first allows (%s)", plural(len(allowed), "node"), shortList(names, 3))
	if ev.domainsOnly {
		allows = fmt.Sprintf("the %s the first allows", plural(len(allowed), "node"))
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
		ev.constraints[second].index, ev.neededSkew(second, allowed))
	return b.String()
}

// writeCounts writes the domain counts and the global minimum of
// constraint i.
func (ev *evaluation) writeCounts(b *strings.Builder, i int) {
	c := &ev.constraints[i]
	if c.countsPods() {
		fmt.Fprintf(b, "Matching pods (selector %q) per %s: %s.", c.selector.String(), c.topologyKey, ev.formatDomains(c.topologyKey, ev.domains[i]))
	} else {
		fmt.Fprintf(b, "Its selector is empty, which counts no pods (as the scheduler does); domains of %s: %s.", c.topologyKey, ev.formatDomains(c.topologyKey, ev.domains[i]))
	}
	fmt.Fprintf(b, " The global minimum of spec.topologySpreadConstraints[%d] is %d: %s.", c.index, ev.globalMin[i], ev.minimumReason(i))
}

func (ev *evaluation) minimumReason(i int) string {
	c := &ev.constraints[i]
	if ev.domainCount[i] < int(c.minDomains) {
		return fmt.Sprintf("fewer domains (%d) than minDomains (%d)", ev.domainCount[i], c.minDomains)
	}
	lowest := ev.lowestDomains(i)
	if len(lowest) == 1 {
		return fmt.Sprintf("%s has the fewest matching pods", ev.domainName(c.topologyKey, lowest[0]))
	}
	if ev.domainsOnly && c.topologyKey == v1.LabelHostname {
		return fmt.Sprintf("%d nodes have the fewest matching pods", len(lowest))
	}
	return fmt.Sprintf("%d domains have the fewest matching pods (%s)", len(lowest), shortList(lowest, 3))
}

// lowestDomains are the domains holding the global minimum, sorted.
func (ev *evaluation) lowestDomains(i int) []string {
	var out []string
	for d, n := range ev.domains[i] {
		if n == ev.globalMin[i] {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// skewList names the domains of the usable nodes with their arithmetic.
func (ev *evaluation) skewList(i int, keyed []*nodeReport) string {
	c := &ev.constraints[i]
	seen := map[string]bool{}
	var parts []string
	for _, r := range keyed {
		domain, count, skew := ev.skewOf(i, r)
		if seen[domain] {
			continue
		}
		seen[domain] = true
		parts = append(parts, fmt.Sprintf("%s (%d + %d - %d = %d)", ev.domainName(c.topologyKey, domain), count, c.selfMatch, ev.globalMin[i], skew))
	}
	slices.Sort(parts)
	return shortList(parts, 5)
}

// neededSkew is the smallest maxSkew that would let constraint i accept
// one of nodes.
func (ev *evaluation) neededSkew(i int, nodes []*nodeReport) int {
	needed := -1
	for _, r := range nodes {
		if _, _, skew := ev.skewOf(i, r); needed < 0 || skew < needed {
			needed = skew
		}
	}
	return needed
}

func (ev *evaluation) skewRemedy(i int, keyed []*nodeReport) string {
	c := &ev.constraints[i]
	if missing := int(c.minDomains) - ev.domainCount[i]; missing > 0 {
		return fmt.Sprintf("add nodes the pod can use in %s, labelled %s, or lower minDomains to %d",
			plural(missing, "more domain"), c.topologyKey, max(ev.domainCount[i], 1))
	}
	// A lowest domain with a usable node would accept the pod, so every
	// lowest domain holds only nodes the pod cannot use: they pin the
	// minimum.
	pinned := ev.lowestDomains(i)[0]
	where := ev.domainName(c.topologyKey, pinned)
	allTainted, allOutside, anyCordoned := true, true, false
	for j := range ev.nodes {
		r := &ev.nodes[j]
		if reason, _ := ev.countingExclusion(i, r); reason != "" || r.labels[c.topologyKey] != pinned {
			continue
		}
		allTainted = allTainted && r.taint != nil
		allOutside = allOutside && !r.affinity
		anyCordoned = anyCordoned || r.cordoned
	}
	switch {
	case allTainted && c.nodeTaintsPolicy == v1.NodeInclusionPolicyIgnore:
		return fmt.Sprintf("set nodeTaintsPolicy: Honor so tainted and cordoned nodes do not pin the global minimum at %d, or add capacity the pod can use in %s", ev.globalMin[i], where)
	case allOutside && c.nodeAffinityPolicy == v1.NodeInclusionPolicyIgnore:
		return fmt.Sprintf("set nodeAffinityPolicy: Honor so nodes outside the pod's node affinity do not pin the global minimum at %d, or let the pod run in %s", ev.globalMin[i], where)
	case anyCordoned:
		return fmt.Sprintf("uncordon the nodes in %s (kubectl uncordon) or add schedulable nodes there", where)
	}
	return fmt.Sprintf("add capacity the pod can use in %s, or raise maxSkew to %d", where, ev.neededSkew(i, keyed))
}

// exclusionSummary summarises, for constraint i, the counted nodes the pod
// cannot use and the nodes left out of counting, grouped by domain and
// reason.
func (ev *evaluation) exclusionSummary(i int) string {
	c := &ev.constraints[i]
	type group struct {
		domain, why string
		nodes       []string
	}
	groups := map[[2]string]*group{}
	for j := range ev.nodes {
		r := &ev.nodes[j]
		var why string
		switch reason, detail := ev.countingExclusion(i, r); reason {
		case ReasonMissingTopologyKey:
			why = "not counted, missing the label " + detail
		case ReasonNodeAffinity:
			why = "not counted (nodeAffinityPolicy: Honor), outside the pod's node affinity or nodeSelector"
		case ReasonUntoleratedTaint:
			why = "not counted (nodeTaintsPolicy: Honor), " + ev.taintWhy(r.taint.ToString())
		default:
			switch reason, detail := r.filterReason(); reason {
			case ReasonUnschedulable:
				why = "cordoned (spec.unschedulable)"
			case ReasonUntoleratedTaint:
				why = ev.taintWhy(detail)
			case ReasonNodeAffinity:
				why = "outside the pod's node affinity or nodeSelector"
			}
		}
		if why == "" {
			continue
		}
		domain, ok := r.labels[c.topologyKey]
		if !ok || c.topologyKey == v1.LabelHostname {
			domain = ""
		}
		k := [2]string{domain, why}
		if groups[k] == nil {
			groups[k] = &group{domain: domain, why: why}
		}
		groups[k].nodes = append(groups[k].nodes, r.name)
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		list = append(list, g)
	}
	slices.SortFunc(list, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.domain, b.domain), cmp.Compare(a.why, b.why))
	})
	var parts []string
	rest := 0
	for n, g := range list {
		if n >= maxListedGroups {
			rest += len(g.nodes)
			continue
		}
		where := ""
		if g.domain != "" {
			where = " in " + ev.domainName(c.topologyKey, g.domain)
		}
		parts = append(parts, fmt.Sprintf("%s%s %s excluded: %s", ev.nodeList(g.nodes), where, verb(len(g.nodes), "is", "are"), g.why))
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("%s more %s excluded for other reasons", plural(rest, "node"), verb(rest, "is", "are")))
	}
	return strings.Join(parts, "; ")
}

// formatDomains lists domain=count for the domains of key; with
// domainsOnly, a hostname constraint's domains (nodes) as how many nodes
// hold each count.
func (ev *evaluation) formatDomains(key string, m map[string]int) string {
	if !ev.domainsOnly || key != v1.LabelHostname {
		return formatDomains(m)
	}
	nodesWith := map[int]int{}
	for _, n := range m {
		nodesWith[n]++
	}
	counts := slices.Sorted(maps.Keys(nodesWith))
	slices.Reverse(counts)
	parts := make([]string, 0, len(counts))
	for _, n := range counts {
		parts = append(parts, fmt.Sprintf("%s with %d", plural(nodesWith[n], "node"), n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// formatDomains lists domain=count sorted by domain, or, when there are
// many, the fullest ones and a summary of the rest.
func formatDomains(m map[string]int) string {
	if len(m) == 0 {
		return "no domain"
	}
	names := make([]string, 0, len(m))
	for d := range m {
		names = append(names, d)
	}
	if len(names) <= maxListedDomains {
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, d := range names {
			parts[i] = fmt.Sprintf("%s=%d", d, m[d])
		}
		return strings.Join(parts, ", ")
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	shown := maxListedDomains - 2
	parts := make([]string, 0, shown+1)
	for _, d := range names[:shown] {
		parts = append(parts, fmt.Sprintf("%s=%d", d, m[d]))
	}
	lo, hi := m[names[len(names)-1]], m[names[shown]]
	rest := fmt.Sprintf("and %d more domains with %d", len(names)-shown, lo)
	if hi != lo {
		rest = fmt.Sprintf("and %d more domains with %d to %d", len(names)-shown, lo, hi)
	}
	return strings.Join(append(parts, rest), ", ")
}

func (ev *evaluation) domainName(key, value string) string {
	if ev.domainsOnly && key == v1.LabelHostname {
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

// nodeList is "node a", "2 nodes (a, b)" or "12 nodes (a, b, c, ...)";
// with domainsOnly, "1 node" or "12 nodes".
func (ev *evaluation) nodeList(names []string) string {
	switch {
	case ev.domainsOnly:
		return plural(len(names), "node")
	case len(names) == 1:
		return "node " + names[0]
	}
	return fmt.Sprintf("%d nodes (%s)", len(names), shortList(names, 3))
}

// taintWhy names an untolerated taint, or with domainsOnly only that there
// is one: a taint's key and value can name another tenant.
func (ev *evaluation) taintWhy(taint string) string {
	if ev.domainsOnly {
		return "a taint the pod does not tolerate"
	}
	return "untolerated taint " + taint
}

func shortList(items []string, limit int) string {
	if len(items) <= limit {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:limit], ", ") + ", ..."
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
