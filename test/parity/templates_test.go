package parity

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

const (
	// labelCapacityType is the label Karpenter puts on the nodes of a
	// NodePool; no pod selects on it, so it only rides along.
	labelCapacityType = "karpenter.sh/capacity-type"
	// newZone is a zone no generated node is ever in, and that no pod's
	// nodeSelector or affinity names (they draw from zones).
	newZone = "zone-e"
	// freshNodeName is the name of the reference's fresh node of a template,
	// and its hostname when the template sets none. The generator's nodes
	// are node-<i> (node-gone for pods whose node was deleted) and its
	// template hostnames ip-10-0-<i>-<j> or copies of those, so it clashes
	// with none of them.
	freshNodeName = "fresh-node-of-template"
)

// templates draws 1-4 node templates of the kinds pkg/autoscale derives
// and users write, and now and then a name written twice (two NodeTemplate
// documents in one CLUSTER.yaml, or a NodeTemplate named like a derived
// template): the later one wins.
func (g *gen) templates(nodes []*v1.Node, nZones int, pod *v1.Pod) []spread.Template {
	var ts []spread.Template
	for i := range g.intn(1, 4) {
		switch x := g.r.Float64(); {
		case x < 0.3:
			ts = append(ts, g.nodeGroupTemplate(nodes))
		case x < 0.6:
			ts = append(ts, g.nodePoolTemplate(nZones))
		case x < 0.8:
			ts = append(ts, g.workloadTemplate(pod, nZones))
		default:
			ts = append(ts, g.writtenTemplate(i))
		}
	}
	if g.chance(0.2) {
		again := g.writtenTemplate(len(ts))
		again.Name = pick(g, ts).Name
		ts = append(ts, again)
	}
	if g.chance(0.3) {
		ts = append(ts, g.zonelessNodePoolTemplates(nodes, pod)...)
	}
	return ts
}

// zonelessPoolPrefix starts the names of zonelessNodePoolTemplates'
// templates, so that the statistics can count them.
const zonelessPoolPrefix = "nodepool/open-"

// zonelessNodePoolTemplates derives with pkg/autoscale the templates of a
// Karpenter NodePool whose requirements leave the zone open, as those of
// Karpenter's getting-started guide, of EKS Auto Mode and of the common
// Terraform modules do: no zone requirement, Exists, or NotIn one zone.
// Its zones come from its node class's status (an EC2NodeClass or EKS Auto
// Mode's NodeClass, with subnets in zones the nodes have and zones none
// has) or, where the node class names none or is not one spreadguard
// reads, from the operator's list.
func (g *gen) zonelessNodePoolTemplates(nodes []*v1.Node, pod *v1.Pod) []spread.Template {
	served := some(g, append(slices.Clone(zones), newZone), 0.5)
	if len(served) == 0 {
		served = []string{pick(g, zones)}
	}
	var classes []autoscale.NodeClass
	var list []string
	ref := karpenterv1.NodeClassReference{Group: nodeclassv1.EC2GroupName, Kind: nodeclassv1.KindEC2NodeClass, Name: "default"}
	name := "open-list"
	switch x := g.r.Float64(); {
	case x < 0.4:
		classes, name = []autoscale.NodeClass{{Group: ref.Group, Kind: ref.Kind, Name: ref.Name, Zones: served}}, "open-ec2"
	case x < 0.6:
		ref = karpenterv1.NodeClassReference{Group: nodeclassv1.EKSGroupName, Kind: nodeclassv1.KindNodeClass, Name: "default"}
		classes, name = []autoscale.NodeClass{{Group: ref.Group, Kind: ref.Kind, Name: ref.Name, Zones: served}}, "open-eks"
	case x < 0.8:
		// Its subnets are not resolved yet.
		classes, list = []autoscale.NodeClass{{Group: ref.Group, Kind: ref.Kind, Name: ref.Name}}, served
	default:
		ref = karpenterv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
		list = served
	}
	np := &karpenterv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	spec := &np.Spec.Template.Spec
	spec.NodeClassRef = &ref
	switch x := g.r.Float64(); {
	case x < 0.2:
		spec.Requirements = append(spec.Requirements, karpenterv1.NodeSelectorRequirementWithMinValues{Key: labelZone, Operator: v1.NodeSelectorOpExists})
	case x < 0.4:
		spec.Requirements = append(spec.Requirements, karpenterv1.NodeSelectorRequirementWithMinValues{Key: labelZone, Operator: v1.NodeSelectorOpNotIn, Values: []string{pick(g, served)}})
	}
	spec.Requirements = append(spec.Requirements, karpenterv1.NodeSelectorRequirementWithMinValues{
		Key: labelCapacityType, Operator: v1.NodeSelectorOpIn, Values: pick(g, [][]string{{"on-demand"}, {"spot", "on-demand"}}),
	})
	// Often the labels the pod's nodeSelector asks for, so that the new
	// nodes are candidates.
	np.Spec.Template.Labels = map[string]string{}
	if g.chance(0.6) {
		for k, v := range pod.Spec.NodeSelector {
			if k != labelZone && k != labelHostname {
				np.Spec.Template.Labels[k] = v
			}
		}
	}
	if g.chance(0.4) {
		np.Spec.Template.Labels[labelRack] = fmt.Sprintf("rack-%d", g.r.IntN(4))
	}
	if g.chance(0.3) {
		spec.Taints = some(g, taintPool, 0.3)
	}
	return autoscale.Derive(autoscale.Inputs{Nodes: nodes, NodePools: []*karpenterv1.NodePool{np}, NodeClasses: classes, Zones: list}).Templates
}

