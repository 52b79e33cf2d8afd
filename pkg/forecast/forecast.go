// Package forecast answers, before a workload's pods exist, whether its
// controller's pods will all be admitted and placed: it builds the pod the
// controller creates, runs the pod webhook's mutation and check on it, then
// places the replicas one at a time where the spread is best, the counts
// updated after each, and reports the first replica that no node (nor node
// template) can take.
//
// The package is pure: lookups come in through engine.Sources and counts
// through a Cluster (the webhook's spread.Index), which a forecast only
// reads.
package forecast

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Cluster is what a forecast reads of the cluster: the layout of the nodes
// and templates the replicas can take, which carries the pod webhook's
// check, and where the pods a scale-down deletes are counted.
// *spread.Index implements it.
type Cluster interface {
	LayoutDeparting(pod *v1.Pod, detail spread.MessageDetail, departing []string) (*spread.Layout, error)
}

// layoutCheck answers the check engine.Validate makes with a layout, which
// the placement then starts from: one pass over the index, not a check and
// then a layout.
type layoutCheck struct {
	c         Cluster
	departing []string
	layout    *spread.Layout
}

func (lc *layoutCheck) Check(pod *v1.Pod, opts spread.Options) (*spread.Result, error) {
	l, err := lc.c.LayoutDeparting(pod, opts.Detail, lc.departing)
	if err != nil {
		return nil, err
	}
	lc.release()
	lc.layout = l
	return l.Result, nil
}

// release gives the layout back once nothing the forecast keeps reads it.
func (lc *layoutCheck) release() {
	if lc.layout != nil {
		lc.layout.Release()
		lc.layout = nil
	}
}

var _ spread.Checker = (*layoutCheck)(nil)

var _ Cluster = (*spread.Index)(nil)

// Forecast is the outcome of Run.
type Forecast struct {
	// Workload names the workload, as "Deployment shop/web".
	Workload string `json:"workload"`
	// From and To bound the replicas placed: From+1 to To, by number.
	From int32 `json:"from"`
	To   int32 `json:"to"`
	// Pod is the pod the controller creates, as it would be stored
	// (mutated).
	Pod *v1.Pod `json:"pod,omitempty"`
	// Policy is the policy that applies to the pod (ns/name), if any.
	Policy string `json:"policy,omitempty"`
	// Action is what the pod webhook does about a replica no node takes.
	Action v1alpha1.ValidationAction `json:"action,omitempty"`
	// Skipped says why no replica was placed: the pod path does not check
	// the pod, or its hard constraints cannot be the reason it stays
	// Pending.
	Skipped string `json:"skipped,omitempty"`
	// Constraints are the pod's hard constraints with their counts before
	// the first placement.
	Constraints []Counts `json:"constraints,omitempty"`
	// Placements are the replicas placed, in order.
	Placements []Placement `json:"placements,omitempty"`
	// Refused is the first replica that cannot be placed, nil when all
	// are.
	Refused *Refusal `json:"refused,omitempty"`
	// Truncated is set when more than MaxPlacements replicas were asked
	// for: only the first MaxPlacements were placed.
	Truncated bool `json:"truncated,omitempty"`
	// Order says in which order a scale-down deletes the pods: the
	// order that Departures assume.
	Order string `json:"order,omitempty"`
	// Departures are the pods a scale-down deletes, the first deleted
	// first.
	Departures []Departure `json:"departures,omitempty"`
	// Skewed is the first hard constraint the scale-down leaves with a
	// skew above its maxSkew and no lower than before, nil when none.
	Skewed *Skew `json:"skewed,omitempty"`
	// Detail is what Refused.Reason and Warning may name: the
	// MessageDetail of the configuration Run was given.
	Detail spread.MessageDetail `json:"-"`
}

// MaxPlacements bounds the replicas one forecast places, so that a
// workload of a million replicas costs an admission request what one of
// 10,000 does; past it the forecast says nothing of the rest.
const MaxPlacements = 10000

// Counts is one hard constraint and its matching pods per domain.
type Counts struct {
	TopologyKey string `json:"topologyKey"`
	MaxSkew     int32  `json:"maxSkew"`
	MinDomains  int32  `json:"minDomains"`
	// SelfMatch is 1 when the workload's pods match the constraint's
	// selector: only then does a placed replica add to its counts.
	SelfMatch int            `json:"selfMatch"`
	Domains   map[string]int `json:"domains"`
}

