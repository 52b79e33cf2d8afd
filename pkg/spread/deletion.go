package spread

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// This file is the order in which a ReplicaSet's pods should be deleted so
// that a scale-down keeps the spread, and the deletion costs that make the
// ReplicaSet controller follow it.
//
// The ReplicaSet controller deletes, of the pods it holds, the first diff in
// the order of ActivePodsWithRanks.Less: unassigned before assigned,
// Pending before Unknown before Running, not Ready before Ready, then the
// lower controller.kubernetes.io/pod-deletion-cost, then more Ready pods of
// the ReplicaSet on the same node (getPodsRankedByRelatedPodsOnSameNode),
// then Ready for less time, more restarts, and newer:
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/replicaset/replica_set.go
// Among running Ready pods, the cost decides first; nothing before it looks
// at topology.
//
// The order. For one constraint, deleting from the domain with the most
// matching pods, again and again, leaves for every k the most balanced
// counts that deleting k pods can leave, and so the lowest skew: the counts
// it leaves are majorized by those of any other k deletions from the same
// domains, and max - min is Schur-convex. Such a sequence is a stack per
// domain: the workload's pods in domain d take the heights others(d)+1 ...
// others(d)+own(d) (others: the matching pods that are not the workload's,
// which it cannot delete), and deleting by height, highest first, is
// deleting from the fullest domain. A new pod goes on top of its domain and
// changes no other pod's height; a pod leaving from the middle is replaced
// by the top one, one move.
//
// Several constraints are ranked (hard before soft, then region, zone, any
// other key, hostname, then their place in the pod) and compared
// lexicographically: a pod's key is its height in each constraint, and
// each domain's stack is sorted by the keys of the constraints ranked after
// it, so that the next pod out of a zone is the one on its fullest host.
//
// A pod a constraint does not count (on a node its inclusion policies leave
// out, a node without its key, not selected) changes nothing of its skew
// when deleted. It takes the height min+½, min being the global minimum:
// after the pods whose deletion only lowers the fullest domains, before
// those whose deletion would lower the minimum and raise the skew.
//
// CAVEAT: the guarantee, held against a brute force over every subset
// (TestDeletionOrderAgainstBruteForce), is this. For every k, the first
// constraint's skew is the lowest that deleting any k pods can leave when
// it counts every pod, and whatever it counts while k is at most its pods
// above the global minimum plus those it does not count; beyond, at most
// one above. No order does better: with counts [2,2,2] and one pod not
// counted, deleting 1 pod leaves skew 0 only by taking that pod, and
// deleting 3 only by taking one pod of each domain. When every constraint
// counts every pod and each later constraint's domains lie within one
// domain of each earlier one (hostname within zone), the skews are the
// lexicographically lowest for every k whenever some order's are: a first
// constraint whose minimum is pinned at 0 (minDomains above its domains)
// can leave none (TestNoOrderIsBestForEveryK). Constraints that do not
// nest only break each other's ties. See docs/deletion-cost.md.

// DeletionCostAnnotation is the pod annotation the ReplicaSet controller
// compares: the pods with the lower cost are deleted first. Its value is a
// decimal int32.
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// ErrNoConstraints marks a template without a topology spread constraint:
// there is no spread to keep.
var ErrNoConstraints = errors.New("no topology spread constraint")

// minLevelWidth is the least number of bits a level other than the first
// takes in a cost: levels up to 15, hosts holding up to 7 pods of a
// workload, before the width has to grow and every cost to change.
const minLevelWidth = 4

