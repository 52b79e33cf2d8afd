package parity

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// The label vocabulary is small on purpose: random selectors and random pod
// labels must collide often, or every count would be 0.
const (
	labelZone     = v1.LabelTopologyZone
	labelHostname = v1.LabelHostname
	labelRack     = "example.com/rack"
	labelDisk     = "disk"
	labelGPUs     = "example.com/gpus"
)

var (
	zones       = []string{"zone-a", "zone-b", "zone-c", "zone-d"}
	namespaces  = []string{"team-a", "team-b"}
	podLabelSet = map[string][]string{
		"app":               {"web", "db", "cache"},
		"tier":              {"front", "back"},
		"version":           {"v1", "v2"},
		"pod-template-hash": {"5f7c", "9a1b"},
	}
	podLabelKeys = sortedKeys(podLabelSet)
	taintPool    = []v1.Taint{
		{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoExecute},
		{Key: "spot", Value: "true", Effect: v1.TaintEffectPreferNoSchedule},
		{Key: "maintenance", Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute},
	}
	tolerationPool = []v1.Toleration{
		{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "infra", Effect: v1.TaintEffectNoSchedule},
		{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu"},
		{Key: "dedicated", Operator: v1.TolerationOpExists},
		{Key: "spot", Operator: v1.TolerationOpEqual, Value: "true", Effect: v1.TaintEffectPreferNoSchedule},
		{Key: "maintenance", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: "maintenance", Operator: v1.TolerationOpExists},
		{Key: "maintenance"}, // the operator defaults to Equal, and "" equals the taint's empty value
		{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Operator: v1.TolerationOpExists},
	}
)

// clusterCase is one random cluster and the pod to admit into it.
type clusterCase struct {
	Nodes []*v1.Node
	Pods  []*v1.Pod
	// Templates are the nodes an autoscaler can add, as they were read:
	// names may repeat, and the later one counts.
	Templates []spread.Template
	// Pod is the incoming pod as its author wrote it, before the apiserver
	// merges matchLabelKeys into the selectors (see storedPod).
	Pod *v1.Pod
}

// gen draws random Kubernetes objects from one seeded source, so a case is
// reproduced from its seed alone.
type gen struct {
	r *rand.Rand
}

func newGen(seed uint64, index int) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, uint64(index)))}
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) intn(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

func pick[T any](g *gen, xs []T) T { return xs[g.r.IntN(len(xs))] }

// some returns a random subset of xs (possibly empty) in xs's order.
func some[T any](g *gen, xs []T, p float64) []T {
	var out []T
	for _, x := range xs {
		if g.chance(p) {
			out = append(out, x)
		}
	}
	return out
}

// clusterCase draws 1-4 zones, 1-12 nodes, 0-40 existing pods, the pod to
// admit and, in about half of the cases, templates of nodes an autoscaler
// can add. The templates are drawn last so that a seed draws the same
// nodes and pods as it did before templates existed.
func (g *gen) clusterCase() *clusterCase {
	c := &clusterCase{}
	nZones := g.intn(1, 4)
	nNodes, nPods := g.intn(1, 12), g.intn(0, 40)
	if g.chance(0.03) {
		// A few large clusters: more than 64 nodes and more than 64 values
		// of one key take other paths through spreadguard's index.
		nNodes, nPods = g.intn(65, 140), g.intn(100, 400)
	}
	for i := range nNodes {
		n := g.node(fmt.Sprintf("node-%d", i), zones[:nZones])
		if _, ok := n.Labels[labelRack]; ok && nNodes > 12 {
			n.Labels[labelRack] = fmt.Sprintf("rack-%d", g.r.IntN(nNodes*3/4))
		}
		c.Nodes = append(c.Nodes, n)
	}
	if nNodes > 1 && g.chance(0.05) {
		// Some providers give nodes a hostname label that is not the node
		// name; two nodes can then share one hostname domain.
		a, b := c.Nodes[0], c.Nodes[nNodes-1]
		if h, ok := b.Labels[labelHostname]; ok {
			a.Labels[labelHostname] = h
		}
	}
	// Pod names repeat across namespaces, never within one.
	perNamespace := map[string]int{}
	for range nPods {
		p := g.existingPod("", c.Nodes)
		p.Name = fmt.Sprintf("pod-%d", perNamespace[p.Namespace])
		p.UID = apitypes.UID(p.Namespace + "-" + p.Name)
		perNamespace[p.Namespace]++
		c.Pods = append(c.Pods, p)
	}
	c.Pod = g.incomingPod(c.Nodes)
	if g.chance(0.5) {
		c.Templates = g.templates(c.Nodes, nZones, c.Pod)
	}
	return c
}

func (g *gen) node(name string, zones []string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if g.chance(0.95) {
		n.Labels[labelHostname] = name
	}
	if g.chance(0.85) {
		n.Labels[labelZone] = pick(g, zones)
		if g.chance(0.02) {
			n.Labels[labelZone] = "" // an empty value is a domain like any other
		}
	}
	if g.chance(0.6) {
		n.Labels[labelRack] = fmt.Sprintf("rack-%d", g.r.IntN(3))
	}
	if g.chance(0.5) {
		n.Labels[labelDisk] = pick(g, []string{"ssd", "hdd"})
	}
	if g.chance(0.4) {
		n.Labels[labelGPUs] = strconv.Itoa(g.r.IntN(9))
		if g.chance(0.05) {
			n.Labels[labelGPUs] = "many" // Gt and Lt never match a non-integer
		}
	}
	if g.chance(0.35) {
		n.Spec.Taints = append(n.Spec.Taints, some(g, taintPool, 0.3)...)
	}
	if g.chance(0.15) {
		// Cordoned: kubectl cordon sets spec.unschedulable and the node
		// lifecycle controller adds the taint shortly after, so both the
		// states with and without the taint exist.
		n.Spec.Unschedulable = true
		if g.chance(0.5) && !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == v1.TaintNodeUnschedulable }) {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
		}
	}
	return n
}

