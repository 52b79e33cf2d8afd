package autoscale

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
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

// zoneSources are where the zones of a NodePool come from, in order: its
// node class's status, the operator's list, the zones seen on nodes.
type zoneSources struct {
	classes map[classKey][]string
	list    []string
	seen    []string
}

func newZoneSources(classes []NodeClass, list, seen []string) zoneSources {
	zs := zoneSources{classes: make(map[classKey][]string, len(classes)), seen: seen}
	for _, c := range classes {
		if len(c.Zones) > 0 {
			zs.classes[classKey{c.Group, c.Kind, c.Name}] = sortedSet(c.Zones)
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

// served returns the zones np's node class serves; ok is false when no
// node class of np names zones (none referenced, one spreadguard does not
// read, one not found, or one whose status lists no subnet yet).
func (zs zoneSources) served(np *karpenterv1.NodePool) (zones []string, ok bool) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return nil, false
	}
	zones, ok = zs.classes[classKey{ref.Group, ref.Kind, ref.Name}]
	return zones, ok
}

// resolve returns the zones a new node of np may come up in, given r, np's
// requirement on the zone, and, when np requires zones its node class does
// not serve, which ones.
//
// A requirement that names zones (In, or a template label) gives them,
// less those a node class that names zones does not serve: Karpenter only
// launches in the zones of its node class's subnets. A requirement that
// leaves the zone open (none, Exists, NotIn) takes the zones of the node
// class, else the operator's list, else the zones seen on nodes, less the
// NotIn ones. DoesNotExist gives none.
func (zs zoneSources) resolve(np *karpenterv1.NodePool, r *requirement) ([]string, *UnservedZones) {
	served, known := zs.served(np)
	if r == nil || !r.hasIn {
		candidates := zs.seen
		switch {
		case known:
			candidates = served
		case len(zs.list) > 0:
			candidates = zs.list
		}
		return r.resolve(v1.LabelTopologyZone, candidates), nil
	}
	wanted := r.resolve(v1.LabelTopologyZone, nil)
	if !known || r.absent {
		return wanted, nil
	}
	var zones, unserved []string
	for _, z := range wanted {
		if _, ok := slices.BinarySearch(served, z); ok {
			zones = append(zones, z)
		} else {
			unserved = append(unserved, z)
		}
	}
	if len(unserved) == 0 {
		return zones, nil
	}
	return zones, &UnservedZones{NodePool: np.Name, NodeClass: *np.Spec.Template.Spec.NodeClassRef, Zones: unserved, Served: served}
}