// Placement is where one replica goes.
type Placement struct {
	Replica int32  `json:"replica"`
	Node    string `json:"node"`
	// Template names the node template whose new node Node is.
	Template string `json:"template,omitempty"`
	// NewNode is set on the replica that no existing node takes and that
	// makes an autoscaler add Node: the pod path admits it with a warning.
	NewNode bool `json:"newNode,omitempty"`
	// Domains are the node's values of the constraints' topology keys, in
	// the order of Forecast.Constraints.
	Domains []string `json:"domains"`
}

// Refusal is the first replica that no node nor template can take.
type Refusal struct {
	Replica int32 `json:"replica"`
	// Reason says why, in a phrase with the domain: "zone-c has no
	// schedulable node".
	Reason string `json:"reason"`
	// Constraint is the position in Forecast.Constraints of the
	// constraint that refuses the replica.
	Constraint int `json:"constraint"`
	// Domains are that constraint's counts when the replica is refused.
	Domains   map[string]int `json:"domains"`
	GlobalMin int            `json:"globalMin"`
}

// NoHardConstraints is why nothing is forecast for a pod without a hard
// constraint that was not mutated for a reason of its own.
const NoHardConstraints = "the pod has no hard topology spread constraint"

// Run forecasts the placement of w's replicas Existing+1 to Replicas on c:
// the pod is mutated and checked as the pod webhook would (same Sources,
// same Config), then each replica goes to a feasible node of a least-loaded
// domain. A replica placed is a pod bound to its node in a scratch copy of
// the counts of the pod's constraints (see placement); c is never changed.
// Below Existing, it forecasts the scale-down instead: the pods the
// controller deletes (see Workload.departing) are taken off the counts.
func Run(w *Workload, src engine.Sources, c Cluster, cfg engine.Config, opts ...Option) (*Forecast, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	f := &Forecast{Workload: w.String(), From: w.Existing, To: w.Replicas, Detail: cfg.MessageDetail}
	var departing []string
	if w.Replicas < w.Existing {
		departing, f.Order = w.departing()
		// The layout copies the names; what the forecast keeps are the
		// strings.
		defer releaseNames(departing)
	}
	if w.Replicas <= w.Existing && len(departing) == 0 {
		return f, nil
	}
	src = withOwner(src, w.owner)
	m, err := engine.Mutate(w.Pod, src, cfg)
	if err != nil {
		return nil, fmt.Errorf("mutating the pod of %s: %w", w, err)
	}
	f.Pod = w.Pod
	if m.Pod != nil {
		f.Pod = m.Pod
	}
	lc := &layoutCheck{c: c, departing: departing}
	defer lc.release()
	v, err := engine.Validate(f.Pod, src, lc, cfg, false)
	if err != nil {
		return nil, fmt.Errorf("checking the pod of %s: %w", w, err)
	}
	switch {
	case v.Skipped != engine.NotSkipped:
		f.Skipped = v.Skipped.String()
		return f, nil
	case v.Result.Verdict == spread.VerdictNoHardConstraints:
		// Say why nothing was injected when that is the reason.
		f.Skipped = cmp.Or(m.Skipped.String(), NoHardConstraints)
		return f, nil
	case v.Result.Verdict == spread.VerdictNoCandidateNodes:
		// The pod path's warning: with the zones no node will come up in,
		// when that is why.
		f.Skipped = v.Warnings[0]
		return f, nil
	}
	applied := v.Policy
	if applied == nil {
		if applied, err = policy.Resolve(f.Pod, src); err != nil {
			return nil, fmt.Errorf("resolving the policy of the pod of %s: %w", w, err)
		}
	}
	f.Action = cfg.DefaultAction
	if applied != nil {
		f.Policy = applied.Name
		if applied.Action != "" {
			f.Action = applied.Action
		}
	}
	if f.Action == "" {
		f.Action = v1alpha1.ActionDeny
	}
	p := newPlacement(lc.layout)
	defer p.release()
	f.Constraints = p.initialCounts(!o.warningOnly)
	if len(departing) > 0 {
		f.scaleDown(p, &lc.layout.Departing, o.warningOnly)
		return f, nil
	}
	last := w.Replicas
	if last-w.Existing > MaxPlacements {
		last, f.Truncated = w.Existing+MaxPlacements, true
	}
	var domains []string
	if !o.warningOnly {
		f.Placements = make([]Placement, 0, last-w.Existing)
		domains = make([]string, 0, int(last-w.Existing)*len(p.constraints))
	}
	for r := w.Existing + 1; r <= last; r++ {
		slot, added, ok := p.place()
		if !ok {
			f.Refused = p.refusal(r, f.Detail)
			break
		}
		if o.warningOnly {
			continue
		}
		from := len(domains)
		for i, c := range p.constraints {
			domains = append(domains, c.names[p.slot(slot)[i]])
		}
		f.Placements = append(f.Placements, Placement{Replica: r, Node: p.slots[slot], Template: p.added[slot], NewNode: added,
			Domains: domains[from:len(domains):len(domains)]})
	}
	return f, nil
}