// DeletionOrder keeps the deletion costs of the running pods of one
// workload (a ReplicaSet or ReplicationController), whose pods share one
// template: deleting the pods with the lowest costs first keeps the spread
// of the template's topology spread constraints, counted as Check counts.
//
// The order is fed from an Index and remembers each pod's place, so that
// an event moves as few costs as it can: a pod created costs one write,
// its own, and a pod deleted in the order's own order none; see Update. A
// DeletionOrder is not safe for concurrent use.
type DeletionOrder struct {
	namespace string
	// labels are the template's: a pod carrying them (but for
	// revisionKey) is the workload's, or another revision's of it; the
	// matching pods that are not are the floors of the stacks.
	labels      map[string]string
	revisionKey string
	kinds       []orderKind
	// priority holds the positions in spec.topologySpreadConstraints of
	// the constraints, the most important first; cons follows it.
	priority []int
	cons     []*orderConstraint
	pods     map[string]*orderPod
	// width is, per constraint after the first, the bits its level takes
	// in a cost. Widths only grow: a narrower one would change every cost.
	width []uint
	// saturated counts the pods whose key does not fit an int32; they
	// share the lowest cost.
	saturated int
	// nodeGen is the index's node generation at the last read.
	nodeGen uint64
	// unready is, for each pod of the workload the index counted at its
	// last read, whether it is not Ready (PodRecord.Unready); ready
	// counts those that are. While one is Ready, the pods that are not
	// leave the stacks: the ReplicaSet controller deletes them first,
	// whatever their cost. While none is, the controller compares the
	// costs of the pods that are not, and they are the stacks.
	unready map[string]bool
	ready   int

	read    orderRead
	epoch   uint64
	touched []*orderPod
	taken   []bool
}

// orderKind is the template's constraints of one kind, as the index
// counts them, with their places in the priority.
type orderKind struct {
	kindConstraints
	at []int
}

// orderConstraint is one constraint's stacks: the domains holding pods of
// the workload, and the pods it does not count.
type orderConstraint struct {
	// globalMin is the constraint's global minimum at the last read.
	globalMin int
	domains   map[string]*orderDomain
	uncounted map[*orderPod]struct{}
	dirty     []*orderDomain
}

// orderDomain is one domain's stack.
type orderDomain struct {
	value string
	con   int
	// count is the domain's matching pods, the workload's included, at
	// the read of epoch read (none read: 0); family, those of them that
	// carry the template's labels (sameWorkload).
	count, family int
	read          uint64
	// others is the number of matching pods of the domain that are not
	// the workload's: the floor of its stack.
	others int
	// pods are the workload's pods counted here, in no order; each pod's
	// slot says where in the stack it is, 0 at the bottom.
	pods  []*orderPod
	dirty bool
}

type orderPod struct {
	name string
	// dom is, per constraint, the domain the pod is counted in, nil when
	// not counted; slot its place in that domain's stack (-1 until placed).
	dom  []*orderDomain
	slot []int32
	// level is, per constraint, twice the pod's height, or twice the
	// global minimum plus one when the constraint does not count it.
	level  []int64
	cost   int32
	costed bool
	// saturated: its key does not fit an int32 (see costOf).
	saturated bool
	// removed: it left the order during this update.
	removed bool
	epoch   uint64
}

// OrderOption sets an optional part of a DeletionOrder.
type OrderOption func(*DeletionOrder)

// WithRevisionLabel says that the pods carrying the template's labels but
// for key (pod-template-hash: a Deployment's other ReplicaSets) are the
// workload's other revisions: they take no part in the stacks, as the
// workload's own pods the order does not hold yet take none. Another
// revision's pods come and go through a rollout and are gone at its end;
// were they floors, each would move the cost of every pod of the workload
// in its domain. Without it, only the pods carrying exactly the template's
// labels are the workload's.
func WithRevisionLabel(key string) OrderOption {
	return func(o *DeletionOrder) { o.revisionKey = key }
}