func (g *gen) podLabels(p float64) map[string]string {
	labels := map[string]string{}
	for _, k := range podLabelKeys {
		if g.chance(p) {
			labels[k] = pick(g, podLabelSet[k])
		}
	}
	return labels
}

func (g *gen) existingPod(name string, nodes []*v1.Node) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: pick(g, namespaces),
			Labels:    g.podLabels(0.6),
			UID:       apitypes.UID("uid-" + name),
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	switch x := g.r.Float64(); {
	case x < 0.05:
		p.Spec.NodeName = "node-gone" // a node the informer no longer has
	case x < 0.10:
		// pending: not bound yet, so it counts nowhere
		p.Status.Phase = v1.PodPending
	default:
		p.Spec.NodeName = pick(g, nodes).Name
	}
	switch x := g.r.Float64(); {
	case x < 0.06:
		p.Status.Phase = v1.PodSucceeded
	case x < 0.12:
		p.Status.Phase = v1.PodFailed
	}
	if g.chance(0.08) {
		p.DeletionTimestamp = &metav1.Time{}
		p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	}
	return p
}

func (g *gen) incomingPod(nodes []*v1.Node) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "incoming",
			Namespace: namespaces[0],
			Labels:    g.podLabels(0.7),
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if g.chance(0.25) {
		p.Spec.NodeSelector = map[string]string{}
		if g.chance(0.6) {
			p.Spec.NodeSelector[labelDisk] = pick(g, []string{"ssd", "hdd"})
		}
		if g.chance(0.5) {
			p.Spec.NodeSelector[labelZone] = pick(g, zones)
		}
	}
	if g.chance(0.3) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: g.nodeSelector(nodes),
		}}
	}
	if g.chance(0.4) {
		p.Spec.Tolerations = some(g, tolerationPool, 0.3)
	}
	p.Spec.TopologySpreadConstraints = g.constraints(p.Labels)
	return p
}

