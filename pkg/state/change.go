package state

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/autoscale"
	"github.com/spreadguard/spreadguard/pkg/cache"
	"github.com/spreadguard/spreadguard/pkg/policy"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Kind is the kind of what changed.
type Kind uint8

// The kinds of change: one per kind the webhook watches, and Derived.
const (
	Pod Kind = iota + 1
	Node
	Service
	Namespace
	ReplicaSet
	StatefulSet
	ReplicationController
	Deployment
	SpreadPolicy
	ClusterSpreadPolicy
	NodeTemplate
	NodePool
	// NodeClass is AWS's EC2NodeClass or EKS Auto Mode's NodeClass.
	NodeClass
	// AutoscalerStatus is cluster-autoscaler's status ConfigMap.
	AutoscalerStatus
	// Derived is the templates of the nodes an autoscaler can add and the
	// unserved zones, derived again (Cluster.SetDerived): it has no
	// object.
	Derived

	numKinds
)

var kindNames = [...]string{"", "Pod", "Node", "Service", "Namespace", "ReplicaSet", "StatefulSet", "ReplicationController",
	"Deployment", "SpreadPolicy", "ClusterSpreadPolicy", "NodeTemplate", "NodePool", "NodeClass", "AutoscalerStatus", "Derived"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Unknown"
}

// KindOf returns the kind of change of obj's kind, and false for a kind
// the Cluster does not follow. obj may be a tombstone.
func KindOf(obj any) (Kind, bool) {
	switch untombstone(obj).(type) {
	case *cache.Pod, *v1.Pod:
		return Pod, true
	case *v1.Node:
		return Node, true
	case *v1.Service:
		return Service, true
	case *v1.Namespace:
		return Namespace, true
	case *appsv1.ReplicaSet:
		return ReplicaSet, true
	case *appsv1.StatefulSet:
		return StatefulSet, true
	case *v1.ReplicationController:
		return ReplicationController, true
	case *appsv1.Deployment:
		return Deployment, true
	case *v1alpha1.SpreadPolicy:
		return SpreadPolicy, true
	case *v1alpha1.ClusterSpreadPolicy:
		return ClusterSpreadPolicy, true
	case *v1alpha1.NodeTemplate:
		return NodeTemplate, true
	case *karpenterv1.NodePool:
		return NodePool, true
	case *nodeclassv1.EC2NodeClass, *nodeclassv1.NodeClass:
		return NodeClass, true
	case *v1.ConfigMap:
		return AutoscalerStatus, true
	}
	return 0, false
}

// Op is what happened to the object.
type Op uint8

// The operations.
const (
	Added Op = iota + 1
	Updated
	Deleted
)

// Aspect is a part of an object that spreadguard reads. A Change's What
// holds the aspects it changed: every one for an add or a delete, those
// that differ for an update (none for a resync or a status write that
// changes nothing spreadguard reads).
type Aspect uint8

const (
	// Placement is how the index records a pod: its node, labels, phase,
	// whether it is terminating, the constraints it carries, whether the
	// ReplicaSet controller ranks it as not Ready (cache.Pod.Record,
	// spread.PodRecord.Unready).
	Placement Aspect = 1 << iota
	// Cost is a pod's controller.kubernetes.io/pod-deletion-cost.
	Cost
	// Labels are an object's labels.
	Labels
	// Meta is the rest of the metadata spreadguard reads: annotations (a
	// Deployment's revision), the owner references, whether the object
	// is being deleted.
	Meta
	// Spec is what spreadguard reads of the object's spec: a node's
	// taints and cordon, a Service's selector, a policy's generation, a
	// workload's spec, a node class's zones, the node groups of
	// cluster-autoscaler's status; any update of a NodeTemplate or a
	// NodePool; newly derived facts.
	Spec
	// Selection is a workload's selector or pod template: which pods are
	// its and what the next one carries. A change of Selection is also
	// one of Spec.
	Selection

	// All is every aspect: an add or a delete.
	All = Placement | Cost | Labels | Meta | Spec | Selection
)

