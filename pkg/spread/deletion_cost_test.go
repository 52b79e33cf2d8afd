package spread_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// costEvent is a kind of event a workload's pods go through.
type costEvent string

const (
	eventCreate    costEvent = "create"
	eventRSDelete  costEvent = "delete the cheapest"
	eventScaleDown costEvent = "scale down"
	eventEvict     costEvent = "evict"
	eventNodeLost  costEvent = "node lost"
	eventPodGC     costEvent = "lost node's pod deleted"
	eventNodeBack  costEvent = "node back"
	eventOther     costEvent = "other pod"
)

// costScenario shapes a run: which constraints, and which of the things
// that move costs besides the workload's own pods happen.
type costScenario struct {
	name string
	// hostname adds a hostname constraint after the zone one.
	hostname bool
	// tainted adds a tainted node in zone c, which nodeTaintsPolicy Honor
	// leaves out of counting while it holds pods of the workload.
	tainted bool
	// nodeLoss loses nodes (their pods stay until the pod garbage
	// collector deletes them) and brings them back.
	nodeLoss bool
	// others has another revision's pods come and go, counted by a
	// selector without matchLabelKeys.
	others bool
}

// costRun drives one workload through random events, as a keeper would see
// them, and keeps the costs a keeper would have written.
type costRun struct {
	*orderWorld
	sc      costScenario
	o       *spread.DeletionOrder
	rng     *rand.Rand
	written map[string]int32
	// changes counts the costs written, by the event that moved them;
	// most is the most one event of each kind wrote.
	changes map[costEvent]int
	most    map[costEvent]int
	events  map[costEvent]int
	// uncountedWrites counts the costs written to pods some constraint
	// does not count.
	uncountedWrites map[costEvent]int
	created         int
}

func newCostRun(t *testing.T, sc costScenario, seed uint64, round int) *costRun {
	t.Helper()
	c := rngChooser{rand.New(rand.NewPCG(seed, uint64(round)))}
	w := &orderWorld{c: c, ix: spread.NewIndex(), lost: map[string]bool{}, own: map[string]*v1.Pod{}, others: map[string]*v1.Pod{}}
	for i, zone := range []string{"a", "a", "b", "b", "c", "c"} {
		w.nodes = append(w.nodes, st.MakeNode().Name(fmt.Sprintf("n%d", i)).Zone(zone).Obj())
	}
	zone := st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web")
	if sc.tainted {
		w.nodes = append(w.nodes, st.MakeNode().Name("tainted").Zone("c").Taint("dedicated", "gpu", v1.TaintEffectNoSchedule).Obj())
		zone.NodeTaintsPolicy(v1.NodeInclusionPolicyHonor)
	}
	if !sc.others {
		zone.MatchLabelKeys("pod-template-hash")
	}
	for _, n := range w.nodes {
		w.ix.AddNode(n)
	}
	w.template = templateOf(zone.Obj())
	if sc.hostname {
		w.template.Spec.TopologySpreadConstraints = append(w.template.Spec.TopologySpreadConstraints,
			st.Constraint(1, v1.LabelHostname).MatchLabel("app", "web").MatchLabelKeys("pod-template-hash").Obj())
	}
	o, err := spread.NewDeletionOrder(w.template)
	if err != nil {
		t.Fatal(err)
	}
	o.Update(w.ix)
	return &costRun{orderWorld: w, sc: sc, o: o, rng: rand.New(rand.NewPCG(seed, uint64(round)<<32)), written: map[string]int32{},
		changes: map[costEvent]int{}, most: map[costEvent]int{}, events: map[costEvent]int{}, uncountedWrites: map[costEvent]int{}}
}

// apply writes changes as a keeper would, charging them to ev, and
// returns how many went to pods every constraint counts.
func (r *costRun) apply(ev costEvent, changes []spread.CostChange) int {
	r.events[ev]++
	r.changes[ev] += len(changes)
	r.most[ev] = max(r.most[ev], len(changes))
	counted := 0
	for _, c := range changes {
		r.written[c.Name] = c.Cost
		if r.countedByAll(c.Name) {
			counted++
		}
	}
	r.uncountedWrites[ev] += len(changes) - counted
	return counted
}

// countedByAll reports whether every constraint counts the workload's pod:
// it is not on a lost node, nor on the tainted node the zone constraint's
// Honor leaves out.
func (r *costRun) countedByAll(name string) bool {
	node := r.own[name].Spec.NodeName
	return !r.lost[node] && node != "tainted"
}

