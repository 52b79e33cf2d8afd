package parity

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// The printers below render a case in a few lines, enough to rebuild it by
// hand as a unit test in pkg/spread.

var shortKeys = strings.NewReplacer(labelZone, "zone", labelHostname, "host", labelRack, "rack", labelGPUs, "gpus")

func short(s string) string { return shortKeys.Replace(s) }

func formatCase(c *clusterCase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "nodes (%d):\n", len(c.Nodes))
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "  %s\n", formatNode(n))
	}
	fmt.Fprintf(&b, "pods (%d):\n", len(c.Pods))
	for _, p := range c.Pods {
		fmt.Fprintf(&b, "  %s\n", formatPod(p))
	}
	if len(c.Templates) > 0 {
		fmt.Fprintf(&b, "templates (%d, the last of a name counts; a fresh node has hostname %s unless it sets one):\n", len(c.Templates), freshNodeName)
		for _, t := range c.Templates {
			fmt.Fprintf(&b, "  %s\n", formatTemplate(t))
		}
	}
	fmt.Fprintf(&b, "incoming: %s", formatIncoming(c.Pod))
	return b.String()
}

func formatTemplate(t spread.Template) string {
	ls := "{" + short(labels.Set(t.Labels).String()) + "}"
	if t.Labels == nil {
		ls = "nil"
	}
	parts := []string{fmt.Sprintf("%q", t.Name), ls}
	if t.Source != "" {
		parts = append(parts, fmt.Sprintf("source=%q", t.Source))
	}
	return strings.Join(append(parts, formatTaints(t.Taints)...), " ")
}

func formatTaints(taints []v1.Taint) []string {
	if len(taints) == 0 {
		return nil
	}
	var ts []string
	for _, t := range taints {
		ts = append(ts, t.ToString())
	}
	return []string{"taints=[" + strings.Join(ts, " ") + "]"}
}

func formatNode(n *v1.Node) string {
	parts := []string{n.Name, "{" + short(labels.Set(n.Labels).String()) + "}"}
	parts = append(parts, formatTaints(n.Spec.Taints)...)
	if n.Spec.Unschedulable {
		parts = append(parts, "unschedulable")
	}
	return strings.Join(parts, " ")
}

func formatPod(p *v1.Pod) string {
	node := p.Spec.NodeName
	if node == "" {
		node = "<unbound>"
	}
	s := fmt.Sprintf("%s/%s on %s {%s} %s", p.Namespace, p.Name, node, labels.Set(p.Labels), p.Status.Phase)
	if p.DeletionTimestamp != nil {
		s += " terminating"
	}
	return s
}

func formatIncoming(p *v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s {%s}\n", p.Namespace, p.Name, labels.Set(p.Labels))
	if p.Spec.NodeSelector != nil {
		fmt.Fprintf(&b, "  nodeSelector {%s}\n", short(labels.Set(p.Spec.NodeSelector).String()))
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var terms []string
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var rs []string
			for _, r := range t.MatchExpressions {
				rs = append(rs, fmt.Sprintf("%s %s %v", short(r.Key), r.Operator, r.Values))
			}
			for _, r := range t.MatchFields {
				rs = append(rs, fmt.Sprintf("field %s %s %v", r.Key, r.Operator, r.Values))
			}
			terms = append(terms, "("+strings.Join(rs, " && ")+")")
		}
		fmt.Fprintf(&b, "  nodeAffinity %s\n", strings.Join(terms, " || "))
	}
	if len(p.Spec.Tolerations) > 0 {
		var ts []string
		for _, t := range p.Spec.Tolerations {
			ts = append(ts, fmt.Sprintf("%s %s %s:%s", orAny(t.Key), t.Operator, t.Value, orAny(string(t.Effect))))
		}
		fmt.Fprintf(&b, "  tolerations [%s]\n", strings.Join(ts, "; "))
	}
	for i, c := range p.Spec.TopologySpreadConstraints {
		fmt.Fprintf(&b, "  spread[%d] %s %s maxSkew=%d minDomains=%s affinityPolicy=%s taintsPolicy=%s selector=%s",
			i, short(c.TopologyKey), c.WhenUnsatisfiable, c.MaxSkew, ptrString(c.MinDomains),
			ptrString(c.NodeAffinityPolicy), ptrString(c.NodeTaintsPolicy), formatSelector(c.LabelSelector))
		if len(c.MatchLabelKeys) > 0 {
			fmt.Fprintf(&b, " matchLabelKeys=%v", c.MatchLabelKeys)
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func formatSelector(ls *metav1.LabelSelector) string {
	switch {
	case ls == nil:
		return "nil(nothing)"
	case len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0:
		return "{}(everything)"
	}
	return "{" + metav1.FormatLabelSelector(ls) + "}"
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// formatCounts renders a domain -> count map in key order.
func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}
