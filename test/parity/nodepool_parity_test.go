package parity

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/lookup"
)

// labelZoneID is the zone-ID label of Karpenter's AWS provider.
const labelZoneID = "topology.k8s.aws/zone-id"

// nodePoolStream keeps the NodePool cases apart from the other cases of the
// same seed.
const nodePoolStream uint64 = 0x2c0e1d

var (
	// poolZones are the zones the NodePool cases draw from: the cluster
	// cases' and zone-z, which no subnet is ever in.
	poolZones = append(append(slices.Clone(zones), newZone), "zone-z")
	// zoneIDOf is the one zone ID of each zone, as in one AWS account.
	zoneIDOf = map[string]string{"zone-a": "az1", "zone-b": "az2", "zone-c": "az3", "zone-d": "az4", "zone-e": "az5", "zone-z": "az9"}
	// poolZoneIDs are the zone IDs the requirements draw from.
	poolZoneIDs = []string{"az1", "az2", "az3", "az4", "az5", "az9"}
	// classRefs are the node classes a NodePool may name: two
	// EC2NodeClasses, EKS Auto Mode's NodeClass, and a KWOKNodeClass that
	// spreadguard does not read.
	classRefs = []karpenterv1.NodeClassReference{
		{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "default"},
		{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "east"},
		{Group: nodeclassv1.EKSGroupName, Kind: nodeclassv1.KindNodeClass, Name: "default"},
		{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
	}
	zoneOperators = []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist}
)

// nodePoolCase is a cluster of nodes, node classes, NodePools with
// requirements on the zone and the zone ID, and NodeTemplates.
type nodePoolCase struct {
	Nodes []*v1.Node
	// Subnets are the status.subnets of each node class by reference; a
	// class not in it is not in the cluster.
	Subnets map[karpenterv1.NodeClassReference][]nodeclassv1.Subnet
	// Strip says the node classes go through the webhook cache's transform.
	Strip     bool
	Pools     []*karpenterv1.NodePool
	Declared  []*v1alpha1.NodeTemplate
	List      []string
	SpreadsID bool
}

// nodePoolCase draws 0-4 nodes (most with their zone ID), the node classes
// (subnets in some zones, some without a zone ID, some unresolved), the
// operator's list now and then, 1-3 NodePools with 0-2 requirements on
// each of the zone and the zone ID, of every operator, over zones and
// zone IDs served and not, a template label on either now and then, and
// one at its limits now and then; and sometimes a NodeTemplate.
func (g *gen) nodePoolCase() *nodePoolCase {
	c := &nodePoolCase{Subnets: map[karpenterv1.NodeClassReference][]nodeclassv1.Subnet{}, Strip: g.chance(0.5)}
	for i := range g.intn(0, 4) {
		z := pick(g, zones)
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{labelZone: z}}}
		if g.chance(0.7) {
			n.Labels[labelZoneID] = zoneIDOf[z]
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, ref := range classRefs[:3] {
		if g.chance(0.15) {
			continue // not in the cluster
		}
		var subnets []nodeclassv1.Subnet
		for _, z := range some(g, poolZones[:5], 0.5) {
			for range g.intn(1, 2) {
				s := nodeclassv1.Subnet{Zone: z}
				if g.chance(0.8) {
					s.ZoneID = zoneIDOf[z]
				}
				subnets = append(subnets, s)
			}
		}
		c.Subnets[ref] = subnets // none: not resolved yet
	}
	if g.chance(0.3) {
		c.List = some(g, poolZones[:5], 0.5)
	}
	for i := range g.intn(1, 3) {
		c.Pools = append(c.Pools, g.zoneRequiringPool(fmt.Sprintf("pool-%d", i)))
	}
	if g.chance(0.25) {
		c.Declared = append(c.Declared, &v1alpha1.NodeTemplate{ObjectMeta: metav1.ObjectMeta{Name: "declared"},
			Spec: v1alpha1.NodeTemplateSpec{Labels: map[string]string{labelZone: pick(g, poolZones)}}})
	}
	c.SpreadsID = g.chance(0.3)
	return c
}