// cheapest returns the k pods of the order with the lowest costs, equal
// costs in random order, as the ReplicaSet controller picks them.
func (r *costRun) cheapest(k int) []string {
	names := r.o.Pods()
	r.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	slices.SortStableFunc(names, func(a, b string) int {
		ca, _ := r.o.Cost(a)
		cb, _ := r.o.Cost(b)
		return int(ca) - int(cb)
	})
	return names[:min(k, len(names))]
}

func (r *costRun) deleteOwn(ev costEvent, names ...string) int {
	for _, name := range names {
		r.ix.DeletePod(r.own[name])
	}
	changes := r.o.Update(r.ix, names...)
	for _, name := range names {
		delete(r.own, name)
		delete(r.written, name)
	}
	return r.apply(ev, changes)
}

// schedule returns a node for a new pod: mostly where the scheduler puts a
// pod with hard constraints, on the emptiest node of the emptiest zone
// (counting the workload's pods), sometimes anywhere, as a soft constraint
// or a full zone allows.
func (r *costRun) schedule() string {
	if r.c.intn(4) == 0 {
		return r.node()
	}
	pods := map[string]int{}
	for _, p := range r.own {
		pods[p.Spec.NodeName]++
	}
	zones := map[string]int{}
	for _, n := range r.nodes {
		zones[n.Labels[v1.LabelTopologyZone]] += pods[n.Name]
	}
	best := ""
	var bestKey [3]int
	for _, n := range r.nodes {
		if r.lost[n.Name] || n.Name == "tainted" {
			continue
		}
		key := [3]int{zones[n.Labels[v1.LabelTopologyZone]], pods[n.Name], r.c.intn(1000)}
		if best == "" || slices.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey = n.Name, key
		}
	}
	if best == "" {
		return r.node()
	}
	return best
}

// hostBandsAbove is, in the zone of node, the number of host levels above
// the one a new pod on node takes: the bands of the zone's stack a pod
// created there shifts by one pod each.
func (r *costRun) hostBandsAbove(node string) int {
	zoneOf := map[string]string{}
	for _, n := range r.nodes {
		zoneOf[n.Name] = n.Labels[v1.LabelTopologyZone]
	}
	pods := map[string]int{}
	for name, p := range r.own {
		if zoneOf[p.Spec.NodeName] == zoneOf[node] && r.countedByAll(name) {
			pods[p.Spec.NodeName]++
		}
	}
	most := slices.Max(slices.Collect(maps.Values(pods)))
	return max(0, most-pods[node])
}

// step applies one random event and fails if an event of the workload's
// own writes to the pods every constraint counts more than the order's
// design says: a pod created, its own cost (plus, under a hostname
// constraint, one per host level above its own in its zone), and a pod
// deleted in the order, none. The pods a constraint does not count are
// written again when its global minimum moves, whatever the event.
func (r *costRun) step(t *testing.T, maxOwn int, where string) {
	t.Helper()
	c := r.c
	check := func(ev costEvent, got, most int) {
		t.Helper()
		if got > most {
			t.Fatalf("%s: %s wrote %d costs of pods every constraint counts, more than %d", where, ev, got, most)
		}
	}
	switch c.intn(14) {
	case 0, 1, 2, 3, 4:
		if len(r.own) >= maxOwn {
			check(eventRSDelete, r.deleteOwn(eventRSDelete, r.cheapest(1)...), 0)
			return
		}
		r.serial++
		p := workloadPod(fmt.Sprintf("web-%d", r.serial), r.schedule())
		r.ix.AddPod(p)
		r.own[p.Name] = p
		r.created++
		most := 0
		if r.countedByAll(p.Name) {
			most = 1
			if r.sc.hostname {
				most += r.hostBandsAbove(p.Spec.NodeName)
			}
		}
		check(eventCreate, r.apply(eventCreate, r.o.Update(r.ix, p.Name)), most)
	case 5, 6:
		if len(r.own) > 0 {
			check(eventRSDelete, r.deleteOwn(eventRSDelete, r.cheapest(1)...), 0)
		}
	case 7:
		if len(r.own) > 0 {
			check(eventScaleDown, r.deleteOwn(eventScaleDown, r.cheapest(1+c.intn(min(3, len(r.own))))...), 0)
		}
	case 8, 9:
		if names := r.ownNames(); len(names) > 0 {
			r.deleteOwn(eventEvict, names[c.intn(len(names))])
		}
	case 10:
		if !r.sc.nodeLoss {
			return
		}
		n := r.nodes[c.intn(len(r.nodes))]
		if r.lost[n.Name] {
			r.ix.AddNode(n)
			delete(r.lost, n.Name)
			r.apply(eventNodeBack, r.o.Update(r.ix))
			return
		}
		r.ix.DeleteNode(n)
		r.lost[n.Name] = true
		r.apply(eventNodeLost, r.o.Update(r.ix))
	case 11:
		// The pod garbage collector deletes the pods of a lost node.
		for _, name := range r.ownNames() {
			if r.lost[r.own[name].Spec.NodeName] {
				r.deleteOwn(eventPodGC, name)
				return
			}
		}
	case 12, 13:
		if !r.sc.others {
			return
		}
		if len(r.others) > 0 && c.intn(2) == 0 {
			for _, name := range slices.Sorted(maps.Keys(r.others)) {
				r.ix.DeletePod(r.others[name])
				delete(r.others, name)
				break
			}
		} else {
			r.addOther()
		}
		r.apply(eventOther, r.o.Update(r.ix))
	}
}

