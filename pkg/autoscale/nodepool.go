package autoscale

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// MaxTemplatesPerNodePool bounds the templates one NodePool expands into,
// so that a NodePool allowing thousands of values on some spread key costs
// a bounded check per pod (three zones and three capacity types make 9).
// Past it the first MaxTemplatesPerNodePool combinations are kept, in the
// order of the keys (zone first) and of their sorted values; the others
// are dropped, so a pod that only a dropped combination fits is judged
// without it (denied, if nothing else fits).
const MaxTemplatesPerNodePool = 64

// nodePoolTemplates returns the templates of the nodes Karpenter can launch
// from np for a pending pod: one per combination of the values np allows
// on the topology keys, each value pinned as a label, since the new node
// carries exactly one value of each key; and, when np requires zones its
// node class does not serve, which ones.
//
// On a topology key, the values are those of the requirements with
// operator In (and of spec.template.metadata.labels, which Karpenter also
// treats as requirements), intersected; without In, those seen on the
// cluster's nodes when the key has Exists, NotIn, Gt, Lt, Gte or Lte, or
// when Karpenter sets it on every node it launches (zone, capacity type,
// region, ...: WellKnownLabels); NotIn values are removed and the numeric
// bounds applied. The zone and its zone ID (topology.k8s.aws/zone-id) are
// the exception: they are resolved together, as the places a node can come
// up in (zoneSources.resolve: the node class's subnets, else the zones a
// requirement names, the operator's list or the nodes', each with its zone
// ID), kept where the requirements on both keys admit them; each template
// carries the zone and, when known, the zone ID of its place. Another key
// with DoesNotExist, or left with no value, is not a label of the
// templates (a node without the key counts in no domain of it).
//
// Every template carries spec.template.metadata.labels,
// karpenter.sh/nodepool=<name>, and spec.template.spec.taints. Not
// startupTaints: Karpenter does not require pods to tolerate them, and
// they go once the node is ready. Each other key is a label when it
// resolves, as above, to exactly one value: a single-valued In, or a
// well-known key on which all the nodes agree (kubernetes.io/os=linux, the
// region), so that the common nodeSelectors match. Known limitation: a key
// left with several values (arch In amd64, arm64) or none known (Exists on
// a custom key) is no label, although Karpenter's node will have one; a
// pod that requires that key then does not match the template.
//
// A NodePool that cannot launch a node yields none: being deleted, static
// (spec.replicas set), Ready=False, at its limits (see limitsReached), or
// requiring only places its node class does not serve or its requirements
// exclude.
// See https://github.com/kubernetes-sigs/karpenter/blob/v1.15.0/pkg/controllers/provisioning/provisioner.go
// (NewScheduler) and scheduling/nodeclaimtemplate.go beside it.
//
// Name "nodepool/<name>/<values of the labelled topology keys, in key
// order, joined by ,>"; Source "NodePool <name>".
func nodePoolTemplates(np *karpenterv1.NodePool, keys []string, seen map[string][]string, zs zoneSources) ([]spread.Template, *UnservedZones) {
	if np == nil || !launches(np) {
		return nil, nil
	}
	reqs := requirementsOf(np)
	places, unserved := zs.resolve(np, reqs[v1.LabelTopologyZone], reqs[nodeclassv1.LabelTopologyZoneID])
	if len(places) == 0 {
		return nil, unserved
	}
	labels := maps.Clone(np.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	label := func(key string) {
		if slices.Contains(keys, key) || key == nodeclassv1.LabelTopologyZoneID {
			return
		}
		if vs := reqs[key].resolve(key, seen[key]); len(vs) == 1 {
			labels[key] = vs[0]
		} else {
			delete(labels, key)
		}
	}
	for key := range reqs {
		label(key)
	}
	for key := range wellKnownLabels {
		label(key)
	}
	// The zone and its zone ID come from places; every other topology key
	// is an axis of its own.
	type axis struct {
		key    string
		values []string
	}
	var axes []axis
	delete(labels, v1.LabelTopologyZone)
	delete(labels, nodeclassv1.LabelTopologyZoneID)
	for _, key := range keys {
		if key == v1.LabelTopologyZone || key == nodeclassv1.LabelTopologyZoneID {
			continue
		}
		delete(labels, key)
		if vs := reqs[key].resolve(key, seen[key]); len(vs) > 0 {
			axes = append(axes, axis{key, vs})
		}
	}
	// After the topology keys, in case karpenter.sh/nodepool is one.
	labels[karpenterv1.NodePoolLabelKey] = np.Name

	var out []spread.Template
	combo := make(map[string]string, len(axes)+2)
	name := make([]string, 0, len(keys))
	var expand func(i int)
	expand = func(i int) {
		if len(out) == MaxTemplatesPerNodePool {
			return
		}
		if i < len(axes) {
			for _, v := range axes[i].values {
				combo[axes[i].key] = v
				expand(i + 1)
			}
			return
		}
		ls := maps.Clone(labels)
		name = name[:0]
		for _, key := range keys {
			if v, ok := combo[key]; ok && v != "" {
				ls[key] = v
				name = append(name, v)
			}
		}
		if v := combo[nodeclassv1.LabelTopologyZoneID]; v != "" {
			ls[nodeclassv1.LabelTopologyZoneID] = v
		}
		out = append(out, spread.Template{
			Name:   "nodepool/" + np.Name + "/" + strings.Join(name, ","),
			Source: "NodePool " + np.Name,
			Labels: ls,
			Taints: slices.Clone(np.Spec.Template.Spec.Taints),
		})
	}
	for _, p := range places {
		combo[v1.LabelTopologyZone], combo[nodeclassv1.LabelTopologyZoneID] = p.zone, p.zoneID
		expand(0)
	}
	return out, unserved
}

// launches reports whether Karpenter would launch a node from np for a
// pending pod.
func launches(np *karpenterv1.NodePool) bool {
	if np.DeletionTimestamp != nil || np.Spec.Replicas != nil {
		return false
	}
	// Karpenter skips a NodePool that is not Ready=True. Only an explicit
	// False counts here: a NodePool whose status nobody has written yet is
	// about to become Ready, and a missed template can deny a pod, while an
	// extra one only admits it.
	if c := meta.FindStatusCondition(np.Status.Conditions, karpenterv1.ConditionTypeReady); c != nil && c.Status == metav1.ConditionFalse {
		return false
	}
	return !limitsReached(np)
}

// limitsReached reports whether np's nodes already use up one of its
// limits. Karpenter refuses to launch when usage exceeds a limit, and
// otherwise only launches instance types whose capacity fits in what is
// left (limit - usage) of every limited resource. Every node has some cpu,
// memory, ephemeral storage and pods, and counts 1 in "nodes", so a
// limit on those is reached at usage == limit; a limit on another
// resource (nvidia.com/gpu) at usage == limit still lets instance types
// without it launch.
// See filterByRemainingResources in
// https://github.com/kubernetes-sigs/karpenter/blob/v1.15.0/pkg/controllers/provisioning/scheduling/scheduler.go
func limitsReached(np *karpenterv1.NodePool) bool {
	for name, limit := range np.Spec.Limits {
		usage := np.Status.Resources[name] // absent: nothing used yet
		switch c := usage.Cmp(limit); {
		case c > 0:
			return true
		case c == 0 && everyNodeHas(name):
			return true
		}
	}
	return false
}

func everyNodeHas(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods, karpenterv1.ResourceNodes:
		return true
	}
	return false
}

