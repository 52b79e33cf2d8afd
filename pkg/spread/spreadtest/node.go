package spreadtest

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// NodeWrapper builds a *v1.Node. Start with MakeNode. Label, RemoveLabel,
// UID and Annotation come with ObjectMetaOptions.
type NodeWrapper struct {
	v1.Node
	ObjectMetaOptions[*NodeWrapper]
}

// MakeNode returns a builder for a node without labels, taints or name.
func MakeNode() *NodeWrapper {
	w := &NodeWrapper{}
	w.ObjectMetaOptions = BindObjectMeta(w, &w.Node.ObjectMeta)
	return w
}

// Obj returns a deep copy of the node built so far.
func (n *NodeWrapper) Obj() *v1.Node { return n.Node.DeepCopy() }

// Name sets metadata.name and, as the kubelet does, the
// kubernetes.io/hostname label.
func (n *NodeWrapper) Name(name string) *NodeWrapper {
	n.ObjectMetaOptions.Name(name)
	return n.Label(v1.LabelHostname, name)
}

// Zone sets the topology.kubernetes.io/zone label.
func (n *NodeWrapper) Zone(z string) *NodeWrapper { return n.Label(v1.LabelTopologyZone, z) }

// Region sets the topology.kubernetes.io/region label.
func (n *NodeWrapper) Region(r string) *NodeWrapper { return n.Label(v1.LabelTopologyRegion, r) }

// Taint adds a taint.
func (n *NodeWrapper) Taint(key, value string, effect v1.TaintEffect) *NodeWrapper {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	return n
}

// Unschedulable sets spec.unschedulable (what `kubectl cordon` does). It
// does not add the node.kubernetes.io/unschedulable taint, which the node
// lifecycle controller adds later; use Cordoned for both.
func (n *NodeWrapper) Unschedulable() *NodeWrapper {
	n.Spec.Unschedulable = true
	return n
}

// Cordoned sets spec.unschedulable and the node.kubernetes.io/unschedulable
// NoSchedule taint, as a cordoned node carries them once the node lifecycle
// controller has seen it.
func (n *NodeWrapper) Cordoned() *NodeWrapper {
	return n.Unschedulable().Taint(v1.TaintNodeUnschedulable, "", v1.TaintEffectNoSchedule)
}

// Nodes builds count nodes named prefix-0 ... prefix-(count-1), each
// shaped by the same options, e.g.
// Nodes("a", 3, func(n *NodeWrapper) { n.Zone("a") }).
func Nodes(prefix string, count int, opts ...func(*NodeWrapper)) []*v1.Node {
	out := make([]*v1.Node, 0, count)
	for i := range count {
		w := MakeNode().Name(prefix + "-" + strconv.Itoa(i))
		for _, o := range opts {
			o(w)
		}
		out = append(out, w.Obj())
	}
	return out
}
