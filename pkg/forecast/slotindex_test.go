package forecast

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// placeByScan is place as first written, kept as the oracle of the slot
// index: it visits every slot from the one after the last chosen and keeps
// the first of the least load, stopping early at the floor.
func (p *placement) placeByScan() (slot int, added, ok bool) {
	floor := 0
	for _, c := range p.constraints {
		floor += c.smallest
	}
	best, bestLoad := -1, 0
	for k := range p.slots {
		i := (p.next + k) % len(p.slots)
		load, ok := p.load(p.slot(i))
		if ok && (best < 0 || load < bestLoad) {
			best, bestLoad = i, load
			if load == floor {
				break
			}
		}
	}
	if best < 0 {
		best = p.addFromTemplate()
		added = true
	}
	if best < 0 {
		return 0, false, false
	}
	p.next = (best + 1) % len(p.slots)
	for i, c := range p.constraints {
		c.bind(p.slot(best)[i])
	}
	return best, added, true
}

const rackKey = "topology.example.com/rack"

// randomPlacementWorld is a cluster of 1 to 4 zones of 1 to 3 racks of 0
// to 5 nodes, some cordoned, tainted, unlabelled by rack or without the
// disk the pod may require; racks nested in their zone or shared by the
// zones; matching pods bound anywhere, on cordoned nodes too; maybe node
// templates; and a pod with 1 to 3 hard constraints over zone, hostname and
// rack in any order, each of a random maxSkew, nodeTaintsPolicy and
// selector (the pod's own or one that it does not match), maybe minDomains,
// maybe a node affinity.
func randomPlacementWorld(rng *rand.Rand) (spread.Snapshot, *v1.Pod) {
	var snap spread.Snapshot
	zones := []string{"zone-a", "zone-b", "zone-c", "zone-d"}[:1+rng.IntN(4)]
	nested := rng.IntN(2) == 0
	var nodes []string
	for _, z := range zones {
		for r := range 1 + rng.IntN(3) {
			rack := fmt.Sprintf("rack-%d", r)
			if nested {
				rack = z + "-" + rack
			}
			for i := range rng.IntN(6) {
				name := fmt.Sprintf("%s-%d-%d", z, r, i)
				n := spreadtest.MakeNode().Name(name).Zone(z)
				if rng.IntN(10) > 0 {
					n.Label(rackKey, rack)
				}
				if rng.IntN(3) > 0 {
					n.Label("disk", "ssd")
				}
				switch rng.IntN(6) {
				case 0:
					n.Cordoned()
				case 1:
					n.Taint("dedicated", "batch", v1.TaintEffectNoSchedule)
				}
				snap.Nodes = append(snap.Nodes, n.Obj())
				nodes = append(nodes, name)
			}
		}
	}
	if len(nodes) > 0 {
		for i := range rng.IntN(3 * len(nodes)) {
			app := "web"
			if rng.IntN(4) == 0 {
				app = "other"
			}
			snap.Pods = append(snap.Pods, spreadtest.MakePod().Namespace(shop).Name(fmt.Sprintf("old-%d", i)).
				Label("app", app).Node(nodes[rng.IntN(len(nodes))]).Obj())
		}
	}
	for i := range rng.IntN(3) {
		ls := map[string]string{v1.LabelTopologyZone: zones[rng.IntN(len(zones))]}
		if rng.IntN(2) == 0 {
			ls[rackKey] = "rack-new"
		}
		snap.Templates = append(snap.Templates, spread.Template{Name: fmt.Sprintf("pool-%d", i), Labels: ls})
	}
	pod := spreadtest.MakePod().Namespace(shop).Name("web-new").Label("app", "web")
	keys := []string{v1.LabelTopologyZone, v1.LabelHostname, rackKey}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	taints := []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}
	for _, key := range keys[:1+rng.IntN(3)] {
		c := spreadtest.Constraint(int32(1+rng.IntN(3)), key).NodeTaintsPolicy(taints[rng.IntN(2)]).MatchLabel("app", "web")
		if rng.IntN(5) == 0 {
			c = spreadtest.Constraint(int32(1+rng.IntN(3)), key).NodeTaintsPolicy(taints[rng.IntN(2)]).MatchLabel("app", "other")
		}
		if rng.IntN(4) == 0 {
			c.MinDomains(int32(2 + rng.IntN(4)))
		}
		pod.SpreadConstraint(c.Obj())
	}
	switch rng.IntN(5) {
	case 0:
		pod.NodeAffinityIn("disk", "ssd")
	case 1:
		pod.NodeAffinityNotIn(v1.LabelTopologyZone, zones[0])
	}
	return snap, pod.Obj()
}

// placed is one placement as the test compares them.
type placed struct {
	Slot  int
	Node  string
	Added bool
}

// placeAll places up to replicas replicas on a fresh placement of l with
// place or with the oracle, and returns every placement, the refusal of
// the first replica not placed, and whether the slot index answered one.
func placeAll(l *spread.Layout, replicas int, scan int, oracle bool) ([]placed, *Refusal, bool) {
	p := newPlacement(l)
	defer p.release()
	p.scan = scan
	var out []placed
	indexed := false
	for r := 1; r <= replicas; r++ {
		var k int
		var added, ok bool
		if oracle {
			k, added, ok = p.placeByScan()
		} else {
			k, added, ok = p.place()
			indexed = indexed || p.index.used
		}
		if !ok {
			return out, p.refusal(int32(r), spread.DetailNodes), indexed
		}
		out = append(out, placed{Slot: k, Node: p.slots[k], Added: added})
	}
	return out, nil, indexed
}