// wellKnownLabels are the labels Karpenter (with its cloud provider) sets
// on every node it launches, whether or not a requirement names them:
// WellKnownLabels of
// https://github.com/kubernetes-sigs/karpenter/blob/v1.15.0/pkg/apis/v1/labels.go
// (karpenter.sh/nodepool is set from the NodePool's name instead).
var wellKnownLabels = map[string]bool{
	v1.LabelTopologyZone:             true,
	v1.LabelTopologyRegion:           true,
	v1.LabelInstanceTypeStable:       true,
	v1.LabelArchStable:               true,
	v1.LabelOSStable:                 true,
	karpenterv1.CapacityTypeLabelKey: true,
	v1.LabelWindowsBuild:             true,
}

// requirement is what a NodePool's requirements (and template labels) on
// one key add up to: Karpenter intersects them.
type requirement struct {
	// hasIn: some In (or label) names the values; in is their
	// intersection.
	hasIn bool
	in    []string
	notIn []string
	// present: Exists, NotIn or a numeric bound asks for the key without
	// naming values.
	present bool
	absent  bool
	// bounds are the Gt, Lt, Gte and Lte requirements.
	bounds []karpenterv1.NodeSelectorRequirementWithMinValues
}

// requirementsOf gathers np's requirements and template labels by key.
func requirementsOf(np *karpenterv1.NodePool) map[string]*requirement {
	return requirementsFrom(np.Spec.Template.Labels, np.Spec.Template.Spec.Requirements)
}

