package spread_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// TestDenialMessageSummarisesManyNodes pins the whole message of a
// hostname-level denial with more domains and more excluded nodes than a
// message lists: nodes h00-h11 hold 2 foo=bar pods each, h12-h29 are empty
// but tainted, and with nodeTaintsPolicy Ignore they pin the minimum at 0.
func TestDenialMessageSummarisesManyNodes(t *testing.T) {
	var snap spread.Snapshot
	for i := range 30 {
		name := fmt.Sprintf("h%02d", i)
		n := zoneNode(name, []string{"a", "b", "c"}[i%3])
		if i < 12 {
			for k := range 2 {
				snap.Pods = append(snap.Pods, st.MakePod().Name(fmt.Sprintf("%s-%d", name, k)).Label("foo", "bar").Node(name).Obj())
			}
		} else {
			n.Taint("dedicated", "batch", v1.TaintEffectNoSchedule)
		}
		snap.Nodes = append(snap.Nodes, n.Obj())
	}
	pod := incoming().SpreadConstraint(hostConstraint().Obj()).Obj()
	tests := []struct {
		name   string
		detail spread.MessageDetail
		want   string
	}{
		{
			name:   "detail nodes -> the 8 fullest nodes, the first names of each kind and a count of the rest",
			detail: spread.DetailNodes,
			want: "spec.topologySpreadConstraints[0] (topologyKey kubernetes.io/hostname, maxSkew 1) cannot be satisfied on any node. " +
				`Matching pods (selector "foo=bar") per kubernetes.io/hostname: h00=2, h01=2, h02=2, h03=2, h04=2, h05=2, h06=2, h07=2, and 22 more domains with 0 to 2. ` +
				"The global minimum of spec.topologySpreadConstraints[0] is 0: 18 domains have the fewest matching pods (h12, h13, h14, ...). " +
				"Every node the pod can use is in a domain where the skew would exceed 1: node h00 (2 + 1 - 0 = 3), node h01 (2 + 1 - 0 = 3), node h02 (2 + 1 - 0 = 3), node h03 (2 + 1 - 0 = 3), node h04 (2 + 1 - 0 = 3), .... " +
				"18 nodes (h12, h13, h14, ...) are excluded: untolerated taint dedicated=batch:NoSchedule. " +
				"Remedy: set nodeTaintsPolicy: Honor so tainted and cordoned nodes do not pin the global minimum at 0, or add capacity the pod can use in node h12.",
		},
		{
			name:   "detail domains -> nodes counted by how many pods they hold, no name",
			detail: spread.DetailDomains,
			want: "spec.topologySpreadConstraints[0] (topologyKey kubernetes.io/hostname, maxSkew 1) cannot be satisfied on any node. " +
				`Matching pods (selector "foo=bar") per kubernetes.io/hostname: 12 nodes with 2, 18 nodes with 0. ` +
				"The global minimum of spec.topologySpreadConstraints[0] is 0: 18 nodes have the fewest matching pods. " +
				"Every node the pod can use is in a domain where the skew would exceed 1: a node (2 + 1 - 0 = 3), a node (2 + 1 - 0 = 3), a node (2 + 1 - 0 = 3), a node (2 + 1 - 0 = 3), a node (2 + 1 - 0 = 3), .... " +
				"18 nodes are excluded: a taint the pod does not tolerate. " +
				"Remedy: set nodeTaintsPolicy: Honor so tainted and cordoned nodes do not pin the global minimum at 0, or add capacity the pod can use in a node.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, explain := range []bool{false, true} {
				got, err := checkBoth(t, snap, pod, spread.Options{Detail: tt.detail, Explain: explain})
				if err != nil {
					t.Fatalf("Check(Explain %v) error = %v", explain, err)
				}
				if diff := cmp.Diff(tt.want, got.Message); diff != "" {
					t.Errorf("Check(Explain %v) message (-want +got):\n%s", explain, diff)
				}
			}
		})
	}
}

