package spread_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// TestSpreadsCountAsCheckDoes holds Index.Spreads to Snapshot.Check on
// random worlds: for the hard constraints of a pod, and for its soft ones
// made hard, the domains, their counts and the global minimum are Check's
// (with Explain, which lists every counted domain), and the skew is the
// largest count less that minimum.
func TestSpreadsCountAsCheckDoes(t *testing.T) {
	seed, rounds := randomRounds(t, 40, 5)
	compared := map[v1.UnsatisfiableConstraintAction]int{}
	for round := range rounds {
		w := newWorld(rngChooser{rand.New(rand.NewPCG(seed, uint64(round)))})
		for range 200 {
			w.step()
		}
		snap := w.snapshot()
		for i := range 20 {
			pod := w.incomingPod()
			where := fmt.Sprintf("seed %d round %d pod %d", seed, round, i)
			got, err := w.ix.Spreads(pod)
			for _, when := range []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway} {
				asHard, positions := onlyAsHard(pod, when)
				want, wantErr := snap.Check(asHard, spread.Options{Explain: true})
				if (err == nil) != (wantErr == nil) {
					// An invalid constraint of either kind fails Spreads.
					if err == nil {
						t.Fatalf("%s: Spreads() succeeded, Check() of the %s constraints failed: %v", where, when, wantErr)
					}
					continue
				}
				if err != nil {
					continue
				}
				for j, c := range want.Constraints {
					s := got[positions[j]]
					largest := 0
					for _, n := range c.Domains {
						largest = max(largest, n)
					}
					wantSpread := spread.Spread{
						Index: positions[j], TopologyKey: c.TopologyKey, MaxSkew: c.MaxSkew, WhenUnsatisfiable: when,
						Domains: c.Domains, DomainCount: c.DomainCount, Min: c.GlobalMin, Max: largest, Skew: largest - c.GlobalMin,
					}
					compared[when]++
					if diff := cmp.Diff(wantSpread, s); diff != "" {
						t.Fatalf("%s: constraint %d (-Check +Spreads):\n%s\npod: %+v", where, positions[j], diff, pod.Spec)
					}
				}
			}
		}
	}
	if compared[v1.DoNotSchedule] == 0 || compared[v1.ScheduleAnyway] == 0 {
		t.Errorf("compared %v constraints: the worlds exercised too little", compared)
	}
}

// onlyAsHard returns a copy of pod holding only its constraints of kind
// when, made DoNotSchedule, and their positions in pod.
func onlyAsHard(pod *v1.Pod, when v1.UnsatisfiableConstraintAction) (*v1.Pod, []int) {
	p := pod.DeepCopy()
	p.Spec.TopologySpreadConstraints = nil
	var positions []int
	for i, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == when {
			c.WhenUnsatisfiable = v1.DoNotSchedule
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, *c.DeepCopy())
			positions = append(positions, i)
		}
	}
	return p, positions
}