// Option tunes Run.
type Option func(*options)

type options struct{ warningOnly bool }

// WarningOnly makes Run keep only what Warning reads: no Placements, no
// Counts.Domains, and a scale-down's Departures only when it warns. Those
// are a placement per replica and a count per counted domain (one per node
// for a hostname constraint): the webhook, which only warns, would
// otherwise allocate them on every forecast for the collector to sweep.
func WarningOnly() Option { return func(o *options) { o.warningOnly = true } }

// placement is the scratch state of a forecast: a copy of the counts of
// the pod's hard constraints, per domain, and the nodes that pass the pod's
// filters grouped by their domains. It is a cheap copy rather than an
// overlay of the index: every replica is the same pod, so a placed replica
// changes only its node's domain counts (by SelfMatch), and a node's
// feasibility depends on nothing else. The node set is fixed by the first
// check: a placed pod changes no label, taint or affinity.
//
// CAVEAT: replicas differ only in labels no selector derived by
// DefaultSelector reads (a StatefulSet's pod-name and pod-index), so one
// SelfMatch per constraint holds for all of them.
type placement struct {
	constraints []*constraintState
	// slots are the candidate nodes grouped by their tuple of domains, in
	// the order of spread.Layout.Nodes, then the new nodes of templates:
	// nodes of one slot are interchangeable for the spread.
	slots []string
	// domains are the slots' domains, len(constraints) per slot (see
	// slot), as positions in the constraints' names and counts.
	domains []int32
	// added names the template of each slot a new node made.
	added     map[int]string
	templates []spread.Template
	layout    *spread.Layout
	// next is where the search for the next replica's slot starts: the one
	// after the last chosen, so that replicas of equal load take turns.
	next int
	// newNodes counts the nodes added from templates, to name them.
	newNodes int
	// states holds the constraints' states of earlier forecasts, whose
	// slices the next reuses.
	states []*constraintState
	// scan is how many slots place looks at before it asks index.
	scan  int
	index slotIndex
}

// placements keeps the scratch of finished forecasts: a forecast of a
// hostname constraint at thousands of nodes copies thousands of counts.
var placements = sync.Pool{New: func() any { return new(placement) }}

// constraintState is one constraint's counts, by domain index, so that
// a placement costs no string hashing.
type constraintState struct {
	key                 string
	maxSkew, minDomains int32
	selfMatch           int
	// names are the layout's, clipped: a domain added appends to a copy.
	names  []string
	index  map[string]int32
	counts []int
	// hist is how many domains hold each count, by count, so that the
	// smallest and the largest count follow a change by one in O(1).
	hist              []int
	smallest, largest int
}

// reset starts c from the layout's counts of constraint r.
func (c *constraintState) reset(r *spread.ConstraintResult, d spread.LayoutDomains) {
	*c = constraintState{
		key: r.TopologyKey, maxSkew: r.MaxSkew, minDomains: max(r.MinDomains, 1), selfMatch: r.SelfMatch,
		names: slices.Clip(d.Names), counts: append(c.counts[:0], d.Counts...), hist: c.hist[:0],
	}
	for i, n := range c.counts {
		c.count(n, 1)
		if i == 0 || n < c.smallest {
			c.smallest = n
		}
		c.largest = max(c.largest, n)
	}
}

// count adds delta to the domains holding n.
func (c *constraintState) count(n, delta int) {
	if n >= len(c.hist) {
		c.hist = append(c.hist, make([]int, n+1-len(c.hist))...)
	}
	c.hist[n] += delta
}

