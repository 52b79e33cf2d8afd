package spread

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Template is the shape of one node that a node autoscaler can add: a
// NodeTemplate object, a Karpenter NodePool's zone and capacity type, or an
// existing node group's zone (pkg/autoscale derives them).
//
// A template is feasible for a pod when the scheduler's filters
// (NodeUnschedulable, NodeAffinity, TaintToleration, PodTopologySpread)
// pass the pod on one fresh node of the template added alone to the
// current cluster: the node carries Labels, plus kubernetes.io/hostname set
// to a fresh name when Labels has none, holds no pods and is schedulable.
// The fresh node takes part in the counting like any node, so a domain
// that exists only on the template is a domain with 0 matching pods. This
// is the question cluster-autoscaler's scale-up simulation asks of each
// node group:
// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.34.0/cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go
type Template struct {
	// Name identifies the template in results: a NodeTemplate's name,
	// nodepool/<pool>/<values joined by ,> or nodegroup/<group>/<zone>.
	Name string `json:"name"`
	// Source is what made it, as a sentence names it: "NodeTemplate gpu",
	// "NodePool default", "node group ng-1".
	Source string `json:"source,omitempty"`
	// Labels are the new node's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are the new node's taints; only NoSchedule and NoExecute ones
	// play a part.
	Taints []v1.Taint `json:"taints,omitempty"`
}

// freshNodeName is the name, and the hostname label unless the template
// sets one, of a template's new node. A real node cannot carry it: node
// names are DNS subdomains, which have no '~'.
const freshNodeName = "~new-node"

// node returns the template's fresh node.
func (t *Template) node() *v1.Node {
	ls := maps.Clone(t.Labels)
	if ls == nil {
		ls = map[string]string{}
	}
	if _, ok := ls[v1.LabelHostname]; !ok {
		ls[v1.LabelHostname] = freshNodeName
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: freshNodeName, Labels: ls}, Spec: v1.NodeSpec{Taints: t.Taints}}
}

