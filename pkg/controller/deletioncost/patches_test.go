package deletioncost

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// This file drives the keeper through the scale-ups, scale-downs and
// rollouts of one Deployment, the pods placed as the scheduler places them
// and deleted as the ReplicaSet controller deletes them, the keeper hearing
// of each pod event when a schedule says, and counts the patches it sends
// per pod created.

// schedule says which of the held pod events the keeper hears before each
// of its syncs. A pod's own events keep their order.
type schedule struct {
	name string
	// rng, when set, breaks the scheduler's and the ReplicaSet
	// controller's ties, and delivers a random part of the held events in
	// a random order.
	seed uint64
	pick func(s *sim) []int
}

func inOrder(s *sim) []int { return heads(s.h.pods.late) }

// oneBehind delivers every held event but the newest: each event comes a
// sync after the index counted it.
func oneBehind(s *sim) []int {
	all := heads(s.h.pods.late)
	if n := len(s.h.pods.late); n > 0 {
		last := s.h.pods.late[n-1].key
		all = slices.DeleteFunc(all, func(i int) bool { return s.h.pods.late[i].key == last })
	}
	return all
}

// newestFirst delivers the held events of the pod that changed last first.
func newestFirst(s *sim) []int {
	all := heads(s.h.pods.late)
	slices.Reverse(all)
	return all
}

// randomly delivers a random part of the held events in a random order.
func randomly(s *sim) []int {
	all := heads(s.h.pods.late)
	s.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:s.rng.IntN(len(all)+1)]
}

// heads returns the position of the first held event of each pod, in the
// order the index counted them.
func heads(late []lateCall) []int {
	seen := map[string]bool{}
	var out []int
	for i, c := range late {
		if !seen[c.key] {
			seen[c.key] = true
			out = append(out, i)
		}
	}
	return out
}

func schedules() []schedule {
	out := []schedule{
		{name: "events at once", pick: inOrder},
		{name: "each event a sync late", pick: oneBehind},
		{name: "the newest pod's events first", pick: newestFirst},
	}
	for seed := range uint64(20) {
		out = append(out, schedule{name: "random delivery and ties, seed " + strconv.FormatUint(seed, 10), seed: seed + 1, pick: randomly})
	}
	return out
}

// sim is one Deployment's ReplicaSets under a keeper.
type sim struct {
	t       testing.TB
	h       *harness
	sched   schedule
	rng     *rand.Rand
	serial  int
	created int
	// patches is the applies since the start settled, base those of
	// the start.
	patches, base int
}

// revisionSet is ReplicaSet web-HASH with a template carrying c.
func revisionSet(hash string, c v1.TopologySpreadConstraint) *appsv1.ReplicaSet {
	rs := st.MakeReplicaSet().Name("web-"+hash).MatchLabel("app", "web").MatchLabel("pod-template-hash", hash).Obj()
	rs.Spec.Template.Labels = map[string]string{"app": "web", "pod-template-hash": hash}
	rs.Spec.Template.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{c}
	return rs
}

// newSim starts a keeper over ReplicaSets h1 (holding perZone pods in each
// zone) and h2 (none), both with constraint c, and settles its start.
func newSim(t testing.TB, sched schedule, c v1.TopologySpreadConstraint, perZone int) *sim {
	s := &sim{t: t, sched: sched}
	if sched.seed != 0 {
		s.rng = rand.New(rand.NewPCG(sched.seed, 37))
	}
	var pods []*v1.Pod
	for i := range 3 * perZone {
		z := "abc"[i%3 : i%3+1]
		pods = append(pods, s.pod("h1", fmt.Sprintf("%s-%d", z, i/3%2), c))
	}
	s.h = newHarness(t, world{owners: []client.Object{revisionSet("h1", c), revisionSet("h2", c)}, pods: pods})
	s.base = len(s.h.settle(t))
	s.h.pods.holding = true
	return s
}

func (s *sim) pod(hash, node string, c v1.TopologySpreadConstraint) *v1.Pod {
	s.serial++
	return st.MakePod().Name(fmt.Sprintf("web-%s-%03d", hash, s.serial)).Label("app", "web").Label("pod-template-hash", hash).
		ControlledBy("ReplicaSet", "apps/v1", "web-"+hash).Node(node).Phase(v1.PodRunning).SpreadConstraint(c).Obj()
}

// zoneCounts returns the pods per zone of revision hash ("": every one).
func (s *sim) zoneCounts(hash string) map[string]int {
	out := map[string]int{}
	for _, p := range s.h.pods.full {
		if hash == "" || p.Labels["pod-template-hash"] == hash {
			out[p.Spec.NodeName[:1]]++
		}
	}
	return out
}