// nodeGroupTemplate is what cluster-autoscaler builds from a node of a
// group: that node's labels and taints, with a fresh hostname. Some
// providers name the new node's hostname themselves; a template written
// from `kubectl get node -o yaml` keeps the copied node's hostname, which
// makes the new node share that node's hostname domain.
func (g *gen) nodeGroupTemplate(nodes []*v1.Node) spread.Template {
	n := pick(g, nodes)
	group := fmt.Sprintf("ng-%d", g.r.IntN(3))
	t := spread.Template{
		Name:   "nodegroup/" + group + "/" + n.Labels[labelZone],
		Source: "node group " + group,
		Labels: maps.Clone(n.Labels),
		Taints: slices.Clone(n.Spec.Taints),
	}
	switch x := g.r.Float64(); {
	case x < 0.6:
		delete(t.Labels, labelHostname)
	case x < 0.85:
		t.Labels[labelHostname] = fmt.Sprintf("ip-10-0-%d-%d", g.r.IntN(4), g.r.IntN(256))
	}
	if g.chance(0.5) {
		// cluster-autoscaler drops the taints a node gets from its state
		// (cordoned, not ready) when it builds the template.
		t.Taints = slices.DeleteFunc(t.Taints, func(tt v1.Taint) bool {
			return tt.Key == v1.TaintNodeUnschedulable || tt.Key == v1.TaintNodeNotReady
		})
	}
	return t
}

// workloadTemplate is the node group made for the pod's workload, often
// scaled to zero: the labels of the pod's nodeSelector and taints that the
// pod tolerates, in a zone of its own choosing unless the nodeSelector
// names one.
func (g *gen) workloadTemplate(pod *v1.Pod, nZones int) spread.Template {
	ls := maps.Clone(pod.Spec.NodeSelector)
	if ls == nil {
		ls = map[string]string{}
	}
	if _, ok := ls[labelZone]; !ok && g.chance(0.9) {
		ls[labelZone] = pick(g, append(slices.Clone(zones[:nZones]), newZone))
	}
	if g.chance(0.5) {
		ls[labelRack] = fmt.Sprintf("rack-%d", g.r.IntN(3))
	}
	t := spread.Template{Name: "nodegroup/" + pod.Labels["app"] + "/" + ls[labelZone], Source: "node group " + pod.Labels["app"], Labels: ls}
	for _, taint := range taintPool {
		tolerated := slices.ContainsFunc(pod.Spec.Tolerations, func(tol v1.Toleration) bool {
			return tol.ToleratesTaint(klog.Background(), &taint, false)
		})
		if tolerated && g.chance(0.6) {
			t.Taints = append(t.Taints, taint)
		}
	}
	return t
}

