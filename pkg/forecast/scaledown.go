package forecast

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// A scale-down is forecast from the pods its controller deletes: a
// StatefulSet's by ordinal, the highest first, which no annotation
// changes; a ReplicaSet's (a Deployment's, a ReplicationController's) in
// the order of Workload.Order over Workload.Pods. The index says where each
// is counted (spread.Index.LayoutDeparting); taken off the counts, they
// leave the skew the scale-down leaves. The state when the last pod is gone
// is what is judged: a StatefulSet deletes one pod at a time, and a skew on
// the way that the end undoes schedules no pod in between.

// Departure is a pod a scale-down deletes.
type Departure struct {
	Pod string `json:"pod"`
	// Node is where the index counts the pod: "" when it does not (not
	// scheduled, terminating, finished, or no such pod).
	Node string `json:"node,omitempty"`
	// Domains are the pod's domains, in the order of
	// Forecast.Constraints: "" where that constraint does not count it.
	Domains []string `json:"domains"`
}

// Skew is a hard constraint that a scale-down leaves with a skew (the
// largest count less the global minimum) above its maxSkew and no lower
// than before.
type Skew struct {
	// Constraint is its position in Forecast.Constraints.
	Constraint int `json:"constraint"`
	Before     int `json:"before"`
	After      int `json:"after"`
	GlobalMin  int `json:"globalMin"`
	// Fullest and Emptiest are a domain with the largest count and one at
	// the global minimum, after: the first by name.
	Fullest  string `json:"fullest"`
	Emptiest string `json:"emptiest"`
	// Domains are the constraint's counts after.
	Domains map[string]int `json:"domains"`
	// Within is the fewest replicas, above the replicas asked for, that
	// the same order leaves with no hard constraint skewed so; 0 when
	// none.
	Within int32 `json:"within,omitempty"`
}

// departing returns the names of the pods w's controller deletes to scale
// from its pods to w.Replicas, the first deleted first, and the order it
// deletes them in; none when the pods are not known. It holds, for every
// kind, which pods a scale-down takes.
func (w *Workload) departing() ([]string, string) {
	switch w.Kind {
	case workload.StatefulSet.GVK.Kind:
		// The pods out of [start, start+replicas), highest ordinal
		// first (processCondemned in
		// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/statefulset/stateful_set_control.go),
		// named <name>-<ordinal>: the index finds them by name, and
		// leaves out an ordinal without a pod.
		top := w.ordinalStart + w.Existing
		for _, p := range w.Pods {
			if o, err := strconv.ParseInt(p.Labels[appsv1.PodIndexLabel], 10, 32); err == nil {
				top = max(top, int32(o)+1)
			}
		}
		// One string holds every name, built at its size, so that a
		// scale-down of thousands of ordinals allocates twice, not once
		// per pod nor once per doubling.
		low := w.ordinalStart + w.Replicas
		if top <= low {
			return nil, OrdinalOrder
		}
		size := 0
		for o := top - 1; o >= low; o-- {
			size += len(w.Name) + 1 + digits(o)
		}
		var b strings.Builder
		b.Grow(size)
		for o := top - 1; o >= low; o-- {
			b.WriteString(w.Name)
			b.WriteByte('-')
			var num [11]byte
			b.Write(strconv.AppendInt(num[:0], int64(o), 10))
		}
		all, names, from := b.String(), newNames(int(top - low))[:top-low], 0
		for k := range names {
			end := from + len(w.Name) + 1 + digits(top-1-int32(k))
			names[k], from = all[from:end], end
		}
		return names, OrdinalOrder
	}
	if len(w.Pods) <= int(w.Replicas) {
		return nil, ""
	}
	order := w.Order
	if order == nil {
		order = ControllerRanking{Now: time.Now()}
	}
	ranked := slices.Clone(w.Pods)
	related := w.Related
	if related == nil {
		related = w.Pods
	}
	order.Rank(ranked, related)
	names := newNames(len(ranked) - int(w.Replicas))
	for _, p := range ranked[:len(ranked)-int(w.Replicas)] {
		names = append(names, p.Name)
	}
	if _, ok := order.(KeeperRanking); ok {
		// The costs are the keeper's, whatever the pods carry now.
		return names, order.String()
	}
	// Whether a keeper of pod-deletion-cost is at work shows on the pods.
	costed := 0
	for _, p := range w.Pods {
		if _, ok := p.Annotations[v1.PodDeletionCost]; ok {
			costed++
		}
	}
	if costed == 0 {
		return names, order.String() + "; no pod carries a pod-deletion-cost"
	}
	return names, fmt.Sprintf("%s; %d of %d pods carry a pod-deletion-cost", order, costed, len(w.Pods))
}

// nameSlices keeps the slices of departing names that Run is done with:
// a thousand names are a 16 kB slice per forecast otherwise.
var nameSlices = sync.Pool{New: func() any { return new([]string) }}

// newNames returns an empty slice of room for n names, to give back with
// releaseNames.
func newNames(n int) []string {
	s := nameSlices.Get().(*[]string)
	return slices.Grow((*s)[:0], n)
}

// releaseNames gives names back; neither it nor a slice of it may be used
// after, the strings may.
func releaseNames(names []string) {
	if cap(names) == 0 {
		return
	}
	clear(names)
	names = names[:0]
	nameSlices.Put(&names)
}

// digits is the length of o in decimal.
func digits(o int32) int {
	n := 1
	for ; o <= -10 || o >= 10; o /= 10 {
		n++
	}
	if o < 0 {
		n++
	}
	return n
}