func (g *gen) zoneRequiringPool(name string) *karpenterv1.NodePool {
	np := &karpenterv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	spec := &np.Spec.Template.Spec
	if g.chance(0.9) {
		spec.NodeClassRef = ptrTo(pick(g, classRefs))
	}
	requirement := func(key string, values []string) {
		op := pick(g, zoneOperators)
		r := karpenterv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op}
		switch op {
		case v1.NodeSelectorOpIn:
			r.Values = some(g, values, 0.4)
			if len(r.Values) == 0 {
				r.Values = []string{pick(g, values)}
			}
		case v1.NodeSelectorOpNotIn:
			r.Values = []string{pick(g, values)}
		}
		spec.Requirements = append(spec.Requirements, r)
	}
	for range g.intn(0, 2) {
		requirement(labelZone, poolZones)
	}
	for range g.intn(0, 2) {
		requirement(labelZoneID, poolZoneIDs)
	}
	spec.Requirements = append(spec.Requirements, karpenterv1.NodeSelectorRequirementWithMinValues{
		Key: labelCapacityType, Operator: v1.NodeSelectorOpIn, Values: pick(g, [][]string{{"on-demand"}, {"spot", "on-demand"}}),
	})
	if g.chance(0.1) {
		np.Spec.Template.Labels = map[string]string{labelZone: pick(g, poolZones)}
	} else if g.chance(0.1) {
		np.Spec.Template.Labels = map[string]string{labelZoneID: pick(g, poolZoneIDs)}
	}
	if g.chance(0.1) {
		np.Spec.Limits = v1.ResourceList{karpenterv1.ResourceNodes: resource.MustParse("3")}
		np.Status.Resources = v1.ResourceList{karpenterv1.ResourceNodes: resource.MustParse("3")}
	}
	return np
}

func ptrTo[T any](v T) *T { return &v }

// objects are the case's objects as a cluster file or the API server holds
// them.
func (c *nodePoolCase) objects() []runtime.Object {
	var out []runtime.Object
	for _, n := range c.Nodes {
		out = append(out, n.DeepCopy())
	}
	for _, ref := range slices.SortedFunc(maps.Keys(c.Subnets), compareRefs) {
		status := nodeclassv1.NodeClassStatus{Subnets: slices.Clone(c.Subnets[ref])}
		var obj runtime.Object
		if ref.Kind == nodeclassv1.KindEC2NodeClass {
			obj = &nodeclassv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}, Status: status}
		} else {
			obj = &nodeclassv1.NodeClass{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}, Status: status}
		}
		if c.Strip {
			stripped, err := cache.StripNodeClass(obj)
			if err != nil {
				panic(err)
			}
			obj = stripped.(runtime.Object)
		}
		out = append(out, obj)
	}
	for _, np := range c.Pools {
		out = append(out, np.DeepCopy())
	}
	for _, d := range c.Declared {
		out = append(out, d.DeepCopy())
	}
	if c.SpreadsID {
		out = append(out, &v1alpha1.SpreadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "by-zone-id", Namespace: "team-a"}, Spec: v1alpha1.SpreadPolicySpec{
			Constraints: []v1alpha1.Constraint{{TopologyKey: labelZoneID, MaxSkew: 1, WhenUnsatisfiable: v1.DoNotSchedule}},
		}})
	}
	return out
}

func compareRefs(a, b karpenterv1.NodeClassReference) int {
	return strings.Compare(a.Group+"/"+a.Kind+"/"+a.Name, b.Group+"/"+b.Kind+"/"+b.Name)
}

// nodePoolOutcome is what the NodePools of a case give, in the terms the
// oracle can say without naming templates: one line per template, "<pool>
// zone=<z> zone-id=<id> capacity=<type>" sorted, and one per unserved
// zone, "<pool> <zone>" sorted.
type nodePoolOutcome struct {
	Templates []string
	Unserved  []string
}