// nodePoolTemplate is a Karpenter NodePool's template for one zone and
// capacity type: a zone the nodes have, one only other zones' nodes
// could have, or one no node has; sometimes no zone at all (a NodePool
// without a zone requirement), or the empty zone.
func (g *gen) nodePoolTemplate(nZones int) spread.Template {
	pool := pick(g, []string{"default", "spot", "gpu"})
	capacity := pick(g, []string{"on-demand", "spot"})
	ls := map[string]string{labelCapacityType: capacity, "karpenter.sh/nodepool": pool}
	switch x := g.r.Float64(); {
	case x < 0.4:
		ls[labelZone] = zones[g.r.IntN(nZones)]
	case x < 0.8:
		ls[labelZone] = pick(g, append(slices.Clone(zones[nZones:]), newZone))
	case x < 0.85:
		ls[labelZone] = ""
	}
	if g.chance(0.4) {
		ls[labelRack] = fmt.Sprintf("rack-%d", g.r.IntN(4))
	}
	if g.chance(0.4) {
		ls[labelDisk] = pick(g, []string{"ssd", "hdd"})
	}
	if g.chance(0.3) {
		ls[labelGPUs] = strconv.Itoa(g.r.IntN(9))
	}
	t := spread.Template{
		Name:   "nodepool/" + pool + "/" + strings.Join([]string{ls[labelZone], capacity}, ","),
		Source: "NodePool " + pool,
		Labels: ls,
	}
	if g.chance(0.35) {
		t.Taints = some(g, taintPool, 0.3)
	}
	return t
}

// writtenTemplate is a NodeTemplate as a user writes it: any labels of the
// vocabulary or none at all, a hostname or not (or an empty one), an
// integer or not where affinity compares numbers, taints, a Source or not,
// and a name that may be a node's too (templates and nodes are named apart).
func (g *gen) writtenTemplate(i int) spread.Template {
	name := pick(g, []string{"gpu", "infra", "batch", "spot-c", "node-0"})
	t := spread.Template{Name: name}
	if g.chance(0.7) {
		t.Source = "NodeTemplate " + name
	}
	if g.chance(0.1) {
		return t // labels: {} — the fresh node has only its hostname
	}
	t.Labels = map[string]string{}
	if g.chance(0.8) {
		t.Labels[labelZone] = pick(g, append(slices.Clone(zones), newZone, ""))
	}
	switch x := g.r.Float64(); {
	case x < 0.25:
		t.Labels[labelHostname] = fmt.Sprintf("ip-10-0-%d-%d", i, g.r.IntN(256))
	case x < 0.3:
		// An empty hostname is a hostname: no fresh one replaces it.
		t.Labels[labelHostname] = ""
	}
	if g.chance(0.5) {
		t.Labels[labelRack] = fmt.Sprintf("rack-%d", g.r.IntN(3))
	}
	if g.chance(0.5) {
		t.Labels[labelDisk] = pick(g, []string{"ssd", "hdd"})
	}
	if g.chance(0.4) {
		t.Labels[labelGPUs] = pick(g, []string{"0", "2", "8", "many"})
	}
	if g.chance(0.4) {
		t.Taints = some(g, taintPool, 0.3)
	}
	return t
}

// lastByName is the templates that count: the last of each name, sorted
// by name (spread.Snapshot.Templates).
func lastByName(ts []spread.Template) []spread.Template {
	byName := map[string]spread.Template{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	out := slices.Collect(maps.Values(byName))
	slices.SortFunc(out, func(a, b spread.Template) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// freshNode is the node of template t as the semantics define it
// (spread.Template): its labels plus kubernetes.io/hostname set to a fresh
// name when it has none, its taints, no pods, schedulable.
func freshNode(t spread.Template) *v1.Node {
	ls := maps.Clone(t.Labels)
	if ls == nil {
		ls = map[string]string{}
	}
	if _, ok := ls[labelHostname]; !ok {
		ls[labelHostname] = freshNodeName
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: freshNodeName, Labels: ls}, Spec: v1.NodeSpec{Taints: copyTaints(t.Taints)}}
}

func deepCopyTemplates(in []spread.Template) []spread.Template {
	if in == nil {
		return nil
	}
	out := make([]spread.Template, len(in))
	for i, t := range in {
		out[i] = spread.Template{Name: t.Name, Source: t.Source, Labels: maps.Clone(t.Labels), Taints: copyTaints(t.Taints)}
	}
	return out
}

func copyTaints(in []v1.Taint) []v1.Taint {
	if in == nil {
		return nil
	}
	out := make([]v1.Taint, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
