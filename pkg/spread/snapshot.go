package spread

import (
	"cmp"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Check decides feasibility for pod the way kube-scheduler does, literally:
// PreFilter scans every node and every pod on it, then Filter runs
// NodeUnschedulable, TaintToleration, NodeAffinity and PodTopologySpread on
// every node. It is the reference the Index is tested against, and the
// baseline of its benchmarks.
//
// Nodes are identified by name and pods by namespace/name; a later
// duplicate replaces an earlier one, as in an informer's store. Nodes
// without a name are ignored.
//
// It mirrors
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/podtopologyspread/filtering.go
// with the node inclusion policies of
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/podtopologyspread/common.go
func (s Snapshot) Check(pod *v1.Pod, opts Options) (*Result, error) {
	cs, err := hardConstraints(pod)
	if err != nil {
		return nil, err
	}
	nodes, podsOn := s.normalize()
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	ev := prefilter(cs, pod, nodes, podsOn, required)
	ev.unserved = SortedUnservedZones(s.UnservedZones)

	// Filter.
	tolerable := toleratesUnschedulable(pod.Spec.Tolerations)
	podLabels := labels.Set(pod.Labels)
	for _, n := range nodes {
		if n.Spec.Unschedulable && !tolerable {
			continue
		}
		if _, untolerated := untoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations); untolerated {
			continue
		}
		// Parse errors are ignored for backwards compatibility, as the
		// NodeAffinity filter does.
		if ok, _ := required.Match(n); !ok {
			continue
		}
		ev.candidates++
		if spreadFilter(cs, ev, n, podLabels) {
			ev.feasible++
		}
	}

	if opts.Explain || ev.feasible == 0 {
		ev.templates = s.checkTemplates(ev, pod, nodes, podsOn, required)
	}

	ev.detailed = opts.Explain || ev.verdict() == VerdictUnsatisfiable
	if ev.detailed {
		ev.nodes = make([]nodeReport, 0, len(nodes))
		for _, n := range nodes {
			r := nodeReport{
				name:     n.Name,
				labels:   n.Labels,
				cordoned: n.Spec.Unschedulable && !tolerable,
			}
			if t, untolerated := untoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations); untolerated {
				r.taint = &t
			}
			r.affinity, _ = required.Match(n)
			r.missingKey, _ = hasAllKeys(n.Labels, cs)
			ev.nodes = append(ev.nodes, r)
		}
	}
	return assemble(ev, opts)
}

// prefilter is PodTopologySpread's PreFilter: the matching pods per
// counted domain of each constraint, and the global minimum.
func prefilter(cs []constraint, pod *v1.Pod, nodes []*v1.Node, podsOn map[string][]*v1.Pod, required nodeaffinity.RequiredNodeAffinity) *evaluation {
	ev := newEvaluation(cs)
	for i := range cs {
		ev.domains[i] = map[string]int{}
	}
	for _, n := range nodes {
		if _, ok := hasAllKeys(n.Labels, cs); !ok {
			continue
		}
		for i := range cs {
			if !includes(&cs[i], pod, n, required) {
				continue
			}
			ev.domains[i][n.Labels[cs[i].topologyKey]] += countMatching(podsOn[n.Name], &cs[i], pod.Namespace)
		}
	}
	for i := range cs {
		smallest := math.MaxInt32
		for _, n := range ev.domains[i] {
			smallest = min(smallest, n)
		}
		ev.smallest[i] = smallest
		ev.domainCount[i] = len(ev.domains[i])
		ev.globalMin[i] = globalMinimum(&cs[i], ev.domainCount[i], smallest)
	}
	return ev
}

