package spread_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/spread"
	st "github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// chooser makes the random choices of a world: a seeded generator in the
// property test, the fuzzer's bytes in the fuzz target.
type chooser interface{ intn(n int) int }

type rngChooser struct{ *rand.Rand }

func (r rngChooser) intn(n int) int { return r.IntN(n) }

// byteChooser reads choices from data, and chooses 0 once it runs out.
type byteChooser struct{ data []byte }

func (b *byteChooser) intn(n int) int {
	if len(b.data) == 0 || n <= 1 {
		return 0
	}
	v := int(b.data[0])
	b.data = b.data[1:]
	return v % n
}

func pick[T any](c chooser, items ...T) T { return items[c.intn(len(items))] }

// world is a small cluster driven by random events. The pools are small on
// purpose, so that events keep hitting the same nodes, pods, label values
// and groups.
type world struct {
	c         chooser
	ix        *spread.Index
	nodes     map[string]*v1.Node
	pods      map[string]*v1.Pod
	templates []spread.Template
}

func newWorld(c chooser) *world {
	return &world{c: c, ix: spread.NewIndex(), nodes: map[string]*v1.Node{}, pods: map[string]*v1.Pod{}}
}

func (w *world) randomNode(name string) *v1.Node {
	c := w.c
	n := st.MakeNode().Name(name)
	if c.intn(8) == 0 {
		n.RemoveLabel(v1.LabelHostname)
	} else if c.intn(10) == 0 {
		n.Label(v1.LabelHostname, "shared-host")
	}
	if c.intn(8) > 0 {
		n.Zone(pick(c, "a", "b", "c"))
	}
	if c.intn(2) == 0 {
		n.Label("rack", pick(c, "r0", "r1", "r2"))
	}
	if c.intn(2) == 0 {
		n.Label("gen", pick(c, "1", "5", "10", "x"))
	}
	if c.intn(2) == 0 {
		n.Label("disk", pick(c, "ssd", "hdd"))
	}
	for range c.intn(3) {
		t := pick(c,
			v1.Taint{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
			v1.Taint{Key: "dedicated", Value: "web", Effect: v1.TaintEffectNoExecute},
			v1.Taint{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule},
			v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule},
		)
		n.Taint(t.Key, t.Value, t.Effect)
	}
	if c.intn(6) == 0 {
		n.Unschedulable()
	}
	return n.Obj()
}

func (w *world) randomPod(name, namespace string) *v1.Pod {
	c := w.c
	p := st.MakePod().Name(name).Namespace(namespace).Label("app", pick(c, "a", "b"))
	if c.intn(2) == 0 {
		p.Label("tier", pick(c, "web", "db"))
	}
	if c.intn(2) == 0 {
		p.Label("pod-template-hash", pick(c, "h1", "h2"))
	}
	switch c.intn(6) {
	case 0:
	case 1:
		p.Node("ghost")
	default:
		p.Node(fmt.Sprintf("n%d", c.intn(10)))
	}
	switch c.intn(8) {
	case 0:
		p.Phase(v1.PodSucceeded)
	case 1:
		p.Phase(v1.PodFailed)
	case 2:
		p.Phase(v1.PodPending)
	default:
		p.Phase(v1.PodRunning)
	}
	if c.intn(8) == 0 {
		p.Terminating()
	}
	pod := p.Obj()
	pod.Spec.TopologySpreadConstraints = w.carriedConstraints()
	return pod
}

// carriedConstraints draws what a pod carries: nothing (it predates
// spreadguard), one of two injected lists that many pods share, or a list
// of its own.
func (w *world) carriedConstraints() []v1.TopologySpreadConstraint {
	switch w.c.intn(4) {
	case 0:
		return nil
	case 1:
		return []v1.TopologySpreadConstraint{st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "a").Obj()}
	case 2:
		return []v1.TopologySpreadConstraint{st.Constraint(1, v1.LabelTopologyZone).MatchLabel("app", "a").Obj(),
			st.Constraint(1, v1.LabelHostname).ScheduleAnyway().MatchLabel("app", "a").Obj()}
	}
	return []v1.TopologySpreadConstraint{w.randomConstraint()}
}