// sameWorkload reports whether a pod labelled ls is the workload's, or
// another revision's of it: ls are the template's labels, but for the
// revision label. The matching pods of a domain that are not are the floor
// of its stack, counted as the index counts them at each Update: so a pod
// of the workload the index counts before the order is told of it (its
// event comes later) moves no other pod's cost.
func (o *DeletionOrder) sameWorkload(ls map[string]string) bool {
	n := 0
	for k, v := range ls {
		if k == o.revisionKey {
			continue
		}
		w, ok := o.labels[k]
		if !ok && nodeTopologyLabel(k) {
			continue // copied from its node at binding
		}
		if !ok || w != v {
			return false
		}
		n++
	}
	want := len(o.labels)
	if _, ok := o.labels[o.revisionKey]; ok && o.revisionKey != "" {
		want--
	}
	return n == want
}

// nodeTopologyLabel reports whether the API server copies label key from a
// pod's node onto the pod when it binds it (the PodTopologyLabels admission
// plugin: topology.k8s.io/* and the zone and region labels,
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/plugin/pkg/admission/podtopologylabels/admission.go):
// a pod of the workload may carry it, its template never does.
func nodeTopologyLabel(key string) bool {
	return key == v1.LabelTopologyZone || key == v1.LabelTopologyRegion || strings.HasPrefix(key, "topology.k8s.io/")
}

// CostChange is a pod whose deletion cost is to be written.
type CostChange struct {
	Name string
	Cost int32
}

// NewDeletionOrder returns the order of the pods of one workload, which
// look like template: its namespace, labels (matchLabelKeys are merged
// from them), nodeSelector, affinity, tolerations and topology spread
// constraints, hard and soft. The webhook injects constraints into pods,
// not into templates: template is one of the workload's pods. A template
// whose constraints the apiserver would not accept is an error wrapping
// ErrInvalidConstraint; one without constraints, ErrNoConstraints.
func NewDeletionOrder(template *v1.Pod, opts ...OrderOption) (*DeletionOrder, error) {
	if template == nil {
		return nil, errors.New("deletion order: nil template")
	}
	kinds, err := constraintsByKind(template)
	if err != nil {
		return nil, fmt.Errorf("deletion order: %w", err)
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("deletion order of %s/%s: %w", template.Namespace, template.Name, ErrNoConstraints)
	}
	o := &DeletionOrder{namespace: template.Namespace, labels: template.Labels, pods: map[string]*orderPod{}, unready: map[string]bool{}}
	for _, opt := range opts {
		opt(o)
	}
	type ranked struct{ kind, j, breadth, position int }
	var all []ranked
	for k := range kinds {
		o.kinds = append(o.kinds, orderKind{kindConstraints: kinds[k], at: make([]int, len(kinds[k].cs))})
		for j := range kinds[k].cs {
			all = append(all, ranked{k, j, keyBreadth(kinds[k].cs[j].topologyKey), kinds[k].positions[j]})
		}
	}
	// Kinds come hard first.
	slices.SortStableFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.breadth, b.breadth), cmp.Compare(a.position, b.position))
	})
	for i, r := range all {
		o.kinds[r.kind].at[r.j] = i
		o.priority = append(o.priority, r.position)
		o.cons = append(o.cons, &orderConstraint{domains: map[string]*orderDomain{}, uncounted: map[*orderPod]struct{}{}})
	}
	o.read.globalMin = make([]int, len(all))
	o.width = make([]uint, len(all))
	for i := 1; i < len(all); i++ {
		o.width[i] = minLevelWidth
	}
	return o, nil
}

// keyBreadth ranks topology keys from the broadest domains to the
// narrowest, so that a constraint whose domains hold another's domains
// comes first: an order exact for zone then hostname need not be for
// hostname then zone.
func keyBreadth(key string) int {
	switch key {
	case v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion:
		return 0
	case v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone:
		return 1
	case v1.LabelHostname:
		return 3
	}
	return 2
}

// Priority returns the positions in spec.topologySpreadConstraints of the
// template's constraints, in the order the deletion order ranks them: hard
// before soft, then region, zone, any other key and hostname, then by
// position.
func (o *DeletionOrder) Priority() []int { return slices.Clone(o.priority) }

