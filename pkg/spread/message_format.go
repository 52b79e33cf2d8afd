package spread

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The pieces a message is made of: domain counts, domain and node names,
// lists cut short. They name what ev.detail lets them (message_detail.go).

// formatDomains lists domain=count for the counted domains of constraint
// i sorted by domain, or, when there are many, the fullest ones and a
// summary of the rest; when the detail does not name its domains (nodes),
// how many nodes hold each count.
func (ev *evaluation) formatDomains(i int) string {
	nonZero := make(map[string]int, len(ev.domains[i]))
	for d, n := range ev.domains[i] {
		if n > 0 {
			nonZero[d] = n
		}
	}
	// Counted domains without a matching pod are known by their number
	// and a few names: at hostname level they can be every node.
	zeros := ev.facts.zeros(i)
	if !ev.detail.NamesDomainsOf(ev.constraints[i].topologyKey) {
		return NodesPerCount(nonZero, len(nonZero)+zeros.n)
	}
	total := len(nonZero) + zeros.n
	if total == 0 {
		return "no domain"
	}
	names := slices.Collect(maps.Keys(nonZero))
	if total <= maxListedDomains {
		names = append(names, zeros.first...)
		slices.Sort(names)
		parts := make([]string, len(names))
		for k, d := range names {
			parts[k] = fmt.Sprintf("%s=%d", d, nonZero[d])
		}
		return strings.Join(parts, ", ")
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(nonZero[b], nonZero[a]), cmp.Compare(a, b)) })
	// The zeros come last, by name.
	names = append(names, zeros.first...)
	shown := maxListedDomains - 2
	parts := make([]string, 0, shown+1)
	for _, d := range names[:shown] {
		parts = append(parts, fmt.Sprintf("%s=%d", d, nonZero[d]))
	}
	lo, hi := nonZero[names[len(names)-1]], nonZero[names[shown]]
	if zeros.n > 0 {
		lo = 0
	}
	rest := fmt.Sprintf("and %d more domains with %d", total-shown, lo)
	if hi != lo {
		rest = fmt.Sprintf("and %d more domains with %d to %d", total-shown, lo, hi)
	}
	return strings.Join(append(parts, rest), ", ")
}

// domainName names a domain of key in a sentence (MessageDetail.DomainName).
func (ev *evaluation) domainName(key, value string) string {
	return ev.detail.DomainName(key, value)
}

// nodeList is "node a", "2 nodes (a, b)" or "12 nodes (a, b, c, ...)";
// when the detail names no node, "1 node" or "12 nodes".
func (ev *evaluation) nodeList(nodes nameSample) string {
	switch {
	case !ev.detail.NamesNodes():
		return plural(nodes.n, "node")
	case nodes.n == 1:
		return "node " + nodes.first[0]
	}
	return fmt.Sprintf("%d nodes (%s)", nodes.n, nodes.list(3))
}

// taintWhy names an untolerated taint, or, when the detail names no node,
// only that there is one: a taint's key and value can name another tenant.
func (ev *evaluation) taintWhy(taint string) string {
	if !ev.detail.NamesNodes() {
		return "a taint the pod does not tolerate"
	}
	return "untolerated taint " + taint
}

// shortList joins the first 5 of n items, the ones given, and ends with
// ", ..." when there are more.
func shortList(items []string, n int) string {
	const limit = 5
	return nameSample{n: n, first: items}.list(limit)
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