// randomTemplates draws the nodes an autoscaler could add: in zones that
// exist and in a zone no node has, tainted, labelled so that affinity fails,
// with a hostname of their own or one an existing node has.
func (w *world) randomTemplates() []spread.Template {
	c := w.c
	var ts []spread.Template
	for i := range c.intn(4) {
		n := w.randomNode(fmt.Sprintf("t%d", i))
		if c.intn(3) == 0 {
			n.Labels[v1.LabelTopologyZone] = "d"
		}
		switch c.intn(4) {
		case 0:
			n.Labels[v1.LabelHostname] = pick(c, "n1", "shared-host", "own-host")
		default:
			delete(n.Labels, v1.LabelHostname)
		}
		// A name used twice: the later template wins.
		name := pick(c, "pool-a", "pool-b", "pool-c", fmt.Sprintf("group-%d", i))
		ts = append(ts, spread.Template{Name: name, Source: "NodePool " + name, Labels: n.Labels, Taints: n.Spec.Taints})
	}
	return ts
}

// step applies one random event to the index and to the plain state.
func (w *world) step() {
	c := w.c
	nodeName := fmt.Sprintf("n%d", c.intn(10))
	ns := pick(c, "default", "other")
	podName := fmt.Sprintf("p%d", c.intn(40))
	podKey := ns + "/" + podName
	switch c.intn(9) {
	case 8:
		w.templates = w.randomTemplates()
		w.ix.SetTemplates(w.templates)
	case 0:
		n := w.randomNode(nodeName)
		w.ix.AddNode(n)
		w.nodes[nodeName] = n
	case 1:
		n := w.randomNode(nodeName)
		w.ix.UpdateNode(w.nodes[nodeName], n)
		w.nodes[nodeName] = n
	case 2:
		if n := w.nodes[nodeName]; n != nil {
			w.ix.DeleteNode(n)
			delete(w.nodes, nodeName)
		}
	case 3, 4:
		p := w.randomPod(podName, ns)
		w.addPod(p)
		w.pods[podKey] = p
	case 5, 6:
		old := w.pods[podKey]
		p := w.randomPod(podName, ns)
		if old != nil && c.intn(2) == 0 {
			// A small change of a known pod: the informer's usual update.
			p = old.DeepCopy()
			switch c.intn(5) {
			case 0:
				p.Spec.NodeName = fmt.Sprintf("n%d", c.intn(10))
			case 1:
				p.Labels["app"] = pick(c, "a", "b")
			case 2:
				p.Status.Phase = pick(c, v1.PodSucceeded, v1.PodRunning)
			case 3:
				p.DeletionTimestamp = &st.DeletionTime
			case 4:
				// The API server never changes a pod's constraints; the
				// index must tally them right if it did.
				p.Spec.TopologySpreadConstraints = w.carriedConstraints()
			}
		}
		w.updatePod(old, p)
		w.pods[podKey] = p
	case 7:
		if p := w.pods[podKey]; p != nil {
			w.deletePod(p)
			delete(w.pods, podKey)
		}
	}
}

// addPod, updatePod and deletePod feed a pod event to the index through its
// *v1.Pod entry points or as records, as the webhook's pod handler does, at
// the chooser's whim: both ways must count alike.
func (w *world) addPod(p *v1.Pod) {
	if w.c.intn(2) == 0 {
		w.ix.AddPod(p)
		return
	}
	w.ix.AddPodRecord(spread.PodRecordOf(p))
}

func (w *world) updatePod(old, p *v1.Pod) {
	if old == nil || w.c.intn(2) == 0 {
		w.ix.UpdatePod(old, p)
		return
	}
	w.ix.UpdatePodRecord(spread.PodRecordOf(old), spread.PodRecordOf(p))
}

func (w *world) deletePod(p *v1.Pod) {
	if w.c.intn(2) == 0 {
		w.ix.DeletePod(p)
		return
	}
	w.ix.DeletePodRecord(spread.PodRecordOf(p))
}

func (w *world) snapshot() spread.Snapshot {
	var s spread.Snapshot
	for _, n := range w.nodes {
		s.Nodes = append(s.Nodes, n)
	}
	for _, p := range w.pods {
		s.Pods = append(s.Pods, p)
	}
	s.Templates = w.templates
	return s
}

