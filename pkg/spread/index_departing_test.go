package spread_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// departed is where LayoutDeparting says one pod is counted, by name.
type departed struct {
	Node    string
	Domains []string
}

// departedOf names the positions of d in l: "" where a constraint does not
// count the pod.
func departedOf(l *spread.Layout, d *spread.Departures) []departed {
	var out []departed
	for k := range d.Names {
		dep := departed{Node: d.Nodes[k]}
		for i, at := range d.DomainsOf(k) {
			name := ""
			if at >= 0 {
				name = l.Domains[i].Names[at]
			}
			dep.Domains = append(dep.Domains, name)
		}
		out = append(out, dep)
	}
	return out
}

func TestLayoutDeparting(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode().Name("a1").Zone("a").Obj(),
		st.MakeNode().Name("b1").Zone("b").Obj(),
		st.MakeNode().Name("c1").Zone("c").Cordoned().Obj(),
	}
	pod := func(name, node string) *st.PodWrapper {
		return st.MakePod().Namespace("shop").Name(name).Label("app", "db").Label("pod-template-hash", "h1").Node(node)
	}
	zoneThenHost := func(taints v1.NodeInclusionPolicy) *v1.Pod {
		return pod("incoming", "").
			SpreadConstraint(st.Constraint(1, v1.LabelTopologyZone).DoNotSchedule().MatchLabel("app", "db").
				MatchLabelKeys("pod-template-hash").NodeTaintsPolicy(taints).Obj()).
			SpreadConstraint(st.Constraint(1, v1.LabelHostname).DoNotSchedule().MatchLabel("app", "db").Obj()).Obj()
	}
	pods := []*v1.Pod{
		pod("db-0", "a1").Obj(),
		pod("db-1", "c1").Obj(),
		pod("db-2", "b1").Label("pod-template-hash", "h0").Obj(),
		pod("db-3", "b1").Terminating().Obj(),
		pod("db-4", "").Phase(v1.PodPending).Obj(),
		st.MakePod().Namespace("other").Name("db-5").Label("app", "db").Node("a1").Obj(),
		pod("db-6", "gone").Obj(),
	}
	tests := []struct {
		name      string
		incoming  *v1.Pod
		departing []string
		want      []departed
	}{
		{
			name:      "a pod on a1 that both constraints count -> zone a, hostname a1",
			incoming:  zoneThenHost(v1.NodeInclusionPolicyIgnore),
			departing: []string{"db-0"},
			want:      []departed{{Node: "a1", Domains: []string{"a", "a1"}}},
		},
		{
			name:      "a pod on cordoned c1 under nodeTaintsPolicy Honor -> the zone constraint leaves c1 out, the hostname one counts it",
			incoming:  zoneThenHost(v1.NodeInclusionPolicyHonor),
			departing: []string{"db-1"},
			want:      []departed{{Node: "c1", Domains: []string{"", "c1"}}},
		},
		{
			name:      "the same under nodeTaintsPolicy Ignore -> zone c",
			incoming:  zoneThenHost(v1.NodeInclusionPolicyIgnore),
			departing: []string{"db-1"},
			want:      []departed{{Node: "c1", Domains: []string{"c", "c1"}}},
		},
		{
			name:      "a pod of revision h0, which matchLabelKeys leaves out of the zone constraint -> counted by hostname only",
			incoming:  zoneThenHost(v1.NodeInclusionPolicyIgnore),
			departing: []string{"db-2"},
			want:      []departed{{Node: "b1", Domains: []string{"", "b1"}}},
		},
		{
			name:      "a terminating pod, an unscheduled one, one of another namespace, one on a node that is gone, one that does not exist -> none counted",
			incoming:  zoneThenHost(v1.NodeInclusionPolicyIgnore),
			departing: []string{"db-3", "db-4", "db-5", "db-6", "db-7"},
			want: []departed{
				{Domains: []string{"", ""}}, {Domains: []string{"", ""}}, {Domains: []string{"", ""}},
				{Domains: []string{"", ""}}, {Domains: []string{"", ""}},
			},
		},
	}
	ix := spread.IndexFromSnapshot(spread.Snapshot{Nodes: nodes, Pods: pods})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ix.LayoutDeparting(tt.incoming, spread.DetailNodes, tt.departing)
			if err != nil {
				t.Fatal(err)
			}
			d := &l.Departing
			if diff := cmp.Diff(tt.departing, d.Names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, departedOf(l, d)); diff != "" {
				t.Errorf("departures (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLayoutDepartingLeavesTheCountsOfTheClusterWithoutThem holds, on
// random clusters, that LayoutDeparting's layout is Layout's, and that its
// counts less the departing pods, each taken off the domain it is said to
// be counted in, are the counts Snapshot.Check finds once those pods are
// gone; with each layout released, so that the next ones reuse its slices.
func TestLayoutDepartingLeavesTheCountsOfTheClusterWithoutThem(t *testing.T) {
	seed, rounds := randomRounds(t, 40, 5)
	taken := 0
	for round := range rounds {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		w := newWorld(rngChooser{rng})
		for range 300 {
			w.step()
		}
		snap := w.snapshot()
		for i := range 10 {
			where := fmt.Sprintf("seed %d round %d pod %d", seed, round, i)
			pod := w.incomingPod()
			var departing []string
			for range rng.IntN(16) {
				if name := fmt.Sprintf("p%d", rng.IntN(40)); !slices.Contains(departing, name) {
					departing = append(departing, name)
				}
			}
			l, err := w.ix.LayoutDeparting(pod, spread.DetailNodes, departing)
			plain, plainErr := w.ix.Layout(pod, spread.DetailNodes)
			if (err == nil) != (plainErr == nil) {
				t.Fatalf("%s: LayoutDeparting() error = %v, Layout() error = %v", where, err, plainErr)
			}
			if err != nil {
				continue
			}
			d := &l.Departing
			if diff := cmp.Diff(named(plain), named(l)); diff != "" {
				t.Fatalf("%s: LayoutDeparting's layout differs from Layout's (-Layout +LayoutDeparting):\n%s", where, diff)
			}
			got := named(l).Domains
			for k, dep := range departedOf(l, d) {
				for c, domain := range dep.Domains {
					if domain != "" {
						got[c][domain]--
						taken++
					}
				}
				if want := countedNode(w, pod.Namespace, departing[k]); dep.Node != want {
					t.Fatalf("%s: departing %s/%s counted on node %q, want %q", where, pod.Namespace, departing[k], dep.Node, want)
				}
			}
			without := spread.Snapshot{Nodes: snap.Nodes, Templates: snap.Templates}
			for _, p := range snap.Pods {
				if p.Namespace != pod.Namespace || !slices.Contains(departing, p.Name) {
					without.Pods = append(without.Pods, p)
				}
			}
			want, err := layoutOf(without, pod)
			if err != nil {
				t.Fatalf("%s: the check of the cluster without the departing pods: %v", where, err)
			}
			if diff := cmp.Diff(want.Domains, got); diff != "" {
				t.Fatalf("%s: the counts less %v differ from the cluster's without them (-without +less):\n%s\npod: %+v",
					where, departing, diff, pod.Spec)
			}
			// The next layouts reuse these slices, and must come out the
			// same.
			plain.Release()
			l.Release()
		}
	}
	if !testing.Short() && taken == 0 {
		t.Errorf("seed %d: no departing pod was counted by any constraint: the property says nothing", seed)
	}
	t.Logf("%d departures taken off a count", taken)
}

// countedNode is the node the index counts pod namespace/name on: its own
// when it is bound to a node of w, neither terminating nor finished.
func countedNode(w *world, namespace, name string) string {
	p := w.pods[namespace+"/"+name]
	if p == nil || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return ""
	}
	if _, ok := w.nodes[p.Spec.NodeName]; !ok {
		return ""
	}
	return p.Spec.NodeName
}