// lookup returns the index of domain d. The map of names is made at the
// first lookup: only a template's new node needs one, and a layout of
// thousands of hostnames is placed without it.
func (c *constraintState) lookup(d string) (int32, bool) {
	if c.index == nil {
		c.index = make(map[string]int32, len(c.names))
		for i, name := range c.names {
			c.index[name] = int32(i)
		}
	}
	i, ok := c.index[d]
	return i, ok
}

// add counts a new domain with no pod, and returns its index.
func (c *constraintState) add(d string) int32 {
	if i, ok := c.lookup(d); ok {
		return i
	}
	i := int32(len(c.names))
	c.index[d] = i
	c.names = append(c.names, d)
	c.counts = append(c.counts, 0)
	c.count(0, 1)
	c.smallest = 0
	return i
}

// set changes the count of domain i to n.
func (c *constraintState) set(i int32, n int) {
	c.count(c.counts[i], -1)
	c.counts[i] = n
	c.count(n, 1)
	if n < c.smallest {
		c.smallest = n
	}
	for c.hist[c.smallest] == 0 && c.smallest < n {
		c.smallest++
	}
	c.largest = max(c.largest, n)
	for c.hist[c.largest] == 0 && c.largest > n {
		c.largest--
	}
}

// skew is the largest count less the global minimum.
func (c *constraintState) skew() int { return c.largest - c.globalMin() }

// globalMin is the smallest domain count, or 0 with fewer domains than
// minDomains.
func (c *constraintState) globalMin() int {
	if len(c.names) < int(c.minDomains) {
		return 0
	}
	return c.smallest
}

// fits reports whether a replica on a node of domain i meets the
// constraint: 'existing matching num' + 'if self-match (1 or 0)' - 'global
// minimum' <= 'maxSkew'.
func (c *constraintState) fits(i int32) bool {
	return c.counts[i]+c.selfMatch-c.globalMin() <= int(c.maxSkew)
}

// fitsNew is fits for a domain that only a new node adds: it counts 0 and,
// being counted, makes the global minimum 0.
func (c *constraintState) fitsNew() bool { return c.selfMatch <= int(c.maxSkew) }

// bind counts a replica bound to a node of domain i.
func (c *constraintState) bind(i int32) {
	if c.selfMatch == 1 {
		c.set(i, c.counts[i]+1)
	}
}

func (c *constraintState) domains() map[string]int {
	out := make(map[string]int, len(c.names))
	for i, d := range c.names {
		out[d] = c.counts[i]
	}
	return out
}

// newPlacement starts from the layout's counts and nodes; the order of
// the nodes, the same on every run, is all the tie-break between equal
// loads needs. Release gives its scratch back.
func newPlacement(l *spread.Layout) *placement {
	p := placements.Get().(*placement)
	*p = placement{templates: l.Templates, layout: l, slots: slices.Clip(l.Nodes), domains: slices.Clip(l.NodeDomains),
		states: p.states, scan: scanBudget, index: p.index.reset()}
	for i := range l.Result.Constraints {
		if i == len(p.states) {
			p.states = append(p.states, new(constraintState))
		}
		c := p.states[i]
		c.reset(&l.Result.Constraints[i], l.Domains[i])
		p.constraints = append(p.constraints, c)
	}
	return p
}

// release gives p's scratch back; it points into the layout no more.
func (p *placement) release() {
	for _, c := range p.states {
		c.names, c.index = nil, nil
	}
	*p = placement{states: p.states, index: p.index.reset()}
	placements.Put(p)
}

// slot returns the domains of slot k, one per constraint.
func (p *placement) slot(k int) []int32 {
	n := len(p.constraints)
	return p.domains[k*n : (k+1)*n]
}

// domainsOf returns the domain indices of a new node labelled ls, counting
// the domains it adds.
func (p *placement) domainsOf(ls map[string]string) []int32 {
	domains := make([]int32, len(p.constraints))
	for i, c := range p.constraints {
		domains[i] = c.add(ls[c.key])
	}
	return domains
}

// initialCounts are the constraints before the first placement, with
// their counts by domain when withDomains.
func (p *placement) initialCounts(withDomains bool) []Counts {
	out := make([]Counts, len(p.constraints))
	for i, c := range p.constraints {
		out[i] = Counts{TopologyKey: c.key, MaxSkew: c.maxSkew, MinDomains: c.minDomains, SelfMatch: c.selfMatch}
		if withDomains {
			out[i].Domains = c.domains()
		}
	}
	return out
}