// checkTemplates checks each template literally: its fresh node is added
// to the nodes, PreFilter counts again, and the filters run on that node.
func (s Snapshot) checkTemplates(ev *evaluation, pod *v1.Pod, nodes []*v1.Node, podsOn map[string][]*v1.Pod, required nodeaffinity.RequiredNodeAffinity) []templateReport {
	ts := UniqueTemplates(s.Templates)
	if len(ts) == 0 || len(ev.constraints) == 0 {
		return nil
	}
	tolerable := toleratesUnschedulable(pod.Spec.Tolerations)
	out := make([]templateReport, len(ts))
	for i := range ts {
		fresh := ts[i].node()
		with := prefilter(ev.constraints, pod, append(slices.Clip(nodes), fresh), podsOn, required)
		r := nodeReport{name: fresh.Name, labels: fresh.Labels, cordoned: fresh.Spec.Unschedulable && !tolerable}
		if t, untolerated := untoleratedTaint(fresh.Spec.Taints, pod.Spec.Tolerations); untolerated {
			r.taint = &t
		}
		r.affinity, _ = required.Match(fresh)
		r.missingKey, _ = hasAllKeys(fresh.Labels, ev.constraints)
		reason, _ := r.filterReason()
		out[i].template = &ts[i]
		out[i].candidate = reason == ""
		out[i].reason, out[i].detail = with.nodeVerdict(&r)
		if out[i].candidate && r.missingKey == "" {
			out[i].newDomain = make([]bool, len(ev.constraints))
			for c := range ev.constraints {
				out[i].newDomain[c] = with.domainCount[c] > ev.domainCount[c]
			}
		}
	}
	return out
}

// spreadFilter is PodTopologySpread's Filter for one node.
func spreadFilter(cs []constraint, ev *evaluation, n *v1.Node, podLabels labels.Set) bool {
	for i := range cs {
		c := &cs[i]
		value, ok := n.Labels[c.topologyKey]
		if !ok {
			return false
		}
		selfMatch := 0
		if c.selector.Matches(podLabels) {
			selfMatch = 1
		}
		// 'existing matching num' + 'if self-match (1 or 0)' - 'global minimum' <= 'maxSkew'
		if ev.domains[i][value]+selfMatch-ev.globalMin[i] > int(c.maxSkew) {
			return false
		}
	}
	return true
}

// includes is matchNodeInclusionPolicies: whether node n takes part in
// constraint c's counting.
func includes(c *constraint, pod *v1.Pod, n *v1.Node, required nodeaffinity.RequiredNodeAffinity) bool {
	if c.nodeAffinityPolicy == v1.NodeInclusionPolicyHonor {
		if ok, _ := required.Match(n); !ok {
			return false
		}
	}
	if c.nodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
		if _, untolerated := untoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations); untolerated {
			return false
		}
	}
	return true
}

// countMatching is countPodsMatchSelector: the pods of one node, in the
// incoming pod's namespace and not terminating, that match the selector.
func countMatching(pods []*v1.Pod, c *constraint, namespace string) int {
	if !c.countsPods() {
		return 0
	}
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Namespace != namespace {
			continue
		}
		if c.selector.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

// normalize returns the nodes sorted by name, duplicates resolved, and the
// pods the scheduler's cache would hold on each node name.
func (s Snapshot) normalize() ([]*v1.Node, map[string][]*v1.Pod) {
	byName := make(map[string]*v1.Node, len(s.Nodes))
	for _, n := range s.Nodes {
		if n != nil && n.Name != "" {
			byName[n.Name] = n
		}
	}
	nodes := make([]*v1.Node, 0, len(byName))
	for _, n := range byName {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b *v1.Node) int { return cmp.Compare(a.Name, b.Name) })

	type key struct{ namespace, name string }
	latest := make(map[key]*v1.Pod, len(s.Pods))
	order := make([]key, 0, len(s.Pods))
	for _, p := range s.Pods {
		if p == nil {
			continue
		}
		k := key{p.Namespace, p.Name}
		if _, seen := latest[k]; !seen {
			order = append(order, k)
		}
		latest[k] = p
	}
	podsOn := make(map[string][]*v1.Pod, len(nodes))
	for _, k := range order {
		if p := latest[k]; countable(p) {
			podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
		}
	}
	return nodes, podsOn
}