// Selects reports whether a pod of the workload's namespace carrying
// podLabels is counted by one of the order's constraints (on a node that
// takes part): its events change the counts the order reads, so the
// order's Update has to follow them.
func (o *DeletionOrder) Selects(podLabels map[string]string) bool {
	for _, k := range o.kinds {
		for j := range k.cs {
			if c := &k.cs[j]; c.countsPods() && c.selector.Matches(labels.Set(podLabels)) {
				return true
			}
		}
	}
	return false
}

// Update brings the order up to date with ix and returns the pods whose
// cost changed since the last Update, with their new cost, by name. names
// are the workload's pods that had an event since the last Update: added,
// changed or deleted (a pod the index does not count, deleted, terminating,
// finished or not bound, leaves the order). An event of a pod that is not
// the workload's but that the order Selects calls Update with no name: the
// counts of its domain moved; so does a node event (labels, taints, a node
// added or lost), after which Update reads every pod's domains again. The
// first Update names every pod.
//
// What it costs in writes, per event: a pod created, its own cost (and one
// more per band of a sorted stack it lands under, see resort); a pod
// deleted from the top of its stacks, as the ReplicaSet controller deletes
// them, none; a pod deleted from the middle (an eviction, a node lost),
// the pod that takes its place. A pod of another workload that the
// constraints count moves the height, so the cost, of every pod of the
// workload in its domain; so does a change of a global minimum for the
// pods a constraint does not count.
func (o *DeletionOrder) Update(ix *Index, names ...string) []CostChange {
	o.epoch++
	ix.readOrder(o, names)
	o.nodeGen = o.read.nodeGen
	o.touched = o.touched[:0]
	m := len(o.cons)
	wasReady := o.ready > 0
	for _, pl := range o.read.placed {
		if u, ok := o.unready[pl.name]; ok && !u {
			o.ready--
		}
		delete(o.unready, pl.name)
		if pl.present {
			o.unready[pl.name] = pl.unready
			if !pl.unready {
				o.ready++
			}
		}
	}
	anyReady := o.ready > 0
	for p, pl := range o.read.placed {
		op := o.pods[pl.name]
		// A pod the controller deletes before any cost is compared
		// (not Ready while another is Ready) leaves the stacks: its cost
		// does not order it, and the pods above it are deleted after it.
		if !pl.present || (pl.unready && anyReady) {
			if op != nil {
				o.remove(op)
			}
			continue
		}
		if op == nil {
			op = o.add(pl.name)
		}
		for i, c := range o.cons {
			var d *orderDomain
			if o.read.counted[p*m+i] {
				d = c.domain(o.read.domains[p*m+i], i)
			}
			if d != op.dom[i] {
				o.move(op, i, d)
			}
		}
	}
	for i, c := range o.cons {
		if g := o.read.globalMin[i]; g != c.globalMin {
			c.globalMin = g
			for p := range c.uncounted {
				o.touch(p)
			}
		}
		for v, d := range c.domains {
			if len(d.pods) == 0 {
				delete(c.domains, v)
				continue
			}
			others := 0
			if d.read == o.epoch {
				others = d.count - d.family
			}
			if others != d.others {
				d.others = others
				for _, p := range d.pods {
					o.touch(p)
				}
			}
		}
	}
	// From the last constraint to the first: a stack is sorted by the
	// levels of the constraints after its own, which are final by then.
	for i := m - 1; i >= 0; i-- {
		c := o.cons[i]
		for _, d := range c.dirty {
			d.dirty = false
			if len(d.pods) > 0 {
				o.resort(d, i)
			}
		}
		c.dirty = c.dirty[:0]
		for _, p := range o.touched {
			if p.removed {
				continue
			}
			lv := 2*int64(c.globalMin) + 1
			if d := p.dom[i]; d != nil {
				lv = 2 * (int64(d.others) + int64(p.slot[i]) + 1)
			}
			if lv == p.level[i] {
				continue
			}
			p.level[i] = lv
			for j := range i {
				o.markDirty(p.dom[j])
			}
		}
	}
	changes := o.costs()
	if anyReady != wasReady {
		// The first pod Ready, or the last one gone: the pods that are not
		// Ready leave the stacks, or are the stacks now.
		var names []string
		for name, u := range o.unready {
			if u {
				names = append(names, name)
			}
		}
		if len(names) > 0 {
			changes = mergeCostChanges(changes, o.Update(ix, names...))
		}
	}
	return changes
}