// nodeSelector draws 1-2 ORed terms of ANDed requirements over every
// operator node affinity has.
func (g *gen) nodeSelector(nodes []*v1.Node) *v1.NodeSelector {
	ns := &v1.NodeSelector{}
	for range g.intn(1, 2) {
		var term v1.NodeSelectorTerm
		if g.chance(0.05) {
			// An empty term is valid and matches no node.
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, term)
			continue
		}
		for range g.intn(1, 2) {
			switch g.r.IntN(8) {
			case 0:
				term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: labelZone, Operator: v1.NodeSelectorOpIn, Values: some(g, zones, 0.5)})
			case 1:
				term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: labelZone, Operator: v1.NodeSelectorOpNotIn, Values: []string{pick(g, zones)}})
			case 2:
				term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: labelDisk, Operator: v1.NodeSelectorOpExists})
			case 3:
				term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: labelDisk, Operator: v1.NodeSelectorOpDoesNotExist})
			case 4:
				term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: labelGPUs, Operator: v1.NodeSelectorOpGt, Values: []string{strconv.Itoa(g.r.IntN(8))}})
			case 5:
				term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: labelGPUs, Operator: v1.NodeSelectorOpLt, Values: []string{strconv.Itoa(g.intn(1, 8))}})
			case 6:
				name := pick(g, nodes).Name
				if g.chance(0.15) {
					name = "node-gone"
				}
				term.MatchFields = append(term.MatchFields, v1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{name}})
			case 7:
				term.MatchFields = append(term.MatchFields, v1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpNotIn, Values: []string{pick(g, nodes).Name}})
			}
		}
		// An In over no values is refused by the apiserver.
		term.MatchExpressions = slices.DeleteFunc(term.MatchExpressions, func(r v1.NodeSelectorRequirement) bool {
			return r.Operator == v1.NodeSelectorOpIn && len(r.Values) == 0
		})
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			term.MatchExpressions = []v1.NodeSelectorRequirement{{Key: labelDisk, Operator: v1.NodeSelectorOpExists}}
		}
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, term)
	}
	return ns
}

// constraints draws 0-3 constraints with distinct (topologyKey,
// whenUnsatisfiable) pairs, which the apiserver requires.
func (g *gen) constraints(podLabels map[string]string) []v1.TopologySpreadConstraint {
	type pair struct {
		key  string
		when v1.UnsatisfiableConstraintAction
	}
	var pairs []pair
	for _, k := range []string{labelZone, labelHostname, labelRack} {
		for _, w := range []v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway} {
			pairs = append(pairs, pair{k, w})
		}
	}
	g.r.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	n := g.intn(0, 3)
	if n > 0 && g.chance(0.6) {
		// Most interesting cases have a hard constraint; keep it likely.
		i := slices.IndexFunc(pairs, func(p pair) bool { return p.when == v1.DoNotSchedule })
		pairs[0], pairs[i] = pairs[i], pairs[0]
	}
	var out []v1.TopologySpreadConstraint
	for _, p := range pairs[:n] {
		c := v1.TopologySpreadConstraint{
			MaxSkew:           int32(g.intn(1, 3)),
			TopologyKey:       p.key,
			WhenUnsatisfiable: p.when,
		}
		if p.when == v1.DoNotSchedule && g.chance(0.35) {
			c.MinDomains = ptr.To(int32(g.intn(1, 5)))
		}
		policies := []*v1.NodeInclusionPolicy{nil, ptr.To(v1.NodeInclusionPolicyHonor), ptr.To(v1.NodeInclusionPolicyIgnore)}
		c.NodeAffinityPolicy = pick(g, policies)
		c.NodeTaintsPolicy = pick(g, policies)
		c.LabelSelector = g.labelSelector()
		if c.LabelSelector != nil && g.chance(0.3) {
			c.MatchLabelKeys = g.matchLabelKeys(c.LabelSelector)
		}
		out = append(out, c)
	}
	return out
}