// oracle enumerates what the NodePools of c give, on its own terms: for each
// NodePool that can launch, the places its node class serves (each subnet's
// zone with its zone ID, else the zone ID nodes in that zone carry), or,
// where its node class names no zone, the zones every In on the zone names,
// else the operator's list, else the zones of the nodes (each with the
// nodes' zone ID), else one place of unknown zone; a place is kept when
// every requirement and template label on the zone and on the zone ID
// holds for it, judged one by one (In: the value is named; NotIn: it is
// not; Exists: always; DoesNotExist: never; an unknown value fails only
// In). The zones a NodePool names by In (and not by NotIn, without
// DoesNotExist) that its node class does not serve are unserved unless a
// node is there or a template of any source is.
func (c *nodePoolCase) oracle() nodePoolOutcome {
	nodeID := map[string]string{}
	var nodeZones []string
	for _, n := range c.Nodes {
		z := n.Labels[labelZone]
		nodeZones = append(nodeZones, z)
		if id, ok := n.Labels[labelZoneID]; ok && (nodeID[z] == "" || id < nodeID[z]) {
			nodeID[z] = id
		}
	}
	var out nodePoolOutcome
	type unservedZone struct{ pool, zone string }
	var unserved []unservedZone
	served := map[string]bool{}
	for _, z := range nodeZones {
		served[z] = true
	}
	for _, d := range c.Declared {
		served[d.Spec.Labels[labelZone]] = true
	}
	for _, np := range c.Pools {
		if _, limited := np.Spec.Limits[karpenterv1.ResourceNodes]; limited {
			continue // at its limit of 3 nodes
		}
		reqs := func(key string) []karpenterv1.NodeSelectorRequirementWithMinValues {
			var rs []karpenterv1.NodeSelectorRequirementWithMinValues
			if v, ok := np.Spec.Template.Labels[key]; ok {
				rs = append(rs, karpenterv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: v1.NodeSelectorOpIn, Values: []string{v}})
			}
			for _, r := range np.Spec.Template.Spec.Requirements {
				if r.Key == key {
					rs = append(rs, r)
				}
			}
			return rs
		}
		zoneReqs, idReqs := reqs(labelZone), reqs(labelZoneID)
		holds := func(rs []karpenterv1.NodeSelectorRequirementWithMinValues, v string) bool {
			for _, r := range rs {
				ok := false
				switch {
				case v == "":
					ok = r.Operator != v1.NodeSelectorOpIn
				case r.Operator == v1.NodeSelectorOpIn:
					ok = slices.Contains(r.Values, v)
				case r.Operator == v1.NodeSelectorOpNotIn:
					ok = !slices.Contains(r.Values, v)
				case r.Operator == v1.NodeSelectorOpExists:
					ok = true
				}
				if !ok {
					return false
				}
			}
			return true
		}
		// named are the zones every In on the zone names, nil without one.
		var named []string
		anyIn := false
		for _, r := range zoneReqs {
			if r.Operator != v1.NodeSelectorOpIn {
				continue
			}
			if !anyIn {
				named, anyIn = slices.Clone(r.Values), true
				continue
			}
			named = slices.DeleteFunc(named, func(z string) bool { return !slices.Contains(r.Values, z) })
		}
		type place struct{ zone, id string }
		var places []place
		var classZones []string
		var hasClass bool
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			for _, s := range c.Subnets[*ref] {
				if !slices.ContainsFunc(places, func(p place) bool { return p.zone == s.Zone }) {
					places = append(places, place{zone: s.Zone})
					classZones = append(classZones, s.Zone)
				}
				for i := range places {
					if places[i].zone == s.Zone && places[i].id == "" {
						places[i].id = s.ZoneID
					}
				}
			}
			hasClass = len(places) > 0
			for i := range places {
				if places[i].id == "" {
					places[i].id = nodeID[places[i].zone]
				}
			}
		}
		if !hasClass {
			names := nodeZones
			switch {
			case anyIn:
				names = named
			case len(c.List) > 0:
				names = c.List
			}
			for _, z := range names {
				if !slices.ContainsFunc(places, func(p place) bool { return p.zone == z }) {
					places = append(places, place{zone: z, id: nodeID[z]})
				}
			}
			if len(places) == 0 {
				places = []place{{}}
			}
		}
		var capacities []string
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == labelCapacityType {
				capacities = r.Values
			}
		}
		for _, p := range places {
			if !holds(zoneReqs, p.zone) || !holds(idReqs, p.id) {
				continue
			}
			served[p.zone] = true
			for _, ct := range capacities {
				out.Templates = append(out.Templates, fmt.Sprintf("%s zone=%s zone-id=%s capacity=%s", np.Name, p.zone, p.id, ct))
			}
		}
		doesNotExist := slices.ContainsFunc(zoneReqs, func(r karpenterv1.NodeSelectorRequirementWithMinValues) bool {
			return r.Operator == v1.NodeSelectorOpDoesNotExist
		})
		if !hasClass || !anyIn || doesNotExist {
			continue
		}
		for _, z := range named {
			excluded := slices.ContainsFunc(zoneReqs, func(r karpenterv1.NodeSelectorRequirementWithMinValues) bool {
				return r.Operator == v1.NodeSelectorOpNotIn && slices.Contains(r.Values, z)
			})
			if !excluded && !slices.Contains(classZones, z) {
				unserved = append(unserved, unservedZone{np.Name, z})
			}
		}
	}
	for _, u := range unserved {
		if !served[u.zone] {
			out.Unserved = append(out.Unserved, u.pool+" "+u.zone)
		}
	}
	slices.Sort(out.Templates)
	slices.Sort(out.Unserved)
	out.Unserved = slices.Compact(out.Unserved)
	return out
}