// TestDenialMessageAgreesOnClustersLargerThanItsSamples holds the message
// worded from the index's aggregates equal to the one worded from per-node
// reports (Snapshot, and Index with Explain) on clusters of up to 90
// nodes: more domains and more nodes of a kind than a message lists, so
// that the aggregates' samples overflow.
func TestDenialMessageAgreesOnClustersLargerThanItsSamples(t *testing.T) {
	seed, rounds := randomRounds(t, 30, 10)
	denials := 0
	for round := range rounds {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		w := newWorld(rngChooser{rng})
		var snap spread.Snapshot
		nodes := 11 + rng.IntN(80)
		for i := range nodes {
			snap.Nodes = append(snap.Nodes, w.randomNode(fmt.Sprintf("n%d", i)))
		}
		for i := range rng.IntN(3 * nodes) {
			p := w.randomPod(fmt.Sprintf("p%d", i), pick(w.c, "default", "other"))
			if p.Spec.NodeName != "" && p.Spec.NodeName != "ghost" {
				p.Spec.NodeName = snap.Nodes[rng.IntN(nodes)].Name
			}
			snap.Pods = append(snap.Pods, p)
		}
		for range 10 {
			pod := w.incomingPod()
			for _, detail := range []spread.MessageDetail{spread.DetailNodes, spread.DetailDomains} {
				got, err := checkBoth(t, snap, pod, spread.Options{Detail: detail})
				if err != nil {
					continue
				}
				explained, err := checkBoth(t, snap, pod, spread.Options{Detail: detail, Explain: true})
				if err != nil {
					t.Fatalf("round %d: Check(Explain) error = %v, without Explain none", round, err)
				}
				if explained.Message != got.Message {
					t.Fatalf("round %d, detail %s: message with Explain\n%s\nwithout\n%s", round, detail, explained.Message, got.Message)
				}
				if got.Verdict == spread.VerdictUnsatisfiable {
					denials++
				}
			}
		}
	}
	if denials == 0 {
		t.Fatalf("no incoming pod was denied in %d rounds: the test compared no message", rounds)
	}
	t.Logf("%d denials compared", denials)
}

// TestDenialMessageWithManyHostnamesOneShared covers the index's slowest
// way to find a constraint's domains: more than 64 hostname values, one of
// them carried by two nodes, so that a domain is not a node.
func TestDenialMessageWithManyHostnamesOneShared(t *testing.T) {
	var snap spread.Snapshot
	for i := range 70 {
		name := fmt.Sprintf("h%02d", i)
		n := zoneNode(name, []string{"a", "b", "c"}[i%3])
		switch {
		case i < 12:
			snap.Pods = append(snap.Pods, st.MakePod().Name(name).Label("foo", "bar").Node(name).Obj())
		case i == 69:
			n.Label(v1.LabelHostname, "h68").Taint("dedicated", "batch", v1.TaintEffectNoSchedule)
		default:
			n.Taint("dedicated", "batch", v1.TaintEffectNoSchedule)
		}
		snap.Nodes = append(snap.Nodes, n.Obj())
	}
	pod := incoming().SpreadConstraint(st.Constraint(1, v1.LabelHostname).MatchLabel("foo", "bar").Obj()).Obj()
	for _, detail := range []spread.MessageDetail{spread.DetailNodes, spread.DetailDomains} {
		got, err := checkBoth(t, snap, pod, spread.Options{Detail: detail})
		if err != nil {
			t.Fatalf("Check(%s) error = %v", detail, err)
		}
		if got.Verdict != spread.VerdictUnsatisfiable || got.Constraints[0].DomainCount != 69 {
			t.Fatalf("Check(%s) = %s over %d domains, want Unsatisfiable over 69 (70 nodes, one hostname shared)",
				detail, got.Verdict, got.Constraints[0].DomainCount)
		}
	}
}
