package autoscale

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// NodeClass is one node class of a Karpenter cloud provider and the zones
// its status says its nodes can come up in. The caller converts the
// objects; Group, Kind and Name are what a NodePool's
// spec.template.spec.nodeClassRef names.
type NodeClass struct {
	Group, Kind, Name string
	// Zones are the zones of the node class's resolved subnets; nil when
	// its status names none yet, which says nothing about them.
	Zones []string
	// ZoneIDs are the zone IDs of those zones (an EC2NodeClass's
	// status.subnets[].zoneID), by zone; a zone without one is not in it.
	ZoneIDs map[string]string
}

// UnservedZones is a NodePool that requires zones its node class does not
// serve. Karpenter never launches a node there, yet counts the zone as a
// topology domain, with 0 pods: a pod whose spread then asks for that zone
// stays Pending for ever
// (https://github.com/kubernetes-sigs/karpenter/issues/3272). spreadguard
// derives no template in those zones.
type UnservedZones struct {
	// NodePool is the NodePool's name.
	NodePool string
	// NodeClass is its nodeClassRef.
	NodeClass karpenterv1.NodeClassReference
	// Zones are the zones the NodePool requires that the node class does
	// not serve, sorted.
	Zones []string
	// Served are the zones the node class serves, sorted.
	Served []string
}

// Message is the finding in a sentence, with its remedy, for the
// operator: it names the NodePool and its node class, so it is not for
// tenants under messageDetail: domains.
func (u UnservedZones) Message() string {
	return fmt.Sprintf("NodePool %s requires %s, which its %s %s does not serve (its subnets are in %s): Karpenter never adds a node there but counts %s as a topology domain, so pods spread over %s can stay Pending. Remedy: remove %s from the NodePool's %s requirement, or give the %s a subnet in %s.",
		u.NodePool, zoneWords(u.Zones), u.NodeClass.Kind, u.NodeClass.Name, strings.Join(u.Served, ", "),
		itThem(u.Zones), itThem(u.Zones), strings.Join(u.Zones, ", "), v1.LabelTopologyZone, u.NodeClass.Kind, strings.Join(u.Zones, ", "))
}

func zoneWords(zones []string) string {
	if len(zones) == 1 {
		return "zone " + zones[0]
	}
	return "zones " + strings.Join(zones, ", ")
}

func itThem(zones []string) string {
	if len(zones) == 1 {
		return "it"
	}
	return "them"
}

// classKey identifies a node class as a nodeClassRef names it.
type classKey struct{ group, kind, name string }

// placement is where one new node of a NodePool comes up: a zone and its
// zone ID (nodeclassv1.LabelTopologyZoneID). Either is "" when unknown:
// the zone when nothing names any zone, the zone ID when neither the node
// class nor a node in the zone says it.
type placement struct{ zone, zoneID string }

// zoneSources are where the zones of a NodePool come from, in order: its
// node class's status, the operator's list, the zones seen on nodes; and
// the zone ID of each zone: the node class's, else the one seen on nodes.
type zoneSources struct {
	classes map[classKey]NodeClass
	list    []string
	seen    []string
	// seenIDs are the zone IDs nodes carry, by zone: the first sorted,
	// should nodes of one zone disagree.
	seenIDs map[string]string
}

func newZoneSources(classes []NodeClass, list, seen []string, seenIDs map[string]string) zoneSources {
	zs := zoneSources{classes: make(map[classKey]NodeClass, len(classes)), seen: seen, seenIDs: seenIDs}
	for _, c := range classes {
		if len(c.Zones) > 0 {
			c.Zones = sortedSet(c.Zones)
			zs.classes[classKey{c.Group, c.Kind, c.Name}] = c
		}
	}
	for _, z := range list {
		if z != "" {
			zs.list = append(zs.list, z)
		}
	}
	zs.list = sortedSet(zs.list)
	return zs
}

func sortedSet(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// class returns np's node class when it names zones; ok is false when no
// node class of np does (none referenced, one spreadguard does not read,
// one not found, or one whose status lists no subnet yet).
func (zs zoneSources) class(np *karpenterv1.NodePool) (c NodeClass, ok bool) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return NodeClass{}, false
	}
	c, ok = zs.classes[classKey{ref.Group, ref.Kind, ref.Name}]
	return c, ok
}

// zoneID returns the zone ID of zone: c's, else the one nodes in the zone
// carry, else "".
func (zs zoneSources) zoneID(c NodeClass, zone string) string {
	if id, ok := c.ZoneIDs[zone]; ok && id != "" {
		return id
	}
	return zs.seenIDs[zone]
}

// resolve returns where a new node of np may come up, given zr and idr,
// np's requirements on the zone and on the zone ID; and, when np requires
// zones its node class does not serve, which ones.
//
// The candidates are the zones of np's node class, when it names zones:
// Karpenter only launches in the zones of its node class's subnets. Else
// the zones a requirement names (In, or a template label), else the
// operator's list, else the zones seen on nodes; and, when none of these
// names a zone, one node whose zone is unknown. Each candidate zone takes
// its zone ID (zoneID). A candidate is kept when both requirements admit
// it (see admits): a node of np carries one zone and the zone ID of that
// zone, so a requirement on either narrows both.
//
// The unserved zones are those an In on the zone names (less its NotIn)
// that np's node class serves none of.
func (zs zoneSources) resolve(np *karpenterv1.NodePool, zr, idr *requirement) ([]placement, *UnservedZones) {
	c, known := zs.class(np)
	var names []string
	switch {
	case known:
		names = c.Zones
	case zr != nil && zr.hasIn:
		names = sortedSet(zr.in)
	case len(zs.list) > 0:
		names = zs.list
	default:
		names = zs.seen
	}
	candidates := make([]placement, 0, max(len(names), 1))
	for _, z := range names {
		candidates = append(candidates, placement{zone: z, zoneID: zs.zoneID(c, z)})
	}
	if len(candidates) == 0 {
		candidates = append(candidates, placement{})
	}
	out := candidates[:0]
	for _, p := range candidates {
		if zr.admits(p.zone) && idr.admits(p.zoneID) {
			out = append(out, p)
		}
	}
	if !known || zr == nil || !zr.hasIn || zr.absent {
		return out, nil
	}
	var unserved []string
	for _, z := range zr.allowed(zr.in) {
		if _, ok := slices.BinarySearch(c.Zones, z); !ok {
			unserved = append(unserved, z)
		}
	}
	if len(unserved) == 0 {
		return out, nil
	}
	return out, &UnservedZones{NodePool: np.Name, NodeClass: *np.Spec.Template.Spec.NodeClassRef, Zones: unserved, Served: c.Zones}
}

// servedElsewhere removes from each of unserved the zones that an existing
// node is in (seen) or that a template of any source carries: a pod that
// needs such a zone gets a node there, from that node or source, so the
// zone is not unserved. An entry left with no zone goes.
func servedElsewhere(unserved []UnservedZones, seen []string, templates []spread.Template) []UnservedZones {
	if len(unserved) == 0 {
		return unserved
	}
	served := make(map[string]bool, len(seen))
	for _, z := range seen {
		served[z] = true
	}
	for _, t := range templates {
		if z, ok := t.Labels[v1.LabelTopologyZone]; ok {
			served[z] = true
		}
	}
	out := unserved[:0]
	for _, u := range unserved {
		u.Zones = slices.DeleteFunc(slices.Clone(u.Zones), func(z string) bool { return served[z] })
		if len(u.Zones) > 0 {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