// UniqueTemplates returns ts sorted by name, the last of duplicate names
// kept, as an informer's store would. The checkers apply it to the
// templates they are given, and pkg/autoscale to what it derives.
func UniqueTemplates(ts []Template) []Template {
	byName := make(map[string]Template, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	out := slices.Collect(maps.Values(byName))
	slices.SortFunc(out, func(a, b Template) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// UnservedZone is a zone an autoscaler's node pool requires that its node
// class cannot serve (pkg/autoscale finds them): no node ever comes up
// there, yet Karpenter counts the zone as a topology domain with 0 pods, so
// pods whose spread needs it stay Pending
// (https://github.com/kubernetes-sigs/karpenter/issues/3272).
type UnservedZone struct {
	Zone string `json:"zone"`
	// NodePool and NodeClass ("EC2NodeClass default") say what requires
	// the zone; a message names them only where its detail names nodes.
	NodePool  string `json:"nodePool,omitempty"`
	NodeClass string `json:"nodeClass,omitempty"`
}

// SortedUnservedZones returns zs sorted by zone, then NodePool, without
// duplicates.
func SortedUnservedZones(zs []UnservedZone) []UnservedZone {
	out := slices.Clone(zs)
	slices.SortFunc(out, func(a, b UnservedZone) int {
		return cmp.Or(cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.NodePool, b.NodePool), cmp.Compare(a.NodeClass, b.NodeClass))
	})
	return slices.Compact(out)
}

// templateReport is the outcome of one template for one pod.
type templateReport struct {
	template *Template
	// candidate: the fresh node passes node affinity, nodeSelector and
	// taints (it is never cordoned).
	candidate bool
	// reason is why the fresh node is not feasible, "" when it is.
	reason ExclusionReason
	detail string
	// newDomain holds, per constraint, whether the fresh node is counted in
	// a domain no existing node is counted in; nil when it is not counted
	// at all (not a candidate, or lacking a topology key).
	newDomain []bool
}

// templateCounts is what the check of a template needs to know about one
// constraint's counting over the existing nodes.
type templateCounts interface {
	// counted reports whether the existing nodes counted for constraint i
	// hold domain value, and its count of matching pods.
	counted(i int, value string) (count int, ok bool)
}

// checkTemplate is the Filter of the scheduler on the fresh node of t, with
// that node counted: it adds a domain with 0 matching pods when its value
// is not counted yet, which can lower the global minimum (or reach
// minDomains).
// newDomain is where the report's newDomain goes, one entry per
// constraint.
func (ev *evaluation) checkTemplate(t *Template, pod *v1.Pod, required nodeaffinity.RequiredNodeAffinity, tc templateCounts, newDomain []bool) templateReport {
	r := templateReport{template: t}
	n := t.node()
	if taint, untolerated := untoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations); untolerated {
		r.reason, r.detail = ReasonUntoleratedTaint, taint.ToString()
		return r
	}
	if ok, _ := required.Match(n); !ok {
		r.reason = ReasonNodeAffinity
		return r
	}
	r.candidate = true
	if key, ok := hasAllKeys(n.Labels, ev.constraints); !ok {
		r.reason, r.detail = ReasonMissingTopologyKey, key
		return r
	}
	r.newDomain = newDomain
	for i := range ev.constraints {
		_, counted := tc.counted(i, n.Labels[ev.constraints[i].topologyKey])
		r.newDomain[i] = !counted
	}
	for i := range ev.constraints {
		c := &ev.constraints[i]
		value := n.Labels[c.topologyKey]
		count, ok := tc.counted(i, value)
		domains, smallest := ev.domainCount[i], ev.smallest[i]
		if !ok {
			// The fresh node passes the filters, so it passes the inclusion
			// policies too: it is counted, with its 0 pods.
			domains++
			count, smallest = 0, 0
		}
		globalMin := globalMinimum(c, domains, smallest)
		// 'existing matching num' + 'if self-match (1 or 0)' - 'global minimum' <= 'maxSkew'
		if skew := count + c.selfMatch - globalMin; skew > int(c.maxSkew) {
			r.reason, r.detail = ReasonSkew, fmt.Sprintf("spec.topologySpreadConstraints[%d]: %s=%s has %d matching pods; %d + %d - %d = %d > maxSkew %d",
				c.index, c.topologyKey, value, count, count, c.selfMatch, globalMin, skew, c.maxSkew)
			return r
		}
	}
	return r
}

// checkTemplates checks every template (they are few: one per node group
// and zone) and records the outcome in ev.
func (ev *evaluation) checkTemplates(ts []Template, pod *v1.Pod, tc templateCounts) {
	if len(ts) == 0 || len(ev.constraints) == 0 {
		return
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	ev.templates = make([]templateReport, len(ts))
	n := len(ev.constraints)
	newDomains := make([]bool, len(ts)*n)
	for i := range ts {
		ev.templates[i] = ev.checkTemplate(&ts[i], pod, required, tc, newDomains[i*n:(i+1)*n:(i+1)*n])
	}
}

// newNodeMessage is the message of a pod that only a new node fits: the
// first feasible template and the domains its node would add to. When the
// detail names no node, the template is not named: its name, NodePool or
// node group can name another tenant's nodes.
func (ev *evaluation) newNodeMessage() string {
	for _, r := range ev.templates {
		if !r.candidate || r.reason != "" {
			continue
		}
		var where []string
		for i := range ev.constraints {
			key := ev.constraints[i].topologyKey
			value := r.template.node().Labels[key]
			if key == v1.LabelHostname && (value == freshNodeName || !ev.detail.NamesDomainsOf(key)) {
				// A new node is its own hostname domain, and a hostname
				// the detail does not name is a node's: nothing to name.
				continue
			}
			where = append(where, ev.detail.DomainName(key, value))
		}
		slices.Sort(where)
		where = slices.Compact(where)
		in := ""
		if len(where) > 0 {
			in = " in " + strings.Join(where, ", ")
		}
		from := "from " + cmp.Or(r.template.Source, "template "+r.template.Name)
		if !ev.detail.NamesNodes() {
			from = "that an autoscaler can add"
		}
		return fmt.Sprintf("no current node fits; a new node %s%s would", from, in)
	}
	return ""
}

// unservedNote says, after the denial of a pod with a hard constraint over
// topology.kubernetes.io/zone (or the warning of one only a new node
// fits), which zones an autoscaler's node pool requires but cannot serve:
// the pod may be waiting for a node there that never comes. Every such
// zone is named, whatever the pod's affinity: it is the autoscaler that
// picks the NodePool.
func (ev *evaluation) unservedNote() string {
	zs := ev.unservedZones()
	if len(zs) == 0 {
		return ""
	}
	return " " + ev.detail.UnservedSentence(zs)
}

// unservedZones are the zones unservedNote names: none unless a hard
// constraint spreads over topology.kubernetes.io/zone.
func (ev *evaluation) unservedZones() []UnservedZone {
	if len(ev.unserved) == 0 || !slices.ContainsFunc(ev.constraints, func(c constraint) bool { return c.topologyKey == v1.LabelTopologyZone }) {
		return nil
	}
	return ev.unserved
}

// templatesNote is the sentence an unsatisfiable pod's message ends with
// when there are templates: none fits, and why the first ones do not; when
// the detail names no node, how many fail for each reason, since a
// template's name and its taint can name another tenant.
func (ev *evaluation) templatesNote() string {
	if len(ev.templates) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, " No node an autoscaler can add fits either (%s", plural(len(ev.templates), "template"))
	if !ev.detail.NamesNodes() {
		var reasons []ExclusionReason
		failing := map[ExclusionReason]int{}
		for _, r := range ev.templates {
			if failing[r.reason] == 0 {
				reasons = append(reasons, r.reason)
			}
			failing[r.reason]++
		}
		sep := ": "
		for _, reason := range reasons {
			fmt.Fprintf(&b, "%s%d %s", sep, failing[reason], reason.verbFor(failing[reason]))
			sep = "; "
		}
		b.WriteString(").")
		return b.String()
	}
	for i, r := range ev.templates {
		if i == maxListedGroups {
			fmt.Fprintf(&b, ", and %d more", len(ev.templates)-i)
			break
		}
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s %s", sep, r.template.Name, r.reason)
		if r.detail != "" && r.reason != ReasonSkew {
			fmt.Fprintf(&b, " (%s)", r.detail)
		}
	}
	b.WriteString(").")
	return b.String()
}

// verbFor is the reason with its verb agreeing with n subjects: "has a
// taint" for 1, "have a taint" for 2.
func (r ExclusionReason) verbFor(n int) string {
	verb, rest, _ := strings.Cut(string(r), " ")
	if n == 1 {
		return string(r)
	}
	switch verb {
	case "has":
		verb = "have"
	case "does":
		verb = "do"
	case "is":
		verb = "are"
	case "lacks":
		verb = "lack"
	}
	return verb + " " + rest
}

// reach is the number of domains of constraint i that the pod's counting
// can ever hold: the counted ones, and those the candidate templates add.
// bounded is false when a template adds a fresh hostname, of which an
// autoscaler can add any number.
func (ev *evaluation) reach(i int) (n int, bounded bool) {
	key := ev.constraints[i].topologyKey
	added := map[string]bool{}
	for _, r := range ev.templates {
		if r.newDomain == nil || !r.newDomain[i] {
			continue
		}
		v, ok := r.template.Labels[key]
		if !ok && key == v1.LabelHostname {
			return 0, false
		}
		added[v] = true
	}
	return ev.domainCount[i] + len(added), true
}

// addedDomains returns the sorted values of constraint i's key that the
// templates would add as new domains (reach counts them), nil when none.
func (ev *evaluation) addedDomains(i int) []string {
	key := ev.constraints[i].topologyKey
	var out []string
	for _, r := range ev.templates {
		if r.newDomain == nil || !r.newDomain[i] {
			continue
		}
		if v, ok := r.template.Labels[key]; ok && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// templateCandidates and feasibleTemplates count the templates' outcomes.
func (ev *evaluation) templateCandidates() int {
	n := 0
	for _, r := range ev.templates {
		if r.candidate {
			n++
		}
	}
	return n
}

func (ev *evaluation) feasibleTemplates() []string {
	var out []string
	for _, r := range ev.templates {
		if r.candidate && r.reason == "" {
			out = append(out, r.template.Name)
		}
	}
	return out
}