// Change is one change of the Cluster, told after the Cluster holds it.
type Change struct {
	Kind Kind
	Op   Op
	// What holds the aspects the change touched.
	What Aspect
	// old is nil for an add, new nil for a delete: the informer's
	// objects, which their readers must not modify. A pod is a
	// *cache.Pod.
	old, new any
}

// Objects returns the object before and after the change: old is nil for
// an add, new nil for a delete; both are nil for Derived. They are the
// informer's: read them, never modify them.
func (c Change) Objects() (old, new any) { return c.old, c.new }

// Object returns the object as it is after the change, or as it was before
// its deletion; nil for Derived and for a pod, whose cached form is no
// client.Object (Pods returns it).
func (c Change) Object() client.Object {
	obj := c.new
	if obj == nil {
		obj = c.old
	}
	o, _ := obj.(client.Object)
	return o
}

// Pods returns a pod change's pods, as the informer holds them: old is nil
// for an add, new nil for a delete.
func (c Change) Pods() (old, new *cache.Pod) {
	old, _ = c.old.(*cache.Pod)
	new, _ = c.new.(*cache.Pod)
	return old, new
}

// Changed reports whether the change touched any of the aspects in a.
func (c Change) Changed(a Aspect) bool { return c.What&a != 0 }

// PodChange returns the change the Cluster tells of a pod going from old
// to new: an add when old is nil, a delete when new is nil; nil for both
// when neither is. A subscriber's tests tell it of pods with it.
func PodChange(old, new *cache.Pod) Change {
	switch {
	case old == nil && new == nil:
		return Change{}
	case old == nil:
		return Change{Kind: Pod, Op: Added, What: All, new: new}
	case new == nil:
		return Change{Kind: Pod, Op: Deleted, What: All, old: old}
	}
	return Change{Kind: Pod, Op: Updated, What: podChanged(old, new, old.Record(), new.Record()), old: old, new: new}
}

// podChanged is what changed between two versions of a pod, o and n,
// whose records are ro and rn.
func podChanged(o, n *cache.Pod, ro, rn spread.PodRecord) Aspect {
	var what Aspect
	if ro != rn {
		what |= Placement
	}
	oc, oh := o.DeletionCost()
	nc, nh := n.DeletionCost()
	if oc != nc || oh != nh {
		what |= Cost
	}
	return what
}

// changed is what changed between two versions of an object of kind k
// other than a pod. Each rule names what spreadguard reads of the kind:
// most updates (a node's heartbeat, a ReplicaSet's status counting its
// pods as they start, a policy's status) change none of it.
func changed(k Kind, old, cur any) Aspect {
	switch o := old.(type) {
	case *v1.Node:
		n, ok := cur.(*v1.Node)
		if !ok {
			return All
		}
		what := labelsChanged(&o.ObjectMeta, &n.ObjectMeta)
		if o.Spec.Unschedulable != n.Spec.Unschedulable || !slices.EqualFunc(o.Spec.Taints, n.Spec.Taints, sameTaint) {
			what |= Spec
		}
		return what
	case *v1.Service:
		n, ok := cur.(*v1.Service)
		if !ok {
			return All
		}
		if !maps.Equal(o.Spec.Selector, n.Spec.Selector) || (o.Spec.Selector == nil) != (n.Spec.Selector == nil) {
			return Spec
		}
		return 0
	case *v1.Namespace:
		n, ok := cur.(*v1.Namespace)
		if !ok {
			return All
		}
		return labelsChanged(&o.ObjectMeta, &n.ObjectMeta) | metaChanged(&o.ObjectMeta, &n.ObjectMeta)
	case *appsv1.ReplicaSet:
		n, ok := cur.(*appsv1.ReplicaSet)
		if !ok {
			return All
		}
		return workloadChanged(&o.ObjectMeta, &n.ObjectMeta, o.Spec, n.Spec,
			!equality.Semantic.DeepEqual(o.Spec.Selector, n.Spec.Selector) || !equality.Semantic.DeepEqual(o.Spec.Template, n.Spec.Template))
	case *appsv1.StatefulSet:
		n, ok := cur.(*appsv1.StatefulSet)
		if !ok {
			return All
		}
		return workloadChanged(&o.ObjectMeta, &n.ObjectMeta, o.Spec, n.Spec,
			!equality.Semantic.DeepEqual(o.Spec.Selector, n.Spec.Selector) || !equality.Semantic.DeepEqual(o.Spec.Template, n.Spec.Template))
	case *appsv1.Deployment:
		n, ok := cur.(*appsv1.Deployment)
		if !ok {
			return All
		}
		return workloadChanged(&o.ObjectMeta, &n.ObjectMeta, o.Spec, n.Spec,
			!equality.Semantic.DeepEqual(o.Spec.Selector, n.Spec.Selector) || !equality.Semantic.DeepEqual(o.Spec.Template, n.Spec.Template))
	case *v1.ReplicationController:
		n, ok := cur.(*v1.ReplicationController)
		if !ok {
			return All
		}
		return workloadChanged(&o.ObjectMeta, &n.ObjectMeta, o.Spec, n.Spec,
			!maps.Equal(o.Spec.Selector, n.Spec.Selector) || !equality.Semantic.DeepEqual(o.Spec.Template, n.Spec.Template))
	case *v1alpha1.SpreadPolicy, *v1alpha1.ClusterSpreadPolicy:
		if specChanged, _ := policy.SpecChanged(old, cur); specChanged {
			return Spec
		}
		return 0
	case *nodeclassv1.EC2NodeClass, *nodeclassv1.NodeClass:
		// Templates read only a node class's zones and zone IDs.
		os, nst := nodeClassStatus(old), nodeClassStatus(cur)
		if os == nil || nst == nil || !slices.Equal(os.Placements(), nst.Placements()) {
			return Spec
		}
		return 0
	case *v1.ConfigMap:
		n, ok := cur.(*v1.ConfigMap)
		if !ok || !sameAutoscalerStatus(o, n) {
			return Spec
		}
		return 0
	}
	// NodeTemplates and NodePools: every update counts.
	return All
}