// create places a pod of revision hash as the scheduler does under a zone
// constraint counting every revision (or its own, which a rollout's new
// revision spreads the same way): in the zone with the fewest pods, ties
// broken in zone order or at random, on its emptier node.
func (s *sim) create(hash string, c v1.TopologySpreadConstraint) {
	counts := s.zoneCounts("")
	zones := []string{"a", "b", "c"}
	if s.rng != nil {
		s.rng.Shuffle(3, func(i, j int) { zones[i], zones[j] = zones[j], zones[i] })
	}
	best := slices.MinFunc(zones, func(a, b string) int { return counts[a] - counts[b] })
	nodes := map[string]int{}
	for _, p := range s.h.pods.full {
		nodes[p.Spec.NodeName]++
	}
	node := best + "-0"
	if nodes[best+"-1"] < nodes[node] {
		node = best + "-1"
	}
	s.created++
	s.h.pods.set(s.pod(hash, node, c))
	s.sync()
}

// scaleDown deletes n pods of revision hash as the ReplicaSet controller
// does: the lowest deletion cost the pods carry first, ties to the newest
// or at random.
func (s *sim) scaleDown(hash string, n int) {
	for range n {
		var ps []*v1.Pod
		for _, p := range s.h.pods.full {
			if p.Labels["pod-template-hash"] == hash {
				ps = append(ps, p)
			}
		}
		if s.rng != nil {
			s.rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		} else {
			slices.SortFunc(ps, func(a, b *v1.Pod) int { return -compareNames(a.Name, b.Name) })
		}
		victim := slices.MinFunc(ps, rankForDeletion)
		s.h.pods.delete(victim.Namespace, victim.Name)
		s.sync()
	}
}

// rankForDeletion is ActivePodsWithRanks.Less up to the cost, for bound
// pods: not Running or not Ready first, then the lower cost.
func rankForDeletion(a, b *v1.Pod) int {
	if ua, ub := spread.Unready(a), spread.Unready(b); ua != ub {
		if ua {
			return -1
		}
		return 1
	}
	return int(carriedCost(a)) - int(carriedCost(b))
}

func compareNames(a, b string) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

