package autoscale

import (
	"cmp"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Declared is one NodeTemplate (spreadguard.io/v1alpha1): a node shape an
// operator declares, typically a node group scaled to zero that no
// existing node shows. The caller converts the objects; Name is the
// object's name.
type Declared struct {
	Name   string
	Labels map[string]string
	Taints []v1.Taint
}

// Inputs is what templates are derived from. Derive only reads it.
type Inputs struct {
	// Nodes are the cluster's nodes: the zones (and other topology values)
	// seen on them, and the node groups they belong to.
	Nodes []*v1.Node
	// Declared are the NodeTemplate objects.
	Declared []Declared
	// NodePools are Karpenter's NodePools; nil when the CRD is not
	// installed or Karpenter awareness is off.
	NodePools []*karpenterv1.NodePool
	// NodeClasses are the node classes of Karpenter's cloud providers whose
	// status names zones (EC2NodeClass, EKS Auto Mode's NodeClass): the
	// zones of the NodePools that name them.
	NodeClasses []NodeClass
	// Zones are the zones new nodes may come up in, as the operator lists
	// them where nothing in the API says so: the zones of a NodePool that
	// leaves the zone open and whose node class names none, and of a node
	// group whose nodes carry no zone.
	Zones []string
	// NodeGroupLabel is the node label naming a node's group, e.g.
	// eks.amazonaws.com/nodegroup; "" derives no node-group templates.
	NodeGroupLabel string
	// ClusterAutoscaler is what cluster-autoscaler's status ConfigMap says
	// of its node groups (ParseClusterAutoscalerStatus); nil without the
	// ConfigMap, and then every node group can grow.
	ClusterAutoscaler *ClusterAutoscalerStatus
	// SpreadKeys are the topology keys the policies spread on besides zone
	// and capacity type; a NodePool expands over their values too.
	SpreadKeys []string
}

// Derived is what Derive finds: the templates, and what an operator must
// hear about because pods would wait for a node that never comes.
type Derived struct {
	// Templates are sorted by name, names unique.
	Templates []spread.Template
	// UnservedZones are the NodePools that require zones their node class
	// does not serve and no source serves: no node is in them, and no
	// template of any source (another NodePool, a node group, a
	// NodeTemplate) carries them. Sorted by NodePool.
	UnservedZones []UnservedZones
	// FullGroups are the node groups cluster-autoscaler reports at their
	// maximum size: they yield no template. Sorted by name.
	FullGroups []NodeGroupSize
	// ScaledToZero are the node groups cluster-autoscaler's status names
	// at size 0 that no node shows, with the NodeTemplate to declare for
	// each. Sorted by name.
	ScaledToZero []ScaledToZero
}

// Findings returns the findings of d in sentences for the operator, each
// with its remedy: the NodePools that require zones their node class does
// not serve, then the node groups at their maximum size, then those
// scaled to zero. They name NodePools and node groups, so they are not
// for tenants under messageDetail: domains.
func (d Derived) Findings() []string {
	var out []string
	for _, u := range d.UnservedZones {
		out = append(out, u.Message())
	}
	for _, g := range d.FullGroups {
		out = append(out, g.Message())
	}
	for _, z := range d.ScaledToZero {
		out = append(out, z.Message())
	}
	return out
}

// Unserved returns the zones of d.UnservedZones one by one, with the
// NodePool and node class that require each, for the index
// (spread.Index.SetUnservedZones) and the health controller.
func (d Derived) Unserved() []spread.UnservedZone {
	var out []spread.UnservedZone
	for _, u := range d.UnservedZones {
		for _, z := range u.Zones {
			out = append(out, spread.UnservedZone{Zone: z, NodePool: u.NodePool, NodeClass: u.NodeClass.Kind + " " + u.NodeClass.Name})
		}
	}
	return spread.SortedUnservedZones(out)
}

// Templates returns Derive(in).Templates.
func Templates(in Inputs) []spread.Template { return Derive(in).Templates }

// Derive returns the templates of in, sorted by name, names unique: of
// two inputs that yield the same name (two NodeTemplates or NodePools of
// one name), the later one wins, as in an informer's store; and the
// findings of Derived.
//
//   - A Declared yields the template of its name, Source
//     "NodeTemplate <name>".
//   - A NodePool that can launch nodes yields one template per combination
//     of the values its requirements allow on the topology keys (zone,
//     capacity type, SpreadKeys), at most MaxTemplatesPerNodePool, named
//     "nodepool/<pool>/<values in key order, joined by ,>", Source
//     "NodePool <pool>" (the rules are at nodePoolTemplates, the zones'
//     at zoneSources).
//   - A node group yields one template per zone its nodes are in, named
//     "nodegroup/<group>/<zone>", Source "node group <group>", shaped like
//     one of those nodes (the rules are at nodeGroupTemplates), unless
//     cluster-autoscaler reports it at its maximum size.
func Derive(in Inputs) Derived {
	keys := topologyKeys(in.SpreadKeys)
	observed := slices.Clone(keys)
	for k := range wellKnownLabels {
		if !slices.Contains(observed, k) {
			observed = append(observed, k)
		}
	}
	seen := observe(in.Nodes, observed, in.NodeGroupLabel)
	var out []spread.Template
	for _, d := range in.Declared {
		out = append(out, spread.Template{
			Name:   d.Name,
			Source: "NodeTemplate " + d.Name,
			Labels: maps.Clone(d.Labels),
			Taints: slices.Clone(d.Taints),
		})
	}
	var d Derived
	zs := newZoneSources(in.NodeClasses, in.Zones, seen.values[v1.LabelTopologyZone], seen.zoneIDs)
	for _, np := range in.NodePools {
		ts, unserved := nodePoolTemplates(np, keys, seen.values, zs)
		out = append(out, ts...)
		if unserved != nil {
			d.UnservedZones = append(d.UnservedZones, *unserved)
		}
	}
	groups := expandZoneless(seen.groups, zs.list)
	if in.ClusterAutoscaler != nil {
		d.FullGroups, d.ScaledToZero = in.ClusterAutoscaler.judge(groups, in.NodeGroupLabel, in.Declared)
	}
	out = append(out, nodeGroupTemplates(groups)...)
	d.Templates = spread.UniqueTemplates(out)
	d.UnservedZones = servedElsewhere(d.UnservedZones, seen.values[v1.LabelTopologyZone], d.Templates)
	slices.SortFunc(d.UnservedZones, func(a, b UnservedZones) int { return cmp.Compare(a.NodePool, b.NodePool) })
	return d
}

// topologyKeys are the keys a NodePool expands over, in the order their
// values appear in a template's name: zone, capacity type, then the other
// spread keys sorted. kubernetes.io/hostname is left out: a new node is a
// new hostname whatever its NodePool says.
func topologyKeys(spreadKeys []string) []string {
	extra := slices.Clone(spreadKeys)
	slices.Sort(extra)
	extra = slices.Compact(extra)
	keys := []string{v1.LabelTopologyZone, karpenterv1.CapacityTypeLabelKey}
	for _, k := range extra {
		if k != "" && k != v1.LabelHostname && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// observation is what one pass over the nodes finds.
type observation struct {
	// values holds, for each topology key and well-known label, the
	// sorted values seen on nodes.
	values map[string][]string
	// groups holds the node each (group, zone) takes its shape from.
	groups map[groupZone]*v1.Node
	// zoneIDs holds the zone ID nodes carry in each zone
	// (nodeclassv1.LabelTopologyZoneID), the first sorted should they
	// disagree.
	zoneIDs map[string]string
}

// observe reads the nodes once.
func observe(nodes []*v1.Node, keys []string, groupLabel string) observation {
	sets := make([]map[string]struct{}, len(keys))
	// last holds the value last added to each set: nodes mostly repeat
	// their neighbour's region, os or zone, and a string comparison is
	// cheaper than hashing it again.
	last := make([]string, len(keys))
	for i := range keys {
		sets[i] = map[string]struct{}{}
	}
	groups := map[groupZone]*v1.Node{}
	var zoneIDs map[string]string
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if id, ok := n.Labels[nodeclassv1.LabelTopologyZoneID]; ok && id != "" {
			if z := n.Labels[v1.LabelTopologyZone]; z != "" {
				if zoneIDs == nil {
					zoneIDs = map[string]string{}
				}
				if cur, ok := zoneIDs[z]; !ok || id < cur {
					zoneIDs[z] = id
				}
			}
		}
		for i, k := range keys {
			if v, ok := n.Labels[k]; ok && (v != last[i] || len(sets[i]) == 0) {
				sets[i][v] = struct{}{}
				last[i] = v
			}
		}
		if groupLabel == "" {
			continue
		}
		g, ok := n.Labels[groupLabel]
		if !ok || g == "" {
			continue
		}
		gz := groupZone{group: g, zone: n.Labels[v1.LabelTopologyZone]}
		if cur, ok := groups[gz]; !ok || betterModel(n, cur) {
			groups[gz] = n
		}
	}
	values := make(map[string][]string, len(keys))
	for i, k := range keys {
		values[k] = slices.Sorted(maps.Keys(sets[i]))
	}
	return observation{values: values, groups: groups, zoneIDs: zoneIDs}
}