// scaleDown takes the departing pods, counted where d says, off the counts
// of p and records the first hard constraint they leave skewed: above its
// maxSkew, and no lower than before, with fewer pods than before in some
// domain. A scale-down that lowers a skew already above maxSkew is not one
// to warn about. The departures are recorded unless warningOnly, and then
// only when they leave a constraint skewed.
func (f *Forecast) scaleDown(p *placement, d *spread.Departures, warningOnly bool) {
	n := len(p.constraints)
	before, touched := make([]int, n), make([]bool, n)
	for i, c := range p.constraints {
		before[i] = c.skew()
	}
	// The pods of the workload before the first departure: the ordinals
	// of a StatefulSet's range, a ReplicaSet's pods scheduled or not.
	total := f.To + int32(len(d.Names))
	skewed, within := -1, int32(0)
	for k := range d.Names {
		for i, at := range d.DomainsOf(k) {
			if at >= 0 {
				c := p.constraints[i]
				c.set(at, c.counts[at]-1)
				touched[i] = true
			}
		}
		skewed = -1
		for i, c := range p.constraints {
			if s := c.skew(); touched[i] && s > int(c.maxSkew) && s >= before[i] {
				skewed = i
				break
			}
		}
		if skewed < 0 && k < len(d.Names)-1 {
			within = total - int32(k+1)
		}
	}
	if !warningOnly || skewed >= 0 {
		f.Departures = make([]Departure, len(d.Names))
		domains := make([]string, len(d.Names)*n)
		for k, name := range d.Names {
			dep := Departure{Pod: name, Node: d.Nodes[k], Domains: domains[k*n : (k+1)*n : (k+1)*n]}
			for i, at := range d.DomainsOf(k) {
				if at >= 0 {
					dep.Domains[i] = p.constraints[i].names[at]
				}
			}
			f.Departures[k] = dep
		}
	}
	if skewed < 0 {
		return
	}
	c := p.constraints[skewed]
	s := &Skew{Constraint: skewed, Before: before[skewed], After: c.skew(), GlobalMin: c.globalMin(), Domains: c.domains(), Within: within}
	for i, name := range c.names {
		if c.counts[i] == c.largest && (s.Fullest == "" || name < s.Fullest) {
			s.Fullest = name
		}
		if c.counts[i] == c.smallest && (s.Emptiest == "" || name < s.Emptiest) {
			s.Emptiest = name
		}
	}
	f.Skewed = s
}

// scaleDownWarning is Warning for a scale-down that leaves f.Skewed.
//
//	spreadguard: scaling StatefulSet shop/db from 6 to 4 deletes db-5 and db-4, leaving zone zone-c with 0 matching pods and zone zone-a with 2: skew 2 above maxSkew 1 (scale to 5 instead); zone: zone-a=2 zone-b=2 zone-c=0 (policy shop/zones)
func (f *Forecast) scaleDownWarning() string {
	s := f.Skewed
	c := f.Constraints[s.Constraint]
	start := fmt.Sprintf("spreadguard: scaling %s from %d to %d deletes ", f.Workload, f.From, f.To)
	leaves := fmt.Sprintf(", leaving %s with %d matching pods and %s with %d: skew %d above maxSkew %d",
		f.Detail.DomainName(c.TopologyKey, s.Emptiest), s.Domains[s.Emptiest],
		f.Detail.DomainName(c.TopologyKey, s.Fullest), s.Domains[s.Fullest], s.After, c.MaxSkew)
	if s.Within > 0 {
		leaves += fmt.Sprintf(" (scale to %d instead)", s.Within)
	}
	leaves += "; "
	tail := ""
	if f.Policy != "" {
		tail = " (policy " + f.Policy + ")"
	}
	pods := make([]string, len(f.Departures))
	for i, d := range f.Departures {
		pods[i] = d.Pod
	}
	named := f.Detail.NamesDomainsOf(c.TopologyKey)
	counts := func(budget int) string {
		if !named {
			return shortKey(c.TopologyKey) + ": " + spread.NodesPerCount(s.Domains, len(s.Domains))
		}
		return domainList(shortKey(c.TopologyKey), s.Domains, budget)
	}
	// The pods take what the rest leaves, less room for the counts of a
	// few domains.
	reserve := min(len(counts(MaxWarning)), minCounts)
	head := start + series(pods, MaxWarning-len(start)-len(leaves)-len(tail)-reserve) + leaves
	return clip(head + counts(MaxWarning-len(head)-len(tail)) + tail)
}

// minCounts is the most room a scale-down's warning keeps for its counts.
const minCounts = 48

// series is "a, b and c" in at most budget bytes, "a, b and 4 more" when
// not all fit; the first item is always there.
func series(items []string, budget int) string {
	out := ""
	for i, item := range items {
		rest := len(items) - i - 1
		switch {
		case i == 0:
			out = item
		case rest == 0 && (len(out)+len(" and ")+len(item) <= budget || len(item) <= len("1 more")):
			return out + " and " + item
		case rest > 0 && len(out)+len(", ")+len(item)+len(fmt.Sprintf(" and %d more", rest)) <= budget:
			out += ", " + item
		default:
			return out + fmt.Sprintf(" and %d more", len(items)-i)
		}
	}
	return out
}

// clip cuts w to MaxWarning bytes.
func clip(w string) string {
	if len(w) > MaxWarning {
		return w[:MaxWarning-len("...")] + "..."
	}
	return w
}
