package autoscale

import (
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// groupZone is one zone of one node group: cluster-autoscaler scales a
// group, and with a group per zone (or a balanced group) a new node lands
// in a zone the group's nodes are in.
type groupZone struct{ group, zone string }

// betterModel reports whether n makes a better model of its group's new
// node than cur: a node that takes pods (not cordoned, not being deleted)
// over one that does not, then the first by name, so the choice does not
// depend on the order of the node list.
func betterModel(n, cur *v1.Node) bool {
	if a, b := takesPods(n), takesPods(cur); a != b {
		return a
	}
	return n.Name < cur.Name
}

func takesPods(n *v1.Node) bool {
	return !n.Spec.Unschedulable && n.DeletionTimestamp == nil
}

// nodeGroupTemplates builds, for each (group, zone), the template of a new
// node as cluster-autoscaler builds it from an existing node of the group:
// the node's labels without its hostname (a new node has its own), and
// its NoSchedule and NoExecute taints without those that reflect the
// node's state rather than its group's shape (see transientTaint).
// Name "nodegroup/<group>/<zone>" (zone "" when the nodes have none and
// the operator lists no zone: see expandZoneless), Source "node group
// <group>".
//
// It follows the template node of
// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.34.0/cluster-autoscaler/simulator/node_info_utils.go
// and the taint sanitising of
// https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.34.0/cluster-autoscaler/utils/taints/taints.go
func nodeGroupTemplates(groups map[groupZone]*v1.Node) []spread.Template {
	out := make([]spread.Template, 0, len(groups))
	for gz, n := range groups {
		labels := maps.Clone(n.Labels)
		delete(labels, v1.LabelHostname)
		if gz.zone != "" && n.Labels[v1.LabelTopologyZone] != gz.zone {
			// A group whose nodes carry no zone takes the operator's; a
			// zone of a group without a node there (a GKE node pool's MIG
			// at 0) takes the shape of a node in another zone. The labels
			// that name the node's zone name the template's; its zone ID
			// is unknown.
			labels[v1.LabelTopologyZone] = gz.zone
			for _, k := range zoneLabels {
				if _, ok := labels[k]; ok {
					labels[k] = gz.zone
				}
			}
			delete(labels, nodeclassv1.LabelTopologyZoneID)
		}
		var taints []v1.Taint
		for _, t := range n.Spec.Taints {
			if (t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute) && !transientTaint(t.Key) {
				taints = append(taints, t)
			}
		}
		out = append(out, spread.Template{
			Name:   "nodegroup/" + gz.group + "/" + gz.zone,
			Source: "node group " + gz.group,
			Labels: labels,
			Taints: taints,
		})
	}
	return out
}

// zoneLabels are the labels besides topology.kubernetes.io/zone whose
// value is a node's zone: the deprecated beta label, and GKE's own.
var zoneLabels = []string{v1.LabelFailureDomainBetaZone, "topology.gke.io/zone"}

// transientTaints are the taints a node gets for its condition, its cordon
// or its coming removal: a new node of the group will not carry them.
// cluster-autoscaler's NodeConditionTaints and its own deletion taints,
// plus Karpenter's disruption taint and the out-of-service taint an
// operator puts on a node that is shut down.
var transientTaints = map[string]bool{
	v1.TaintNodeNotReady:           true,
	v1.TaintNodeUnreachable:        true,
	v1.TaintNodeUnschedulable:      true,
	v1.TaintNodeMemoryPressure:     true,
	v1.TaintNodeDiskPressure:       true,
	v1.TaintNodeNetworkUnavailable: true,
	v1.TaintNodePIDPressure:        true,
	v1.TaintNodeOutOfService:       true,
	// k8s.io/cloud-provider/api's TaintExternalCloudProvider and
	// TaintNodeShutdown, not imported for two strings.
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	"node.cloudprovider.kubernetes.io/shutdown":      true,
	"ToBeDeletedByClusterAutoscaler":                 true,
	"DeletionCandidateOfClusterAutoscaler":           true,
	"cloud.google.com/impending-node-termination":    true,
	"NodeWithImpairedVolumes":                        true,
	"karpenter.sh/disrupted":                         true,
	"karpenter.sh/unregistered":                      true,
}

// transientTaintPrefixes mark taints that cluster-autoscaler is told to
// leave out of templates (startup, status and ignored taints).
var transientTaintPrefixes = []string{
	"ignore-taint.cluster-autoscaler.kubernetes.io/",
	"startup-taint.cluster-autoscaler.kubernetes.io/",
	"status-taint.cluster-autoscaler.kubernetes.io/",
}

func transientTaint(key string) bool {
	return transientTaints[key] || slices.ContainsFunc(transientTaintPrefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}