func (w *world) randomConstraint() v1.TopologySpreadConstraint {
	c := w.c
	key := pick(c, v1.LabelTopologyZone, v1.LabelTopologyZone, v1.LabelHostname, "rack", "gen")
	if c.intn(25) == 0 {
		key = "missing-key"
	}
	b := st.Constraint(int32(1+c.intn(2)), key)
	switch c.intn(12) {
	case 0:
		// nil selector: selects nothing
	case 1:
		b.Selector(&metav1.LabelSelector{})
	case 2:
		b.MatchExpression("app", metav1.LabelSelectorOpIn, "a", "b")
	case 3:
		b.MatchExpression("tier", metav1.LabelSelectorOpNotIn, "web")
	case 4:
		b.MatchExpression("tier", metav1.LabelSelectorOpExists).MatchExpression("app", metav1.LabelSelectorOpDoesNotExist)
	// Degenerate selectors users write: a selector is a set, so none of
	// these may count a pod twice.
	case 5:
		b.MatchExpression("app", metav1.LabelSelectorOpIn, "a", "a")
	case 6:
		b.MatchExpression("app", metav1.LabelSelectorOpIn, "a", "b", "a").MatchExpression("app", metav1.LabelSelectorOpIn, "b", "a")
	case 7:
		b.MatchExpression("app", metav1.LabelSelectorOpIn, "a", "b").MatchExpression("app", metav1.LabelSelectorOpNotIn, "b", "b")
	case 8:
		b.MatchExpression("app", metav1.LabelSelectorOpExists).MatchExpression("app", metav1.LabelSelectorOpDoesNotExist)
	case 9:
		b.MatchLabel("app", "a").MatchExpression("app", metav1.LabelSelectorOpIn, "a", "a")
	default:
		b.MatchLabel("app", pick(c, "a", "b"))
	}
	if c.intn(3) == 0 {
		b.MinDomains(int32(1 + c.intn(4)))
	}
	if p := c.intn(3); p > 0 {
		b.NodeAffinityPolicy(pick(c, v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore))
	}
	if p := c.intn(3); p > 0 {
		b.NodeTaintsPolicy(pick(c, v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore))
	}
	if c.intn(4) == 0 {
		b.MatchLabelKeys("pod-template-hash")
	}
	if c.intn(8) == 0 {
		b.ScheduleAnyway()
	}
	return b.Obj()
}

func (w *world) incomingPod() *v1.Pod {
	c := w.c
	p := st.MakePod().Name("incoming").Namespace(pick(c, "default", "other")).Label("app", pick(c, "a", "b"))
	if c.intn(2) == 0 {
		p.Label("pod-template-hash", pick(c, "h1", "h2"))
	}
	// Up to three: beyond two, the index keys tuples of domains otherwise.
	for range 1 + c.intn(3) {
		p.SpreadConstraint(w.randomConstraint())
	}
	if c.intn(4) == 0 {
		p.NodeSelector("disk", pick(c, "ssd", "hdd"))
	}
	for range c.intn(3) {
		switch c.intn(9) {
		case 0:
			p.NodeAffinityIn(v1.LabelTopologyZone, pick(c, "a", "b"), "c")
		case 1:
			p.NodeAffinityNotIn("rack", pick(c, "r0", "r1"))
		case 2:
			p.NodeAffinityExpression("disk", v1.NodeSelectorOpExists)
		case 3:
			p.NodeAffinityExpression("disk", v1.NodeSelectorOpDoesNotExist)
		case 4:
			p.NodeAffinityExpression("gen", pick(c, v1.NodeSelectorOpGt, v1.NodeSelectorOpLt), pick(c, "2", "5"))
		case 5:
			p.NodeAffinityField(metav1.ObjectNameField, pick(c, v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn), fmt.Sprintf("n%d", c.intn(10)))
		case 6:
			// Does not parse: the term matches nothing.
			p.NodeAffinityExpression("gen", v1.NodeSelectorOpGt, "many")
		case 7:
			p.OrNodeAffinityTerm()
		case 8:
			p.NodeAffinityField("spec.unschedulable", v1.NodeSelectorOpIn, pick(c, "", "true"))
		}
	}
	for range c.intn(3) {
		switch c.intn(4) {
		case 0:
			p.Toleration("dedicated", v1.TolerationOpExists, "", "")
		case 1:
			p.Toleration("dedicated", v1.TolerationOpEqual, "web", v1.TaintEffectNoExecute)
		case 2:
			p.Toleration(v1.TaintNodeUnschedulable, v1.TolerationOpExists, "", v1.TaintEffectNoSchedule)
		case 3:
			p.Toleration("", v1.TolerationOpExists, "", "")
		}
	}
	return p.Obj()
}