// mergeCostChanges returns a's changes and b's, b's where both name a pod,
// sorted by name.
func mergeCostChanges(a, b []CostChange) []CostChange {
	if len(a) == 0 {
		return b
	}
	out := slices.DeleteFunc(a, func(c CostChange) bool {
		return slices.ContainsFunc(b, func(d CostChange) bool { return d.Name == c.Name })
	})
	out = append(out, b...)
	slices.SortFunc(out, func(x, y CostChange) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// costs recomputes the costs of the pods touched (of every pod when a
// level outgrew its width) and returns those that changed.
func (o *DeletionOrder) costs() []CostChange {
	recompute := o.touched
	for i := 1; i < len(o.cons); i++ {
		for _, p := range o.touched {
			if w := uint(bits.Len64(uint64(p.level[i]))); !p.removed && w > o.width[i] {
				o.width[i] = w
				recompute = nil
			}
		}
	}
	if recompute == nil {
		for _, p := range o.pods {
			recompute = append(recompute, p)
		}
	}
	var changes []CostChange
	for _, p := range recompute {
		if p.removed {
			continue
		}
		cost, fits := o.costOf(p)
		if sat := !fits; sat != p.saturated {
			p.saturated = sat
			if sat {
				o.saturated++
			} else {
				o.saturated--
			}
		}
		if p.costed && p.cost == cost {
			continue
		}
		p.cost, p.costed = cost, true
		changes = append(changes, CostChange{Name: p.name, Cost: cost})
	}
	slices.SortFunc(changes, func(a, b CostChange) int { return strings.Compare(a.Name, b.Name) })
	return changes
}

// costOf encodes p's levels, the first the most significant, into a cost:
// the higher the key, the lower the cost, down to -MaxInt32. A key beyond
// that takes the lowest cost, MinInt32 (fits is false): those pods go
// first, in no order among them.
func (o *DeletionOrder) costOf(p *orderPod) (cost int32, fits bool) {
	const limit = math.MaxInt32
	key := p.level[0]
	for i := 1; i < len(o.cons); i++ {
		if key > limit>>o.width[i] {
			return math.MinInt32, false
		}
		key = key<<o.width[i] | p.level[i]
	}
	if key > limit {
		return math.MinInt32, false
	}
	return int32(-key), true
}

// Cost returns the cost of a pod of the order, and whether it is one.
func (o *DeletionOrder) Cost(name string) (int32, bool) {
	p := o.pods[name]
	if p == nil {
		return 0, false
	}
	return p.cost, true
}

// Pods returns the pods of the order, the first to delete first: by cost,
// then by name (the ReplicaSet controller breaks a tie with its own ranks).
func (o *DeletionOrder) Pods() []string {
	ps := make([]*orderPod, 0, len(o.pods))
	for _, p := range o.pods {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *orderPod) int { return cmp.Or(cmp.Compare(a.cost, b.cost), strings.Compare(a.name, b.name)) })
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	return names
}

// Saturated returns the number of pods whose key does not fit an int32
// cost: they all take the lowest cost, and the order among them is lost.
// Heights reach that only with tens of millions of pods in a domain, or
// with a later constraint's hosts holding thousands of them each.
func (o *DeletionOrder) Saturated() int { return o.saturated }

func (c *orderConstraint) domain(value string, con int) *orderDomain {
	d := c.domains[value]
	if d == nil {
		d = &orderDomain{value: value, con: con}
		c.domains[value] = d
	}
	return d
}

func (o *DeletionOrder) add(name string) *orderPod {
	m := len(o.cons)
	p := &orderPod{name: name, dom: make([]*orderDomain, m), slot: make([]int32, m), level: make([]int64, m)}
	for i, c := range o.cons {
		c.uncounted[p] = struct{}{}
		p.slot[i] = -1
	}
	o.pods[name] = p
	o.touch(p)
	return p
}

func (o *DeletionOrder) remove(p *orderPod) {
	for i := range o.cons {
		o.leave(p, i)
	}
	delete(o.pods, p.name)
	p.removed = true
	if p.saturated {
		o.saturated--
	}
}

// move takes p out of its stack of constraint i and puts it on stack d,
// or among the pods the constraint does not count.
func (o *DeletionOrder) move(p *orderPod, i int, d *orderDomain) {
	o.leave(p, i)
	p.dom[i], p.slot[i] = d, -1
	if d != nil {
		d.pods = append(d.pods, p)
		o.markDirty(d)
	} else {
		o.cons[i].uncounted[p] = struct{}{}
	}
	o.touch(p)
}

// leave takes p out of its stack of constraint i, leaving a hole, or out of
// the pods the constraint does not count.
func (o *DeletionOrder) leave(p *orderPod, i int) {
	if d := p.dom[i]; d != nil {
		k := slices.Index(d.pods, p)
		d.pods[k] = d.pods[len(d.pods)-1]
		d.pods = d.pods[:len(d.pods)-1]
		o.markDirty(d)
		p.dom[i] = nil
		return
	}
	delete(o.cons[i].uncounted, p)
}

func (o *DeletionOrder) markDirty(d *orderDomain) {
	if d != nil && !d.dirty {
		d.dirty = true
		c := o.cons[d.con]
		c.dirty = append(c.dirty, d)
	}
}

func (o *DeletionOrder) touch(p *orderPod) {
	if p.epoch != o.epoch {
		p.epoch = o.epoch
		o.touched = append(o.touched, p)
	}
}

// resort gives the pods of d, a stack of constraint i, the slots 0 ..
// len-1, sorted by the levels of the constraints after i (a band: pods of
// equal later levels), the lowest at the bottom, moving as few pods as it
// can: a pod whose slot lies within its band's range keeps it, and only
// the others take the free slots of their band's range. A pod arriving on
// top of the highest band takes the top slot and moves nobody; one arriving
// in a lower band moves, for each band above it, one pod from that band's
// bottom to its new top. For the last constraint, all pods are one band: a
// hole left in the middle is filled by the pod above the new top.
func (o *DeletionOrder) resort(d *orderDomain, i int) {
	ps := d.pods
	slices.SortFunc(ps, func(a, b *orderPod) int {
		return cmp.Or(slices.Compare(a.level[i+1:], b.level[i+1:]),
			// New pods, at -1, after those with a slot.
			cmp.Compare(uint32(a.slot[i]), uint32(b.slot[i])),
			strings.Compare(a.name, b.name))
	})
	n := len(ps)
	o.taken = grow(o.taken, n)
	clear(o.taken)
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && slices.Equal(ps[hi].level[i+1:], ps[lo].level[i+1:]) {
			hi++
		}
		for _, p := range ps[lo:hi] {
			if s := int(p.slot[i]); s >= lo && s < hi {
				o.taken[s] = true
			}
		}
		free := lo
		for _, p := range ps[lo:hi] {
			if s := int(p.slot[i]); s >= lo && s < hi {
				continue
			}
			for o.taken[free] {
				free++
			}
			o.taken[free] = true
			p.slot[i] = int32(free)
			o.touch(p)
		}
		lo = hi
	}
}