func carriedCost(p *v1.Pod) int32 {
	n, err := strconv.ParseInt(p.Annotations[spread.DeletionCostAnnotation], 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// sync delivers the held events the schedule picks, runs the keeper's sync
// and sends what it queued.
func (s *sim) sync() {
	f := s.h.pods
	f.mu.Lock()
	picked := s.sched.pick(s)
	var calls []func()
	for _, i := range picked {
		calls = append(calls, f.late[i].call)
	}
	f.late = slices.Delete(slices.Clone(f.late), 0, 0)
	keep := f.late[:0:0]
	for i, c := range f.late {
		if !slices.Contains(picked, i) {
			keep = append(keep, c)
		}
	}
	f.late = keep
	f.mu.Unlock()
	for _, call := range calls {
		call()
	}
	if err := s.h.k.sync(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
	for s.h.k.writes.queue.Len() > 0 {
		key, _ := s.h.k.writes.queue.Get()
		s.h.k.writes.write(s.t.Context(), key, s.h.pods, s.h.patcher, s.h.k.metrics, s.h.k.log)
		s.h.k.writes.queue.Done(key)
	}
	s.h.patcher.mu.Lock()
	s.patches = len(s.h.patcher.applied) - s.base
	s.h.patcher.mu.Unlock()
}

// finish delivers every held event and syncs until nothing is left.
func (s *sim) finish() {
	for range 100 {
		s.h.pods.mu.Lock()
		idle := len(s.h.pods.late) == 0
		s.h.pods.mu.Unlock()
		if idle && s.h.k.writes.pending() == 0 {
			return
		}
		pick := s.sched.pick
		s.sched.pick = inOrder
		s.sync()
		s.sched.pick = pick
	}
	s.t.Fatal("the keeper never settled")
}

// patchCase is one of the cases the keeper's writes are bounded in.
type patchCase struct {
	name string
	// bench names the case in BenchmarkKeeperPatchesPerPod.
	bench string
	run   func(s *sim, c v1.TopologySpreadConstraint)
	// constraint is the Deployment's; perZone the pods of h1 in each zone
	// at the start.
	constraint v1.TopologySpreadConstraint
	perZone    int
}

func patchCases() []patchCase {
	everyRevision := st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "web").Obj()
	return []patchCase{
		{
			name: "steady creation: 12 pods, each settled before the next", bench: "steady", constraint: zoneConstraint(), perZone: 4,
			run: func(s *sim, c v1.TopologySpreadConstraint) {
				for range 12 {
					s.create("h1", c)
					s.finish()
				}
			},
		},
		{
			name: "a burst of 12 pods round-robin over 3 zones", bench: "burst", constraint: zoneConstraint(), perZone: 4,
			run: func(s *sim, c v1.TopologySpreadConstraint) {
				for range 12 {
					s.create("h1", c)
				}
			},
		},
		{
			// The Deployment controller at maxSurge 25% (8) and
			// maxUnavailable 25% (7), every pod Ready at once: h2 to 8,
			// h1 to 15, h2 to 23, h1 to 0, h2 to 30.
			name: "a rolling update of 30 (10 per zone, maxSurge 25%) whose zone constraint counts every revision", bench: "rolling-update", constraint: everyRevision, perZone: 10,
			run: func(s *sim, c v1.TopologySpreadConstraint) {
				const desired, surge, unavailable = 30, 8, 7
				old, cur := desired, 0
				for cur < desired || old > 0 {
					up := min(desired, desired+surge-old) - cur
					for range up {
						s.create("h2", c)
					}
					cur += up
					down := min(old, old+cur-(desired-unavailable))
					s.scaleDown("h1", down)
					old -= down
				}
			},
		},
		{
			name: "a scale-up from 12 to 24, then a scale-down to 12", bench: "scale-up-down", constraint: zoneConstraint(), perZone: 4,
			run: func(s *sim, c v1.TopologySpreadConstraint) {
				for range 12 {
					s.create("h1", c)
				}
				s.finish()
				s.scaleDown("h1", 12)
				if got := s.zoneCounts("h1"); got["a"] != 4 || got["b"] != 4 || got["c"] != 4 {
					s.t.Errorf("%s: the scale-down to 12 left %v, want 4 in each zone", s.sched.name, got)
				}
			},
		},
	}
}

// play plays tc under sched and returns the patches per pod created.
func (tc patchCase) play(t testing.TB, sched schedule) (*sim, float64) {
	s := newSim(t, sched, tc.constraint, tc.perZone)
	tc.run(s, tc.constraint)
	s.finish()
	return s, float64(s.patches) / float64(s.created)
}

// maxPatchesPerPod is the bound the keeper's writes hold in every case.
const maxPatchesPerPod = 1.05

func TestKeeperPatchesPerPodCreated(t *testing.T) {
	for _, tc := range patchCases() {
		t.Run(tc.name, func(t *testing.T) {
			worst, worstName := 0.0, ""
			for _, sched := range schedules() {
				s, got := tc.play(t, sched)
				if got > maxPatchesPerPod {
					t.Errorf("%s: %d patches for %d pods created, %.2f per pod; want at most %.2f", sched.name, s.patches, s.created, got, maxPatchesPerPod)
				}
				if got > worst {
					worst, worstName = got, sched.name
				}
				// The costs the pods carry at the end are the order's.
				for _, p := range s.h.pods.full {
					w := s.h.k.workloads[workloadKey{KindReplicaSet, "default", "web-" + p.Labels["pod-template-hash"]}]
					if want, ok := w.order.Cost(p.Name); !ok || carriedCost(p) != want {
						t.Errorf("%s: %s carries %d, the order's cost is %d (%v)", sched.name, p.Name, carriedCost(p), want, ok)
					}
				}
			}
			t.Logf("worst: %.3f patches per pod created (%s)", worst, worstName)
		})
	}
}

// BenchmarkKeeperPatchesPerPod plays each case with every event a sync
// late and reports the patches per pod created (patches/pod): at most
// 1.05 (TestKeeperPatchesPerPodCreated bounds every schedule).
func BenchmarkKeeperPatchesPerPod(b *testing.B) {
	for _, tc := range patchCases() {
		b.Run(tc.bench, func(b *testing.B) {
			var got float64
			for b.Loop() {
				_, got = tc.play(b, schedule{name: "late", pick: oneBehind})
			}
			b.ReportMetric(got, "patches/pod")
		})
	}
}

func TestKeeperOrdersPodsThatAreNotReadyAsTheControllerDoes(t *testing.T) {
	// Each of zone c's 4 pods in turn turns not Ready; the ReplicaSet is
	// then scaled from 12 to 10. The controller deletes that pod first,
	// whatever its cost, then the cheapest Ready one: the keeper must have
	// costed the Ready pods as if it were gone.
	for slot := range 4 {
		t.Run(fmt.Sprintf("zone c's pod %d of 4 (by cost, cheapest first) not Ready, scaled to 10 -> 4/3/3 in some order", slot+1), func(t *testing.T) {
			for _, sched := range schedules() {
				s := newSim(t, sched, zoneConstraint(), 4)
				var zoneC []*v1.Pod
				for _, p := range s.h.pods.full {
					if p.Spec.NodeName[:1] == "c" {
						zoneC = append(zoneC, p)
					}
				}
				slices.SortFunc(zoneC, func(a, b *v1.Pod) int { return int(carriedCost(a)) - int(carriedCost(b)) })
				p := zoneC[slot].DeepCopy()
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
				s.h.pods.set(p)
				s.sync()
				s.finish()
				s.scaleDown("h1", 2)
				got := s.zoneCounts("h1")
				counts := []int{got["a"], got["b"], got["c"]}
				if slices.Max(counts)-slices.Min(counts) > 1 {
					t.Errorf("%s: the scale-down to 10 left %v, skew %d; want at most 1", sched.name, got, slices.Max(counts)-slices.Min(counts))
				}
			}
		})
	}
}
