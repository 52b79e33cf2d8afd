package parity

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"

	"github.com/spreadguard/spreadguard/pkg/spread"
)

// indexFromEvents builds an Index the way the webhook's informers do: a
// random interleaving of add, update and delete events whose end state is
// the case's cluster. Pods arrive before their nodes, pods are bound and
// relabelled after they were added, pods finish, nodes change labels and
// taints, and objects that no longer exist come and go, so the incremental
// counting must end where a fresh count would. The templates come in
// among the events, as their informers deliver them.
func indexFromEvents(g *gen, c *clusterCase) *spread.Index {
	ix := spread.NewIndex()
	var streams [][]func()
	for _, n := range c.Nodes {
		switch x := g.r.Float64(); {
		case x < 0.25:
			old := n.DeepCopy()
			g.perturbNode(old)
			streams = append(streams, []func(){func() { ix.AddNode(old) }, func() { ix.UpdateNode(old, n) }})
		case x < 0.35:
			// deleted and registered again, perhaps with other labels
			old := n.DeepCopy()
			if g.chance(0.5) {
				g.perturbNode(old)
			}
			streams = append(streams, []func(){func() { ix.AddNode(old) }, func() { ix.DeleteNode(old) }, func() { ix.AddNode(n) }})
		case x < 0.45:
			// a resync delivers an update that changes nothing
			streams = append(streams, []func(){func() { ix.AddNode(n) }, func() { ix.UpdateNode(n, n) }})
		default:
			streams = append(streams, []func(){func() { ix.AddNode(n) }})
		}
	}
	for _, p := range c.Pods {
		switch x := g.r.Float64(); {
		case x < 0.3:
			old := p.DeepCopy()
			g.perturbPod(old)
			streams = append(streams, []func(){func() { ix.AddPod(old) }, func() { ix.UpdatePod(old, p) }})
		case x < 0.4:
			streams = append(streams, []func(){func() { ix.AddPod(p) }, func() { ix.UpdatePod(p, p) }})
		default:
			streams = append(streams, []func(){func() { ix.AddPod(p) }})
		}
	}
	// Objects deleted before the check: they must leave no trace.
	for i := range g.intn(0, 3) {
		gone := g.existingPod(fmt.Sprintf("deleted-%d", i), c.Nodes)
		gone.Namespace = c.Pod.Namespace
		gone.Labels = maps.Clone(c.Pod.Labels)
		streams = append(streams, []func(){func() { ix.AddPod(gone) }, func() { ix.DeletePod(gone) }})
	}
	// The templates arrive at any point of the stream, sometimes after a
	// set that no longer holds (a NodePool edited, a NodeTemplate deleted):
	// the last set is the one that counts.
	var templates []func()
	if g.chance(0.3) {
		stale := g.templates(c.Nodes, len(zones), c.Pod)
		templates = append(templates, func() { ix.SetTemplates(stale) })
	}
	if len(c.Templates) > 0 || len(templates) > 0 {
		templates = append(templates, func() { ix.SetTemplates(c.Templates) })
		streams = append(streams, templates)
	}
	if g.chance(0.3) {
		// A node that was deleted: the pods still bound to it count nowhere.
		gone := g.node("node-gone", zones)
		streams = append(streams, []func(){func() { ix.AddNode(gone) }, func() { ix.DeleteNode(gone) }})
	}
	for {
		var live []int
		for i, s := range streams {
			if len(s) > 0 {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			return ix
		}
		i := pick(g, live)
		streams[i][0]()
		streams[i] = streams[i][1:]
	}
}

// perturbNode turns n into an earlier version of itself.
func (g *gen) perturbNode(n *v1.Node) {
	switch g.r.IntN(4) {
	case 0:
		n.Labels[labelZone] = pick(g, zones)
	case 1:
		delete(n.Labels, labelZone)
		delete(n.Labels, labelHostname)
	case 2:
		n.Spec.Taints = append(n.Spec.Taints[:0:0], pick(g, taintPool))
	case 3:
		n.Spec.Unschedulable = !n.Spec.Unschedulable
	}
}

// perturbPod turns p into an earlier version of itself: still pending,
// with other labels, still running, or not yet terminating.
func (g *gen) perturbPod(p *v1.Pod) {
	switch g.r.IntN(4) {
	case 0:
		p.Spec.NodeName = ""
		p.Status.Phase = v1.PodPending
	case 1:
		p.Labels = g.podLabels(0.6)
	case 2:
		// a bound pod never moves, but it may finish or fail later
		p.Status.Phase = v1.PodRunning
		if p.Spec.NodeName == "" {
			p.Status.Phase = v1.PodPending
		}
	case 3:
		p.DeletionTimestamp = nil
		p.DeletionGracePeriodSeconds = nil
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels["app"] = pick(g, podLabelSet["app"])
	}
}