// place binds the next replica to a feasible node of the least-loaded
// domains (the smallest sum of its domains' counts; among equals, the
// first from the one after the last chosen), or, when no node is
// feasible, to a new node of the first feasible template, and returns its
// slot and whether a template's new node was added for it.
//
// A slot's load is at least the floor, the sum of the smallest counts, so
// a feasible slot at the floor is the one: with replicas of equal load
// taking turns, it is most often among the first few slots from the last
// chosen, and place looks at p.scan of them. Past those, it asks the slot
// index, whose answer is the same and whose cost does not grow with the
// slots, and asks it first for the rest of the forecast: a floor that no
// slot can reach (the global minimum held by a counted node the pod cannot
// use) no longer makes every placement visit every slot.
func (p *placement) place() (slot int, added, ok bool) {
	best := notScanned
	if !p.index.used {
		best = p.scanned()
	}
	if best == notScanned {
		best = p.index.best(p)
	}
	if best < 0 {
		best = p.addFromTemplate()
		added = true
		if best >= 0 {
			p.index.added(p, best)
		}
	}
	if best < 0 {
		return 0, false, false
	}
	p.next = (best + 1) % len(p.slots)
	for i, c := range p.constraints {
		c.bind(p.slot(best)[i])
	}
	p.index.bound(p, best)
	return best, added, true
}

// notScanned is what scanned returns when its slots did not decide.
const notScanned = -2

// scanned looks at up to p.scan slots from p.next and returns the first at
// the floor, or, when it looked at every slot, the first of the least
// load (-1 for none feasible); else notScanned.
func (p *placement) scanned() int {
	floor := 0
	for _, c := range p.constraints {
		floor += c.smallest
	}
	all := p.scan >= len(p.slots)
	best, bestLoad := -1, 0
	for k := range min(p.scan, len(p.slots)) {
		i := (p.next + k) % len(p.slots)
		load, ok := p.load(p.slot(i))
		if ok && (best < 0 || load < bestLoad) {
			best, bestLoad = i, load
			if load == floor {
				return best
			}
		}
	}
	if all {
		return best
	}
	return notScanned
}

// load is the sum of the counts of a node's domains, and whether a
// replica there meets every constraint.
func (p *placement) load(domains []int32) (int, bool) {
	load := 0
	for i, c := range p.constraints {
		if !c.fits(domains[i]) {
			return 0, false
		}
		load += c.counts[domains[i]]
	}
	return load, true
}

// addFromTemplate adds the new node of the first template whose node is
// feasible, each template evaluated alone as cluster-autoscaler does, and
// returns its slot, or -1.
func (p *placement) addFromTemplate() int {
	for _, t := range p.templates {
		name := fmt.Sprintf("new-%s-%d", t.Name, p.newNodes+1)
		ls := map[string]string{v1.LabelHostname: name}
		for k, v := range t.Labels {
			ls[k] = v
		}
		ok := true
		for _, c := range p.constraints {
			if d, known := c.lookup(ls[c.key]); known {
				ok = ok && c.fits(d)
			} else {
				ok = ok && c.fitsNew()
			}
		}
		if !ok {
			continue
		}
		p.newNodes++
		p.slots = append(p.slots, name)
		p.domains = append(p.domains, p.domainsOf(ls)...)
		if p.added == nil {
			p.added = map[int]string{}
		}
		p.added[len(p.slots)-1] = t.Name
		return len(p.slots) - 1
	}
	return -1
}

// refusal explains why replica r cannot be placed: the first constraint
// that every candidate node fails (else the first the least-loaded node
// fails), and the domains at its global minimum that no node the pod can
// use is in, named as detail lets them be.
func (p *placement) refusal(r int32, detail spread.MessageDetail) *Refusal {
	blocking := -1
	for i, c := range p.constraints {
		all := true
		for k := range p.slots {
			all = all && !c.fits(p.slot(k)[i])
		}
		if all {
			blocking = i
			break
		}
	}
	if blocking < 0 {
		blocking = 0
		for i, c := range p.constraints {
			if len(p.slots) > 0 && !c.fits(p.slot(0)[i]) {
				blocking = i
				break
			}
		}
	}
	c := p.constraints[blocking]
	ref := &Refusal{Replica: r, Constraint: blocking, GlobalMin: c.globalMin(), Domains: c.domains()}
	ref.Reason = p.reason(blocking, detail)
	return ref
}