func TestPlaceChoosesTheSlotsOfTheScanOverEverySlot(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rounds := 600
	if testing.Short() {
		rounds = 60
	}
	for _, tc := range []struct {
		name string
		scan int
	}{
		{name: "every placement answered by the slot index", scan: 0},
		{name: "one slot scanned before the index", scan: 1},
		{name: "three slots scanned before the index", scan: 3},
		{name: "the scan budget of the forecast", scan: scanBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused, added, indexed, private, classes := 0, 0, 0, 0, 0
			for round := range rounds {
				rng := rand.New(rand.NewPCG(seed, uint64(round)))
				snap, pod := randomPlacementWorld(rng)
				ix := spread.IndexFromSnapshot(snap)
				replicas := 1 + rng.IntN(3*len(snap.Nodes)+8)
				l, err := ix.Layout(pod, spread.DetailNodes)
				if err != nil {
					t.Fatalf("seed %d round %d: layout: %v", seed, round, err)
				}
				want, wantRefusal, _ := placeAll(l, replicas, tc.scan, true)
				got, gotRefusal, used := placeAll(l, replicas, tc.scan, false)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("seed %d round %d: placements (-scan over every slot, +place):\n%s", seed, round, diff)
				}
				if diff := cmp.Diff(wantRefusal, gotRefusal); diff != "" {
					t.Errorf("seed %d round %d: refusal (-scan over every slot, +place):\n%s", seed, round, diff)
				}
				if wantRefusal != nil {
					refused++
				}
				for _, pl := range want {
					if pl.Added {
						added++
						break
					}
				}
				if used {
					indexed++
					p := newPlacement(l)
					p.index.build(p)
					if p.index.private >= 0 {
						private++
					}
					if len(p.index.classes) > 1 {
						classes++
					}
					p.release()
				}
				l.Release()
			}
			t.Logf("%d rounds: %d refused, %d on a template's new node, %d through the index (%d with a private constraint, %d with several classes)",
				rounds, refused, added, indexed, private, classes)
			// With the forecast's scan budget the index answers only the
			// placements the scan misses, a handful in 600 rounds, so the
			// index's own cases are asked of the shorter scans alone.
			throughIndex := tc.scan < scanBudget
			if !testing.Short() && (refused == 0 || added == 0 || throughIndex && (private == 0 || classes == 0) || tc.scan == 0 && indexed < rounds/2) {
				t.Errorf("the generator must reach refusals, new nodes, private constraints and several classes through the index: %d refused, %d added, %d indexed, %d private, %d with classes",
					refused, added, indexed, private, classes)
			}
		})
	}
}

func TestPlaceAtACordonedNodeHoldingTheGlobalMinimum(t *testing.T) {
	// 3 zones of 40 nodes, a replica on each, and a cordoned node in
	// zone-a that the hostname constraint counts (nodeTaintsPolicy Ignore)
	// at 0: no node a replica can take is ever at the floor.
	for _, tc := range []struct {
		name        string
		constraints []v1.TopologySpreadConstraint
	}{
		{name: "zone then hostname", constraints: []v1.TopologySpreadConstraint{
			spreadtest.Constraint(1, v1.LabelTopologyZone).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).MatchLabel("app", "web").Obj(),
			spreadtest.Constraint(4, v1.LabelHostname).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).MatchLabel("app", "web").Obj(),
		}},
		{name: "hostname alone", constraints: []v1.TopologySpreadConstraint{
			spreadtest.Constraint(4, v1.LabelHostname).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).MatchLabel("app", "web").Obj(),
		}},
		{name: "hostname then zone with minDomains", constraints: []v1.TopologySpreadConstraint{
			spreadtest.Constraint(3, v1.LabelHostname).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).MatchLabel("app", "web").Obj(),
			spreadtest.Constraint(2, v1.LabelTopologyZone).NodeTaintsPolicy(v1.NodeInclusionPolicyIgnore).MatchLabel("app", "web").MinDomains(3).Obj(),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var snap spread.Snapshot
			snap.Nodes = append(snap.Nodes, spreadtest.MakeNode().Name("cordoned").Zone("zone-a").Cordoned().Obj())
			for i := range 120 {
				name := fmt.Sprintf("node-%03d", i)
				snap.Nodes = append(snap.Nodes, spreadtest.MakeNode().Name(name).Zone([]string{"zone-a", "zone-b", "zone-c"}[i%3]).Obj())
				snap.Pods = append(snap.Pods, spreadtest.MakePod().Namespace(shop).Name(fmt.Sprintf("old-%d", i)).Label("app", "web").Node(name).Obj())
			}
			pod := spreadtest.MakePod().Namespace(shop).Name("web-new").Label("app", "web")
			for _, c := range tc.constraints {
				pod.SpreadConstraint(c)
			}
			l, err := spread.IndexFromSnapshot(snap).Layout(pod.Obj(), spread.DetailNodes)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			want, wantRefusal, _ := placeAll(l, 400, scanBudget, true)
			got, gotRefusal, indexed := placeAll(l, 400, scanBudget, false)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("placements (-scan over every slot, +place):\n%s", diff)
			}
			if diff := cmp.Diff(wantRefusal, gotRefusal); diff != "" {
				t.Errorf("refusal (-scan over every slot, +place):\n%s", diff)
			}
			if len(want) < 200 || !indexed {
				t.Errorf("placed %d replicas, index used %v: want at least 200 placed, past the scan through the index", len(want), indexed)
			}
		})
	}
}