// checkWorld fails unless the event-fed index, an index built from the
// final state and Snapshot.Check give the same Result for incoming pods.
func checkWorld(t *testing.T, w *world, pods int, seed string) (verdicts []spread.Verdict) {
	t.Helper()
	snap := w.snapshot()
	rebuilt := spread.IndexFromSnapshot(snap)
	for i := range pods {
		pod := w.incomingPod()
		for _, explain := range []bool{false, true} {
			opts := spread.Options{Explain: explain}
			want, wantErr := snap.Check(pod, opts)
			if wantErr == nil && explain {
				verdicts = append(verdicts, want.Verdict)
			}
			for name, ix := range map[string]*spread.Index{"event-fed index": w.ix, "rebuilt index": rebuilt} {
				got, err := ix.Check(pod, opts)
				if (err == nil) != (wantErr == nil) {
					t.Fatalf("%s: incoming pod %d, %s: Index.Check() error = %v, Snapshot.Check() error = %v", seed, i, name, err, wantErr)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%s: incoming pod %d (Explain %v), %s differs from Snapshot.Check (-snapshot +index):\n%s\npod: %+v",
						seed, i, explain, name, diff, pod.Spec)
				}
			}
		}
		want, wantErr := layoutOf(snap, pod)
		for name, ix := range map[string]*spread.Index{"event-fed index": w.ix, "rebuilt index": rebuilt} {
			got, err := ix.Layout(pod, spread.DetailNodes)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%s: incoming pod %d, %s: Index.Layout() error = %v, Snapshot.Check() error = %v", seed, i, name, err, wantErr)
			}
			if diff := cmp.Diff(want, named(got)); diff != "" {
				t.Fatalf("%s: incoming pod %d, %s: Layout differs from the explained Snapshot.Check (-snapshot +index):\n%s\npod: %+v",
					seed, i, name, diff, pod.Spec)
			}
		}
	}
	checkCarried(t, w, rebuilt, seed)
	return verdicts
}

// checkCarried fails unless the event-fed and the rebuilt index answer
// Carried alike, with a set that as many of the selected pods carry as any
// other (the zero set on a tie with it), counted from the final state.
func checkCarried(t *testing.T, w *world, rebuilt *spread.Index, seed string) {
	t.Helper()
	sels := []labels.Selector{labels.Everything(), labels.SelectorFromSet(labels.Set{"app": "a"}),
		labels.SelectorFromSet(labels.Set{"app": "b", "tier": "web"})}
	except := [][]labels.Selector{nil, {labels.SelectorFromSet(labels.Set{"pod-template-hash": "h1"})}}
	for _, ns := range []string{"default", "other"} {
		for i, sel := range sels {
			for j, ex := range except {
				got := w.ix.Carried(ns, sel, ex)
				if again := rebuilt.Carried(ns, sel, ex); again != got {
					t.Fatalf("%s: Carried(%s, %s, except %d): event-fed index %v, rebuilt index %v", seed, ns, sel, j, got.Constraints(), again.Constraints())
				}
				tally := map[spread.ConstraintSet]int{}
				for _, p := range w.pods {
					counted := p.Spec.NodeName != "" && p.DeletionTimestamp == nil &&
						p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
					set := labels.Set(p.Labels)
					if p.Namespace != ns || !counted || !sel.Matches(set) ||
						slices.ContainsFunc(ex, func(s labels.Selector) bool { return s.Matches(set) }) {
						continue
					}
					tally[spread.ConstraintSetOf(p.Spec.TopologySpreadConstraints)]++
				}
				most := slices.Max(append(slices.Collect(maps.Values(tally)), 0))
				if tally[got] != most || tally[spread.ConstraintSet{}] == most && got != (spread.ConstraintSet{}) {
					t.Fatalf("%s: Carried(%s, selector %d, except %d) = %v, carried by %d pods; the pods carry %d sets, the most common by %d (none by %d)",
						seed, ns, i, j, got.Constraints(), tally[got], len(tally), most, tally[spread.ConstraintSet{}])
				}
			}
		}
	}
}

// namedLayout is a Layout with its positions replaced by the domains they
// name, which is what the checkers can agree on: the order of a layout's
// domains is its own.
type namedLayout struct {
	Result *spread.Result
	// Domains are each constraint's counts, by domain.
	Domains   []map[string]int
	Nodes     []namedNode
	Templates []spread.Template
}

type namedNode struct {
	Name    string
	Domains []string
}

func named(l *spread.Layout) *namedLayout {
	if l == nil {
		return nil
	}
	out := &namedLayout{Result: l.Result, Templates: l.Templates}
	for _, d := range l.Domains {
		counts := map[string]int{}
		for p, name := range d.Names {
			counts[name] = d.Counts[p]
		}
		out.Domains = append(out.Domains, counts)
	}
	for k, name := range l.Nodes {
		node := namedNode{Name: name}
		for i, p := range l.NodeDomainsOf(k) {
			node.Domains = append(node.Domains, l.Domains[i].Names[p])
		}
		out.Nodes = append(out.Nodes, node)
	}
	return out
}