// derived is what lookup.Derive gives for c, in the oracle's terms, and
// whether its templates' labels disagree with their names.
func (c *nodePoolCase) derived(t *testing.T) (nodePoolOutcome, []string) {
	store, err := lookup.NewStore(c.objects()...)
	if err != nil {
		t.Fatalf("storing the case: %v", err)
	}
	d, err := lookup.Derive(t.Context(), store, lookup.TemplateOptions{NodeTemplates: true, Karpenter: true, Zones: c.List})
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	var out nodePoolOutcome
	var problems []string
	for _, tm := range d.Templates {
		pool, ok := strings.CutPrefix(tm.Source, "NodePool ")
		if !ok {
			continue
		}
		z, id := tm.Labels[labelZone], tm.Labels[labelZoneID]
		out.Templates = append(out.Templates, fmt.Sprintf("%s zone=%s zone-id=%s capacity=%s", pool, z, id, tm.Labels[labelCapacityType]))
		if id != "" && id != zoneIDOf[z] {
			problems = append(problems, fmt.Sprintf("template %s: zone %q and zone ID %q do not agree", tm.Name, z, id))
		}
		wantName := []string{z, tm.Labels[labelCapacityType]}
		if c.SpreadsID && id != "" {
			wantName = append(wantName, id)
		}
		wantName = slices.DeleteFunc(wantName, func(s string) bool { return s == "" })
		if want := "nodepool/" + pool + "/" + strings.Join(wantName, ","); tm.Name != want {
			problems = append(problems, fmt.Sprintf("template named %s, want %s", tm.Name, want))
		}
	}
	for _, u := range d.Unserved() {
		out.Unserved = append(out.Unserved, u.NodePool+" "+u.Zone)
	}
	slices.Sort(out.Templates)
	slices.Sort(out.Unserved)
	return out, problems
}

// TestNodePoolZonesParity holds the templates and unserved zones that
// lookup.Derive (through autoscale.Derive) finds for NodePools with
// requirements on the zone and the zone ID to an enumeration of its own
// (nodePoolCase.oracle), which calls neither; and every template's zone ID
// to its zone.
func TestNodePoolZonesParity(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay with -parity.seed=%d)", seed, seed)
			var failures []failure
			var templates, withID, unserved, none int
			indexes := caseIndexes(t)
			for _, i := range indexes {
				c := newGen(seed^nodePoolStream, i).nodePoolCase()
				want := c.oracle()
				got, problems := c.derived(t)
				if diff := cmp.Diff(want, got); diff != "" {
					problems = append(problems, "outcome (-oracle +Derive):\n"+diff)
				}
				if len(problems) > 0 {
					failures = append(failures, failure{index: i, size: len(c.Pools) + len(c.Nodes), text: formatNodePoolCase(c), diffs: problems})
				}
				templates += len(want.Templates)
				unserved += len(want.Unserved)
				if len(want.Templates) == 0 {
					none++
				}
				for _, s := range want.Templates {
					if !strings.Contains(s, "zone-id= ") {
						withID++
					}
				}
			}
			if len(failures) > 0 {
				slices.SortStableFunc(failures, func(a, b failure) int { return a.size - b.size })
				t.Errorf("%d of %d cases differ from the enumeration (seed %d); the smallest:", len(failures), len(indexes), seed)
				for _, f := range failures[:min(len(failures), maxReported)] {
					t.Errorf("case %d — replay: %s\n%s\ndifferences:\n  %s", f.index, replay("TestNodePoolZonesParity", seed, f.index), f.text, strings.Join(f.diffs, "\n  "))
				}
			}
			t.Logf("%d cases, %d differ: %d NodePool templates (%d with a zone ID), %d unserved zones, %d cases with no NodePool template",
				len(indexes), len(failures), templates, withID, unserved, none)
			if len(indexes) >= 500 && (withID < len(indexes) || unserved < len(indexes)/20 || none < len(indexes)/20 || none > len(indexes)/2) {
				t.Errorf("the generator no longer covers templates with zone IDs (%d), unserved zones (%d) and NodePools without templates (%d)", withID, unserved, none)
			}
		})
	}
}

func formatNodePoolCase(c *nodePoolCase) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "node %s %v\n", n.Name, n.Labels)
	}
	for _, ref := range slices.SortedFunc(maps.Keys(c.Subnets), compareRefs) {
		fmt.Fprintf(&b, "%s %s subnets %v\n", ref.Kind, ref.Name, c.Subnets[ref])
	}
	fmt.Fprintf(&b, "list %v, through the cache's transform %t, a policy spreads on zone-id %t\n", c.List, c.Strip, c.SpreadsID)
	for _, np := range c.Pools {
		fmt.Fprintf(&b, "NodePool %s nodeClassRef %v labels %v limits %v requirements:", np.Name, np.Spec.Template.Spec.NodeClassRef, np.Spec.Template.Labels, np.Spec.Limits)
		for _, r := range np.Spec.Template.Spec.Requirements {
			fmt.Fprintf(&b, " %s %s %v;", r.Key, r.Operator, r.Values)
		}
		b.WriteString("\n")
	}
	for _, d := range c.Declared {
		fmt.Fprintf(&b, "NodeTemplate %s %v\n", d.Name, d.Spec.Labels)
	}
	return b.String()
}