// labelSelector draws a spread constraint's selector: nil (selects
// nothing), empty (selects everything), or matchLabels and matchExpressions
// over the pod label vocabulary.
func (g *gen) labelSelector() *metav1.LabelSelector {
	switch x := g.r.Float64(); {
	case x < 0.05:
		return nil
	case x < 0.12:
		return &metav1.LabelSelector{}
	}
	ls := &metav1.LabelSelector{}
	for _, k := range some(g, podLabelKeys, 0.35) {
		if g.chance(0.5) {
			if ls.MatchLabels == nil {
				ls.MatchLabels = map[string]string{}
			}
			ls.MatchLabels[k] = pick(g, podLabelSet[k])
			continue
		}
		r := metav1.LabelSelectorRequirement{Key: k}
		switch g.r.IntN(4) {
		case 0:
			r.Operator, r.Values = metav1.LabelSelectorOpIn, g.values(k)
		case 1:
			r.Operator, r.Values = metav1.LabelSelectorOpNotIn, g.values(k)
		case 2:
			r.Operator = metav1.LabelSelectorOpExists
		case 3:
			r.Operator = metav1.LabelSelectorOpDoesNotExist
		}
		ls.MatchExpressions = append(ls.MatchExpressions, r)
	}
	if g.chance(0.3) {
		g.degenerate(ls)
	}
	return ls
}

// degenerate adds to ls what users write and a selector, being a set,
// must read once: a value repeated in an In or NotIn, a requirement written
// twice, In and NotIn (or Exists and DoesNotExist) on one key, and
// matchLabels repeated as an expression.
func (g *gen) degenerate(ls *metav1.LabelSelector) {
	k := pick(g, podLabelKeys)
	switch g.r.IntN(5) {
	case 0:
		vs := g.values(k)
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: k, Operator: metav1.LabelSelectorOpIn, Values: append(vs, vs[0])})
	case 1:
		vs := g.values(k)
		r := metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: vs}
		ls.MatchExpressions = append(ls.MatchExpressions, r, *r.DeepCopy())
	case 2:
		ls.MatchExpressions = append(ls.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: g.values(k)},
			metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: g.values(k)})
	case 3:
		ls.MatchExpressions = append(ls.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpExists},
			metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpDoesNotExist})
	case 4:
		v := pick(g, podLabelSet[k])
		if ls.MatchLabels == nil {
			ls.MatchLabels = map[string]string{}
		}
		ls.MatchLabels[k] = v
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v, v}})
	}
}

// values draws 1 or more values of key (an In or NotIn over none is invalid).
func (g *gen) values(key string) []string {
	vs := some(g, podLabelSet[key], 0.5)
	if len(vs) == 0 {
		vs = []string{pick(g, podLabelSet[key])}
	}
	return vs
}

// matchLabelKeys draws keys the selector does not use (the apiserver
// refuses a key in both), present or absent in the pod's labels.
func (g *gen) matchLabelKeys(ls *metav1.LabelSelector) []string {
	used := map[string]bool{}
	for k := range ls.MatchLabels {
		used[k] = true
	}
	for _, r := range ls.MatchExpressions {
		used[r.Key] = true
	}
	var keys []string
	for _, k := range append(slices.Clone(podLabelKeys), "release") {
		if !used[k] && g.chance(0.4) {
			keys = append(keys, k)
		}
	}
	return keys
}

// storedPod returns pod as the apiserver stores it: matchLabelKeys merged
// into each labelSelector as `key In (value)` for the keys the pod has
// (https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/registry/core/pod/strategy.go,
// applyMatchLabelKeys; MatchLabelKeysInPodTopologySpreadSelectorMerge is on
// by default in v1.37).
func storedPod(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	for i := range p.Spec.TopologySpreadConstraints {
		c := &p.Spec.TopologySpreadConstraints[i]
		if c.LabelSelector == nil {
			continue
		}
		for _, k := range c.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				c.LabelSelector.MatchExpressions = append(c.LabelSelector.MatchExpressions,
					metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
	}
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
