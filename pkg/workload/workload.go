// Package workload is the one table of the kinds of controller whose pods
// spreadguard forecasts and audits: Deployment, StatefulSet, ReplicaSet and
// ReplicationController. The admission webhook's workload forecasts, the
// forecast, spread health and kubectl-spread read a workload's resource,
// replicas, parsed selector, the pod its template stands for, its
// controller reference and a Deployment's current ReplicaSet through Kinds
// and the functions here, so that one more kind is one more row.
//
// It imports only k8s.io/api and apimachinery: every layer may use it.
package workload

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RevisionAnnotation is the revision the deployment controller writes on
// each of a Deployment's ReplicaSets; the highest is the current one.
const RevisionAnnotation = "deployment.kubernetes.io/revision"

// Revision is the revision the deployment controller wrote on rs, one of a
// Deployment's ReplicaSets (RevisionAnnotation): 0 when there is none, or
// none that parses.
func Revision(rs metav1.Object) int64 {
	n, _ := strconv.ParseInt(rs.GetAnnotations()[RevisionAnnotation], 10, 64)
	return n
}

// Object is an object of a workload kind: the shape of controller-runtime's
// client.Object, which this package does not import.
type Object interface {
	metav1.Object
	runtime.Object
}

// Kind is one kind of workload.
type Kind struct {
	// GVK is the kind's group, version and kind.
	GVK schema.GroupVersionKind
	// Resource is the lower-case plural of the kind, as admission reviews
	// and RBAC name it.
	Resource string
	// ShortNames are kubectl's short names of the kind ("deploy").
	ShortNames []string
	// TemplateRevisions is true when a change of the pod template starts a
	// new revision, whose pods do not exist yet (a Deployment's new
	// ReplicaSet, a StatefulSet's update revision); a ReplicaSet or a
	// ReplicationController keeps its pods through such a change.
	TemplateRevisions bool

	spec   func(Object) Fields
	object Object
	list   ObjectList
}

// ObjectList is a list of objects of a workload kind: the shape of
// controller-runtime's client.ObjectList.
type ObjectList interface {
	metav1.ListInterface
	runtime.Object
}

// Fields points into an object of a kind at the fields a workload has.
type Fields struct {
	Replicas **int32
	// Selector is the object's own, or one built from a
	// ReplicationController's map of labels.
	Selector *metav1.LabelSelector
	// Template is nil for a ReplicationController without one.
	Template *v1.PodTemplateSpec
}

// NewKind makes a Kind, one row of Kinds: objects of prototype's Go type,
// listed as list's, whose Fields fields finds.
func NewKind[T Object, L ObjectList](prototype T, list L, gvk schema.GroupVersionKind, resource string, shortNames []string, templateRevisions bool, fields func(T) Fields) Kind {
	return Kind{GVK: gvk, Resource: resource, ShortNames: shortNames, TemplateRevisions: templateRevisions,
		spec: func(o Object) Fields { return fields(o.(T)) }, object: prototype, list: list}
}

// The workload kinds, each a row of Kinds.
var (
	Deployment = NewKind(&appsv1.Deployment{}, &appsv1.DeploymentList{}, appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", []string{"deploy"}, true,
		func(o *appsv1.Deployment) Fields {
			return Fields{Replicas: &o.Spec.Replicas, Selector: o.Spec.Selector, Template: &o.Spec.Template}
		})
	StatefulSet = NewKind(&appsv1.StatefulSet{}, &appsv1.StatefulSetList{}, appsv1.SchemeGroupVersion.WithKind("StatefulSet"), "statefulsets", []string{"sts"}, true,
		func(o *appsv1.StatefulSet) Fields {
			return Fields{Replicas: &o.Spec.Replicas, Selector: o.Spec.Selector, Template: &o.Spec.Template}
		})
	ReplicaSet = NewKind(&appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{}, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "replicasets", []string{"rs"}, false,
		func(o *appsv1.ReplicaSet) Fields {
			return Fields{Replicas: &o.Spec.Replicas, Selector: o.Spec.Selector, Template: &o.Spec.Template}
		})
	ReplicationController = NewKind(&v1.ReplicationController{}, &v1.ReplicationControllerList{}, v1.SchemeGroupVersion.WithKind("ReplicationController"), "replicationcontrollers", []string{"rc"}, false,
		func(o *v1.ReplicationController) Fields {
			return Fields{Replicas: &o.Spec.Replicas, Selector: &metav1.LabelSelector{MatchLabels: o.Spec.Selector}, Template: o.Spec.Template}
		})
)

// Kinds are the workload kinds, in the order help and errors list them.
var Kinds = []Kind{Deployment, StatefulSet, ReplicaSet, ReplicationController}

// New returns an empty object of the kind's Go type.
func (k Kind) New() Object { return k.object.DeepCopyObject().(Object) }

// NewList returns an empty list of the kind's Go type, to list objects of
// the kind into.
func (k Kind) NewList() ObjectList { return k.list.DeepCopyObject().(ObjectList) }

// Items are the objects of list, a list of the kind's: pointers into its
// items, not copies.
func (k Kind) Items(list ObjectList) ([]Object, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("the items of a %s list: %w", k.GVK.Kind, err)
	}
	out := make([]Object, len(items))
	for i, item := range items {
		o, ok := item.(Object)
		if !ok {
			return nil, fmt.Errorf("a %T in a %s list", item, k.GVK.Kind)
		}
		out[i] = o
	}
	return out, nil
}