// workloadChanged is what changed between two versions of a workload:
// selection says whether its selector or pod template did.
func workloadChanged[S any](o, n *metav1.ObjectMeta, os, ns S, selection bool) Aspect {
	what := labelsChanged(o, n) | metaChanged(o, n)
	if selection {
		what |= Selection | Spec
	} else if !equality.Semantic.DeepEqual(os, ns) {
		what |= Spec
	}
	return what
}

// nodeClassStatus is the status of either kind of node class, nil for
// another object.
func nodeClassStatus(obj any) *nodeclassv1.NodeClassStatus {
	switch c := obj.(type) {
	case *nodeclassv1.EC2NodeClass:
		return &c.Status
	case *nodeclassv1.NodeClass:
		return &c.Status
	}
	return nil
}

func labelsChanged(a, b *metav1.ObjectMeta) Aspect {
	if maps.Equal(a.Labels, b.Labels) {
		return 0
	}
	return Labels
}

// metaChanged reports whether a and b differ in the annotations, the
// owner references or whether the object is being deleted.
func metaChanged(a, b *metav1.ObjectMeta) Aspect {
	if maps.Equal(a.Annotations, b.Annotations) && equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		(a.DeletionTimestamp == nil) == (b.DeletionTimestamp == nil) {
		return 0
	}
	return Meta
}

// sameTaint compares what the scheduler and the index read of a taint.
func sameTaint(x, y v1.Taint) bool {
	return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
}

// sameAutoscalerStatus reports whether two versions of cluster-autoscaler's
// status ConfigMap say the same of its node groups, or fail to be read
// alike: cluster-autoscaler rewrites it every loop with the time.
func sameAutoscalerStatus(a, b *v1.ConfigMap) bool {
	ta, oka := a.Data[autoscale.ClusterAutoscalerStatusKey]
	tb, okb := b.Data[autoscale.ClusterAutoscalerStatusKey]
	if oka != okb {
		return false
	}
	if ta == tb {
		return true
	}
	sa, erra := autoscale.ParseClusterAutoscalerStatus(ta)
	sb, errb := autoscale.ParseClusterAutoscalerStatus(tb)
	if erra != nil || errb != nil {
		return erra != nil && errb != nil && erra.Error() == errb.Error()
	}
	return slices.Equal(sa.NodeGroups, sb.NodeGroups)
}