// checkWritten fails unless the costs written are the order's, for every
// pod of the workload the index counts, and for no other pod.
func (r *costRun) checkWritten(t *testing.T, where string) {
	t.Helper()
	want := map[string]int32{}
	for _, name := range r.ownNames() {
		cost, ok := r.o.Cost(name)
		if !ok {
			t.Fatalf("%s: pod %s of the workload is not in the order", where, name)
		}
		want[name] = cost
	}
	if !maps.Equal(want, r.written) {
		t.Fatalf("%s: the costs written, %v, are not the order's, %v", where, r.written, want)
	}
}

var costEvents = []costEvent{eventCreate, eventRSDelete, eventScaleDown, eventEvict, eventNodeLost, eventPodGC, eventNodeBack, eventOther}

// TestDeletionCostWrites drives a workload through random creations (where
// the scheduler would put them, or anywhere), deletions in the ReplicaSet
// controller's order, scale-downs, evictions, lost nodes and another
// revision's pods, and counts the costs a keeper writes. After every step
// the costs written are exactly the order's, and the order keeps its
// guarantee against the brute force (checkOrderGuarantee); each event of
// the workload's own stays within the order's design (step). The workload
// keeps at most 7 pods, so that no host level outgrows its 4 bits
// (TestDeletionOrderWidens widens them).
func TestDeletionCostWrites(t *testing.T) {
	seed, rounds := randomRounds(t, 4, 1)
	rng := rand.New(rand.NewPCG(seed, 1<<41))
	for _, sc := range []costScenario{
		{name: "one zone constraint, every pod counted"},
		{name: "zone then hostname, every pod counted", hostname: true},
		{name: "zone then hostname, a tainted node under Honor holding pods, nodes lost", hostname: true, tainted: true, nodeLoss: true},
		{name: "one zone constraint counting another revision's pods coming and going", others: true},
	} {
		t.Run(sc.name, func(t *testing.T) {
			changes, events, most, uncounted := map[costEvent]int{}, map[costEvent]int{}, map[costEvent]int{}, map[costEvent]int{}
			created := 0
			for round := range rounds {
				r := newCostRun(t, sc, seed, round)
				for step := range 300 {
					where := fmt.Sprintf("seed %d round %d step %d", seed, round, step)
					r.step(t, 7, where)
					r.checkWritten(t, where)
					if len(r.own) > 0 {
						checkOrderGuarantee(t, r.orderWorld, r.o, rng, where)
					}
				}
				for ev, n := range r.changes {
					changes[ev] += n
					events[ev] += r.events[ev]
					most[ev] = max(most[ev], r.most[ev])
					uncounted[ev] += r.uncountedWrites[ev]
				}
				created += r.created
			}
			all, allUncounted := 0, 0
			for _, ev := range costEvents {
				if events[ev] > 0 {
					t.Logf("%-24s %5d events, %5d costs written (%.2f per event, at most %d), %d of them to pods a constraint does not count",
						ev, events[ev], changes[ev], float64(changes[ev])/float64(events[ev]), most[ev], uncounted[ev])
				}
				all += changes[ev]
				allUncounted += uncounted[ev]
			}
			own := changes[eventCreate] + changes[eventRSDelete] + changes[eventScaleDown]
			ownUncounted := uncounted[eventCreate] + uncounted[eventRSDelete] + uncounted[eventScaleDown]
			t.Logf("pods created: %d; per pod created, costs written by creations and deletions in the order: %.2f (%.2f to pods every constraint counts); all costs written: %.2f (%.2f)",
				created, float64(own)/float64(created), float64(own-ownUncounted)/float64(created),
				float64(all)/float64(created), float64(all-allUncounted)/float64(created))
		})
	}
}
