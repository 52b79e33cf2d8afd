package forecast

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/engine"
	"github.com/spreadguard/spreadguard/pkg/policy/policytest"
	"github.com/spreadguard/spreadguard/pkg/spread"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// randomWorld is a cluster of 1 to 4 zones of 0 to 3 nodes, some cordoned
// or tainted, some of the Deployment's pods already bound, a policy of one
// or two hard constraints, and maybe a node template.
func randomWorld(rng *rand.Rand) (*world, *appsv1.Deployment, int32) {
	w := makeWorld()
	zones := []string{"zone-a", "zone-b", "zone-c", "zone-d"}[:1+rng.IntN(4)]
	var nodes []string
	for _, z := range zones {
		for i := range rng.IntN(4) {
			n := spreadtest.MakeNode().Name(fmt.Sprintf("%s-%d", z, i)).Zone(z)
			switch rng.IntN(6) {
			case 0:
				n.Cordoned()
			case 1:
				n.Taint("dedicated", "batch", v1.TaintEffectNoSchedule)
			}
			w.node(n.Obj())
			nodes = append(nodes, fmt.Sprintf("%s-%d", z, i))
		}
	}
	d := deployment(int32(1 + rng.IntN(12)))
	hash := PodTemplateHash(&d.Spec.Template, nil)
	existing := int32(0)
	if len(nodes) > 0 {
		for i := range rng.IntN(5) {
			existing++
			w.pod(spreadtest.MakePod().Namespace(shop).Name(fmt.Sprintf("web-old-%d", i)).Label("app", "web").
				Label(appsv1.DefaultDeploymentUniqueLabelKey, hash).Node(nodes[rng.IntN(len(nodes))]).Obj())
		}
	}
	taints := []v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}
	zone := policytest.MakeConstraint().Zone().MaxSkew(int32(1 + rng.IntN(2))).DoNotSchedule().NodeTaintsPolicy(taints[rng.IntN(2)])
	if rng.IntN(4) == 0 {
		zone.MinDomains(int32(2 + rng.IntN(3)))
	}
	p := policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(zone.Obj())
	if rng.IntN(3) == 0 {
		p = policytest.MakeSpreadPolicy().Namespace(shop).Name("zones").Constraint(zone.Obj(),
			policytest.MakeConstraint().Hostname().MaxSkew(int32(1+rng.IntN(2))).DoNotSchedule().Obj())
	}
	w.policy(p.Obj())
	if rng.IntN(3) == 0 {
		w.template(spread.Template{Name: "pool", Labels: map[string]string{v1.LabelTopologyZone: zones[rng.IntN(len(zones))]}})
	}
	return w, d, existing
}

// admitOneByOne admits the forecast's replicas through the pod path, each
// bound to the node the forecast chose once admitted, and returns the
// first replica the pod path refuses (0 if none). It fails t where the
// forecast's node is not one the pod path finds feasible.
func admitOneByOne(t *testing.T, w *world, wl *Workload, f *Forecast, seed string) int32 {
	t.Helper()
	ix := spread.IndexFromSnapshot(w.snap)
	src := withOwner(w.sources(), wl.owner)
	templates := map[string]spread.Template{}
	for _, tpl := range w.snap.Templates {
		templates[tpl.Name] = tpl
	}
	for r := wl.Existing + 1; r <= wl.Replicas; r++ {
		pod := wl.Pod.DeepCopy()
		pod.Name = fmt.Sprintf("web-new-%d", r)
		rev, err := engine.ReviewPod(pod, src, ix, engine.Config{})
		if err != nil {
			t.Fatalf("%s: replica %d: %v", seed, r, err)
		}
		if rev.Validation.Result != nil && rev.Validation.Result.Verdict == spread.VerdictUnsatisfiable {
			return r
		}
		i := int(r - wl.Existing - 1)
		if i >= len(f.Placements) {
			t.Fatalf("%s: the pod path admits replica %d, which the forecast refuses (%+v)", seed, r, f.Refused)
		}
		placed := f.Placements[i]
		res := rev.Validation.Result
		if !placed.NewNode && !slices.Contains(res.FeasibleNodes, placed.Node) {
			t.Fatalf("%s: replica %d forecast on %s, which the pod path does not find feasible (%v)", seed, r, placed.Node, res.FeasibleNodes)
		}
		if placed.NewNode {
			if res.Verdict != spread.VerdictFeasibleOnNewNode || !slices.Contains(res.FeasibleTemplates, placed.Template) {
				t.Fatalf("%s: replica %d forecast on a new node of %s; the pod path says %s, templates %v",
					seed, r, placed.Template, res.Verdict, res.FeasibleTemplates)
			}
			n := spreadtest.MakeNode().Name(placed.Node)
			for k, v := range templates[placed.Template].Labels {
				n.Label(k, v)
			}
			ix.AddNode(n.Obj())
		}
		bound := rev.Pod.DeepCopy()
		bound.Spec.NodeName = placed.Node
		ix.AddPod(bound)
	}
	return 0
}

func TestForecastAgreesWithThePodPathOnTheFirstRefusedReplica(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rounds := 400
	if testing.Short() {
		rounds = 40
	}
	refused, placedOnTemplates := 0, 0
	for round := range rounds {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		w, d, existing := randomWorld(rng)
		wl, err := Of(d, existing)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Run(wl, w.sources(), spread.IndexFromSnapshot(w.snap), engine.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if f.Skipped != "" {
			continue
		}
		label := fmt.Sprintf("seed %d round %d", seed, round)
		want := admitOneByOne(t, w, wl, f, label)
		got := int32(0)
		if f.Refused != nil {
			got = f.Refused.Replica
			refused++
		}
		if got != want {
			t.Errorf("%s: the forecast refuses replica %d first, the pod path %d (0: none); placements %+v",
				label, got, want, f.Placements)
		}
		for _, p := range f.Placements {
			if p.NewNode {
				placedOnTemplates++
				break
			}
		}
	}
	t.Logf("%d rounds: %d with a refused replica, %d placing on a template's new node", rounds, refused, placedOnTemplates)
	if !testing.Short() && (refused == 0 || refused == rounds || placedOnTemplates == 0) {
		t.Errorf("the generator must reach refusals, clean forecasts and new nodes: %d refused, %d on templates", refused, placedOnTemplates)
	}
}