// requirementsFrom gathers labels (each a single-valued In) and reqs by
// key, as requirementsOf does for a NodePool's template; a NodeClaim's
// labels and spec.requirements take the same shape.
func requirementsFrom(labels map[string]string, nodeReqs []karpenterv1.NodeSelectorRequirementWithMinValues) map[string]*requirement {
	reqs := map[string]*requirement{}
	get := func(key string) *requirement {
		r, ok := reqs[key]
		if !ok {
			r = &requirement{}
			reqs[key] = r
		}
		return r
	}
	for k, v := range labels {
		get(k).restrictTo([]string{v})
	}
	for _, nr := range nodeReqs {
		r := get(nr.Key)
		switch nr.Operator {
		case v1.NodeSelectorOpIn:
			r.restrictTo(nr.Values)
		case v1.NodeSelectorOpNotIn:
			r.present = true
			r.notIn = append(r.notIn, nr.Values...)
		case v1.NodeSelectorOpExists:
			r.present = true
		case v1.NodeSelectorOpDoesNotExist:
			r.absent = true
		case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt, karpenterv1.NodeSelectorOpGte, karpenterv1.NodeSelectorOpLte:
			r.present = true
			r.bounds = append(r.bounds, nr)
		}
	}
	return reqs
}

func (r *requirement) restrictTo(values []string) {
	if !r.hasIn {
		r.hasIn, r.in = true, slices.Clone(values)
		return
	}
	r.in = slices.DeleteFunc(r.in, func(v string) bool { return !slices.Contains(values, v) })
}

// admits reports whether a node whose value of r's key is v meets r. A
// known value is judged as the scheduler judges a node's label: In names
// it, NotIn does not, DoesNotExist never holds, and the numeric bounds
// apply. An unknown value ("": a zone when nothing names any, a zone ID
// nothing says) fails only In, which names the values a node can have;
// the node will carry some value, so the others are not judged. A nil r
// (no requirement) admits every value.
func (r *requirement) admits(v string) bool {
	switch {
	case r == nil:
		return true
	case v == "":
		return !r.hasIn
	case r.absent, r.hasIn && !slices.Contains(r.in, v):
		return false
	}
	return !slices.Contains(r.notIn, v) && r.withinBounds(v)
}

// resolve returns the sorted values a new node may carry on topology key
// key, given the values seen on the cluster's nodes; nil when it carries
// no label for the key (or when nothing is known of its values).
func (r *requirement) resolve(key string, seen []string) []string {
	switch {
	case r == nil && wellKnownLabels[key]:
		return seen
	case r == nil || r.absent:
		return nil
	case r.hasIn:
		return r.allowed(r.in)
	case r.present || wellKnownLabels[key]:
		return r.allowed(seen)
	}
	return nil
}

// allowed returns the sorted, distinct values of candidates that pass the
// NotIn and numeric requirements.
func (r *requirement) allowed(candidates []string) []string {
	if r.absent {
		return nil
	}
	out := make([]string, 0, len(candidates))
	for _, v := range candidates {
		if !slices.Contains(r.notIn, v) && r.withinBounds(v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// withinBounds applies Gt, Lt, Gte and Lte, which compare integers: a
// value that is not one passes none of them, as in Karpenter.
func (r *requirement) withinBounds(v string) bool {
	if len(r.bounds) == 0 {
		return true
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return false
	}
	for _, b := range r.bounds {
		if len(b.Values) != 1 {
			continue
		}
		bound, err := strconv.Atoi(b.Values[0])
		if err != nil {
			continue
		}
		switch b.Operator {
		case v1.NodeSelectorOpGt:
			if n <= bound {
				return false
			}
		case v1.NodeSelectorOpLt:
			if n >= bound {
				return false
			}
		case karpenterv1.NodeSelectorOpGte:
			if n < bound {
				return false
			}
		case karpenterv1.NodeSelectorOpLte:
			if n > bound {
				return false
			}
		}
	}
	return true
}
