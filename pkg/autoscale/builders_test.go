package autoscale_test

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/spread/spreadtest"
)

// nodePoolWrapper builds a *karpenterv1.NodePool. Start with makeNodePool.
type nodePoolWrapper struct {
	karpenterv1.NodePool
	spreadtest.ObjectMetaOptions[*nodePoolWrapper]
}

// makeNodePool returns a builder for a Ready NodePool named name, with no
// requirement, limit or taint.
func makeNodePool(name string) *nodePoolWrapper {
	w := &nodePoolWrapper{}
	w.ObjectMetaOptions = spreadtest.BindObjectMeta(w, &w.NodePool.ObjectMeta)
	return w.Name(name)
}

// Obj returns a deep copy of the NodePool built so far.
func (w *nodePoolWrapper) Obj() *karpenterv1.NodePool { return w.NodePool.DeepCopy() }

// Requirement adds one spec.template.spec.requirements entry.
func (w *nodePoolWrapper) Requirement(key string, op v1.NodeSelectorOperator, values ...string) *nodePoolWrapper {
	spec := &w.Spec.Template.Spec
	spec.Requirements = append(spec.Requirements, karpenterv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	return w
}

// Zones requires topology.kubernetes.io/zone In zones.
func (w *nodePoolWrapper) Zones(zones ...string) *nodePoolWrapper {
	return w.Requirement(v1.LabelTopologyZone, v1.NodeSelectorOpIn, zones...)
}

// NodeClass sets spec.template.spec.nodeClassRef.
func (w *nodePoolWrapper) NodeClass(group, kind, name string) *nodePoolWrapper {
	w.Spec.Template.Spec.NodeClassRef = &karpenterv1.NodeClassReference{Group: group, Kind: kind, Name: name}
	return w
}

// EC2NodeClass sets spec.template.spec.nodeClassRef to the EC2NodeClass
// name.
func (w *nodePoolWrapper) EC2NodeClass(name string) *nodePoolWrapper {
	return w.NodeClass(nodeclassv1.EC2GroupName, nodeclassv1.KindEC2NodeClass, name)
}

// CapacityTypes requires karpenter.sh/capacity-type In types.
func (w *nodePoolWrapper) CapacityTypes(types ...string) *nodePoolWrapper {
	return w.Requirement(karpenterv1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, types...)
}

// TemplateLabel sets a spec.template.metadata label.
func (w *nodePoolWrapper) TemplateLabel(k, v string) *nodePoolWrapper {
	if w.Spec.Template.Labels == nil {
		w.Spec.Template.Labels = map[string]string{}
	}
	w.Spec.Template.Labels[k] = v
	return w
}

// Taint adds a spec.template.spec.taints entry.
func (w *nodePoolWrapper) Taint(key, value string, effect v1.TaintEffect) *nodePoolWrapper {
	w.Spec.Template.Spec.Taints = append(w.Spec.Template.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// StartupTaint adds a spec.template.spec.startupTaints entry.
func (w *nodePoolWrapper) StartupTaint(key, value string, effect v1.TaintEffect) *nodePoolWrapper {
	w.Spec.Template.Spec.StartupTaints = append(w.Spec.Template.Spec.StartupTaints, v1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// Limit sets spec.limits[name].
func (w *nodePoolWrapper) Limit(name v1.ResourceName, quantity string) *nodePoolWrapper {
	if w.Spec.Limits == nil {
		w.Spec.Limits = v1.ResourceList{}
	}
	w.Spec.Limits[name] = resource.MustParse(quantity)
	return w
}

// Uses sets status.resources[name], what the NodePool's nodes hold.
func (w *nodePoolWrapper) Uses(name v1.ResourceName, quantity string) *nodePoolWrapper {
	if w.Status.Resources == nil {
		w.Status.Resources = v1.ResourceList{}
	}
	w.Status.Resources[name] = resource.MustParse(quantity)
	return w
}

// Deleting sets metadata.deletionTimestamp.
func (w *nodePoolWrapper) Deleting() *nodePoolWrapper {
	w.DeletionTimestamp = ptr.To(metav1.Unix(1, 0))
	return w
}

// Static sets spec.replicas: Karpenter keeps that many nodes.
func (w *nodePoolWrapper) Static(replicas int64) *nodePoolWrapper {
	w.Spec.Replicas = ptr.To(replicas)
	return w
}

// Ready sets the Ready condition to status.
func (w *nodePoolWrapper) Ready(status metav1.ConditionStatus) *nodePoolWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: karpenterv1.ConditionTypeReady, Status: status, Reason: "Test"})
	return w
}

// labels builds a label map from key, value pairs.
func labels(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