func (p *placement) reason(i int, detail spread.MessageDetail) string {
	c := p.constraints[i]
	if len(c.names) < int(c.minDomains) {
		return fmt.Sprintf("only %d %s domains of minDomains %d have a node, so the global minimum is 0",
			len(c.names), shortKey(c.key), c.minDomains)
	}
	usable := map[int32]bool{}
	for k := range p.slots {
		usable[p.slot(k)[i]] = true
	}
	var empty []string
	for d, n := range c.counts {
		if n == c.globalMin() && !usable[int32(d)] {
			empty = append(empty, c.names[d])
		}
	}
	slices.Sort(empty)
	switch {
	case len(empty) == 0:
		return fmt.Sprintf("every %s the pod can use is %d above the global minimum %d", shortKey(c.key), c.maxSkew, c.globalMin())
	case !detail.NamesDomainsOf(c.key):
		// The domains are nodes, counted but not usable by the pod.
		if len(empty) == 1 {
			return "1 node at the global minimum cannot take the pod"
		}
		return fmt.Sprintf("%d nodes at the global minimum cannot take the pod", len(empty))
	case len(empty) == 1:
		return empty[0] + " has no schedulable node"
	}
	return fmt.Sprintf("%s and %d more have no schedulable node", empty[0], len(empty)-1)
}

// shortKey is the last segment of a topology key: zone, hostname, rack.
func shortKey(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// MaxWarning is the longest warning Warning returns, in bytes.
const MaxWarning = 250

// Warning is the admission warning of the forecast: empty when every
// replica is placed and a scale-down leaves no hard constraint skewed
// beyond its maxSkew, else one line of at most MaxWarning bytes that names
// the first replica no node takes, why, the counts and the policy, or the
// pods a scale-down deletes, the domains it leaves fullest and emptiest and
// the counts. The counts of a constraint whose domains f.Detail does not
// name (nodes) say how many nodes hold each count; the domains are named as
// spread.MessageDetail.DomainName says.
//
//	spreadguard: replica 7 of 9 would be refused: zone-c has no schedulable node; zone: zone-a=3 zone-b=3 zone-c=0, maxSkew 1 (policy shop/zones)
//	spreadguard: replica 3 of 9 would be refused: 1 node at the global minimum cannot take the pod; hostname: 2 nodes with 1, 1 node with 0, maxSkew 1 (policy shop/hosts)
func (f *Forecast) Warning() string {
	if f.Skewed != nil {
		return f.scaleDownWarning()
	}
	r := f.Refused
	if r == nil {
		return ""
	}
	outcome := "would be refused"
	if f.Action != v1alpha1.ActionDeny {
		outcome = "would be admitted but stay Pending"
	}
	head := fmt.Sprintf("spreadguard: replica %d of %d %s: %s; ", r.Replica, f.To, outcome, r.Reason)
	c := f.Constraints[r.Constraint]
	tail := fmt.Sprintf(", maxSkew %d", c.MaxSkew)
	if f.Policy != "" {
		tail += " (policy " + f.Policy + ")"
	}
	counts := shortKey(c.TopologyKey) + ": " + spread.NodesPerCount(r.Domains, len(r.Domains))
	if f.Detail.NamesDomainsOf(c.TopologyKey) {
		counts = domainList(shortKey(c.TopologyKey), r.Domains, MaxWarning-len(head)-len(tail))
	}
	return clip(head + counts + tail)
}

// domainList is "zone: zone-a=3 zone-b=3 zone-c=0" in at most budget
// bytes: the smallest counts first when not all fit, then "+N more".
func domainList(key string, domains map[string]int, budget int) string {
	names := make([]string, 0, len(domains))
	for d := range domains {
		names = append(names, d)
	}
	slices.Sort(names)
	all := key + ":"
	for _, d := range names {
		all += fmt.Sprintf(" %s=%d", d, domains[d])
	}
	if len(all) <= budget {
		return all
	}
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(domains[a], domains[b]) })
	out := key + ":"
	for i, d := range names {
		item := fmt.Sprintf(" %s=%d", d, domains[d])
		more := fmt.Sprintf(" +%d more", len(names)-i)
		if len(out)+len(item)+len(" +999999 more") > budget {
			return out + more
		}
		out += item
	}
	return out
}