// Is reports whether k and other are the same kind.
func (k Kind) Is(other Kind) bool { return k.GVK == other.GVK }

// GroupVersionResource is the resource of the kind at its version, as an
// admission review names it.
func (k Kind) GroupVersionResource() schema.GroupVersionResource {
	return k.GVK.GroupVersion().WithResource(k.Resource)
}

// Template is obj's pod template: nil for a ReplicationController that has
// none. It is obj's own, not a copy.
func (k Kind) Template(obj Object) *v1.PodTemplateSpec { return k.spec(obj).Template }

// Replicas is obj's spec.replicas, with the API's default of 1.
func (k Kind) Replicas(obj Object) int32 {
	if r := *k.spec(obj).Replicas; r != nil {
		return *r
	}
	return 1
}

// SetReplicas sets obj's spec.replicas to n, as a write to its scale
// subresource does.
func (k Kind) SetReplicas(obj Object, n int32) { *k.spec(obj).Replicas = &n }

// LabelSelector is obj's selector of its pods: nil when it has none, and a
// ReplicationController's map of labels as matchLabels.
func (k Kind) LabelSelector(obj Object) *metav1.LabelSelector { return k.spec(obj).Selector }

// Selector is obj's selector of its pods, parsed: labels.Nothing() when it
// has none, and an error when it does not parse (stored before the API
// server validated label values in selectors).
func (k Kind) Selector(obj Object) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(k.LabelSelector(obj))
}

// ControllerRef is the controller reference of the pods obj's controller
// creates, as the controllers write it (NewControllerRef of apimachinery).
func (k Kind) ControllerRef(obj metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: k.GVK.GroupVersion().String(), Kind: k.GVK.Kind, Name: obj.GetName(), UID: obj.GetUID(),
		Controller: new(true), BlockOwnerDeletion: new(true),
	}
}

// Pod is the pod obj's controller stamps out of its pod template: the
// template's labels, annotations, finalizers and spec, obj's namespace,
// generateName and ControllerRef (GetPodFromTemplate in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go;
// a StatefulSet's controller then names it by its ordinal; generateName is
// the name and a dash, which upstream leaves off only for a name too long
// to prefix a pod's). Its labels and spec are copies, which the caller may
// change; its annotations are the template's, not a copy as upstream's. nil when obj has no template (a ReplicationController may
// have none).
func (k Kind) Pod(obj Object) *v1.Pod {
	t := k.Template(obj)
	if t == nil {
		return nil
	}
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       obj.GetNamespace(),
			GenerateName:    obj.GetName() + "-",
			Labels:          make(map[string]string, len(t.Labels)),
			Annotations:     t.Annotations,
			Finalizers:      slices.Clone(t.Finalizers),
			OwnerReferences: []metav1.OwnerReference{k.ControllerRef(obj)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	maps.Copy(pod.Labels, t.Labels)
	return pod
}

// NewRevision reports whether cur, an update of old, starts a new revision
// of pods: its kind's TemplateRevisions and a pod template that changed.
func (k Kind) NewRevision(old, cur Object) bool {
	return k.TemplateRevisions && !equality.Semantic.DeepEqual(k.Template(old), k.Template(cur))
}

// For returns the kind of obj; ok is false when obj is not a workload.
func For(obj runtime.Object) (k Kind, ok bool) {
	t := reflect.TypeOf(obj)
	for _, k := range Kinds {
		if reflect.TypeOf(k.object) == t {
			return k, true
		}
	}
	return Kind{}, false
}

// ByKind returns the kind whose GVK.Kind is kind ("StatefulSet"), as a
// controller reference or a Ref names it.
func ByKind(kind string) (k Kind, ok bool) {
	for _, k := range Kinds {
		if k.GVK.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// ByName returns the kind kubectl calls name, whatever its case: its kind,
// its resource, a short name, or the kind qualified by its group
// ("deployment.apps").
func ByName(name string) (k Kind, ok bool) {
	name = strings.ToLower(name)
	for _, k := range Kinds {
		kind := strings.ToLower(k.GVK.Kind)
		if name == kind || name == k.Resource || (k.GVK.Group != "" && name == kind+"."+k.GVK.Group) {
			return k, true
		}
		for _, s := range k.ShortNames {
			if name == s {
				return k, true
			}
		}
	}
	return Kind{}, false
}

// ByResource returns the kind of gvr; ok is false when it is not a
// workload, or not at the version of Kinds.
func ByResource(gvr schema.GroupVersionResource) (k Kind, ok bool) {
	for _, k := range Kinds {
		if k.GroupVersionResource() == gvr {
			return k, true
		}
	}
	return Kind{}, false
}

// Ref names one workload, or a Service standing for pods no controller
// owns.
type Ref struct {
	// Kind is the workload's kind, as GVK.Kind spells it, or Service.
	Kind      string
	Namespace string
	Name      string
}

// RefTo names obj, of kind k.
func RefTo(k Kind, obj metav1.Object) Ref {
	return Ref{Kind: k.GVK.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// String names the workload as "Deployment shop/web".
func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// Pointers are pointers to items, the Items of a typed list read from a
// cache or a store, in their order: the form the audit, the forecast and
// the derivation of templates take objects in, without copying one. (Items
// gives a list of a workload kind's as Objects.)
func Pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