// layoutOf is the Layout that Index.Layout must return, named, derived
// from Snapshot.Check's explained result: its feasible nodes, then those
// the skew alone excludes, the first of each tuple of domains kept; its
// templates likewise; its domains, every counted one; and the unexplained
// result.
func layoutOf(snap spread.Snapshot, pod *v1.Pod) (*namedLayout, error) {
	explained, err := snap.Check(pod, spread.Options{Explain: true})
	if err != nil {
		return nil, err
	}
	res, err := snap.Check(pod, spread.Options{})
	if err != nil {
		return nil, err
	}
	l := &namedLayout{Result: res}
	for i := range res.Constraints {
		l.Domains = append(l.Domains, explained.Constraints[i].Domains)
	}
	labels := map[string]map[string]string{}
	for _, n := range snap.Nodes {
		labels[n.Name] = n.Labels
	}
	usable := explained.FeasibleNodes
	for _, e := range explained.Excluded {
		if e.Reason == spread.ReasonSkew {
			usable = append(usable, e.Name)
		}
	}
	seen := map[string]bool{}
	for _, name := range usable {
		var domains []string
		for _, c := range res.Constraints {
			domains = append(domains, labels[name][c.TopologyKey])
		}
		if key := fmt.Sprintf("%q", domains); !seen[key] {
			seen[key] = true
			l.Nodes = append(l.Nodes, namedNode{Name: name, Domains: domains})
		}
	}
	templates := map[string]bool{}
	for _, name := range explained.FeasibleTemplates {
		templates[name] = true
	}
	for _, e := range explained.ExcludedTemplates {
		templates[e.Name] = templates[e.Name] || e.Reason == spread.ReasonSkew
	}
	for _, t := range spread.UniqueTemplates(snap.Templates) {
		if templates[t.Name] {
			l.Templates = append(l.Templates, t)
		}
	}
	return l, nil
}

// randomRounds draws and logs a seed, and says how many rounds to run:
// full, or short with -short.
func randomRounds(t *testing.T, full, short int) (seed uint64, rounds int) {
	t.Helper()
	seed = rand.Uint64()
	t.Logf("seed %d", seed)
	if testing.Short() {
		return seed, short
	}
	return seed, full
}

func TestIndexEventsMatchSnapshot(t *testing.T) {
	seed, rounds := randomRounds(t, 40, 5)
	seen := map[spread.Verdict]int{}
	for round := range rounds {
		w := newWorld(rngChooser{rand.New(rand.NewPCG(seed, uint64(round)))})
		for step := range 400 {
			w.step()
			if step%100 == 99 {
				for _, v := range checkWorld(t, w, 10, fmt.Sprintf("seed %d round %d step %d", seed, round, step)) {
					seen[v]++
				}
			}
		}
	}
	t.Logf("verdicts: %v", seen)
	if testing.Short() {
		return
	}
	// The generator must reach every verdict, or the agreement above says
	// little about the one it misses.
	for _, v := range []spread.Verdict{spread.VerdictNoHardConstraints, spread.VerdictFeasible, spread.VerdictFeasibleOnNewNode,
		spread.VerdictUnsatisfiable, spread.VerdictNoCandidateNodes} {
		if seen[v] == 0 {
			t.Errorf("seed %d: no incoming pod had verdict %s", seed, v)
		}
	}
}

// FuzzIndex drives the same invariant from the fuzzer's bytes: events,
// then incoming pods.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("a cordoned zone pins the minimum at zero"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		w := newWorld(c)
		for range min(len(data)/4, 200) {
			w.step()
		}
		checkWorld(t, w, 3, fmt.Sprintf("fuzz input %q", data))
	})
}

// TestIndexConcurrentUse has informer-like writers and admission-like
// readers share an index; run it with -race. When the writers are done the
// index must still agree with the snapshot.
func TestIndexConcurrentUse(t *testing.T) {
	seed := rand.Uint64()
	w := newWorld(rngChooser{rand.New(rand.NewPCG(seed, 0))})
	for range 200 {
		w.step()
	}
	incoming := make([]*v1.Pod, 20)
	for i := range incoming {
		incoming[i] = w.incomingPod()
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if _, err := w.ix.Check(incoming[(i+r)%len(incoming)], spread.Options{Explain: i%3 == 0}); err != nil && !errors.Is(err, spread.ErrInvalidConstraint) {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2000 {
		w.step()
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("seed %d: concurrent Check() error = %v", seed, err)
		}
	}
	checkWorld(t, w, 10, fmt.Sprintf("seed %d after concurrent use", seed))
}
