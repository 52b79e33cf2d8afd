// Package workload is the one table of the kinds of controller whose pods
// spreadguard forecasts and audits: Deployment, StatefulSet, ReplicaSet and
// ReplicationController. The admission webhook's workload forecasts, the
// forecast, spread health and kubectl-spread read a workload's resource,
// pod template, replicas and selector through Kinds, so that one more kind
// is one more row.
//
// It imports only k8s.io/api and apimachinery: every layer may use it.
package workload

import (
	"reflect"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	spec   func(Object) spec
	object Object
}

// spec points into an object of a kind at the fields a workload has.
type spec struct {
	replicas **int32
	// selector is the object's own, or one built from a
	// ReplicationController's map of labels.
	selector *metav1.LabelSelector
	// template is nil for a ReplicationController without one.
	template *v1.PodTemplateSpec
}

// row makes a Kind of prototype's Go type, whose fields fields finds.
func row[T Object](prototype T, gvk schema.GroupVersionKind, resource string, shortNames []string, templateRevisions bool, fields func(T) spec) Kind {
	return Kind{GVK: gvk, Resource: resource, ShortNames: shortNames, TemplateRevisions: templateRevisions,
		spec: func(o Object) spec { return fields(o.(T)) }, object: prototype}
}

// The workload kinds, each a row of Kinds.
var (
	Deployment = row(&appsv1.Deployment{}, appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", []string{"deploy"}, true,
		func(o *appsv1.Deployment) spec {
			return spec{replicas: &o.Spec.Replicas, selector: o.Spec.Selector, template: &o.Spec.Template}
		})
	StatefulSet = row(&appsv1.StatefulSet{}, appsv1.SchemeGroupVersion.WithKind("StatefulSet"), "statefulsets", []string{"sts"}, true,
		func(o *appsv1.StatefulSet) spec {
			return spec{replicas: &o.Spec.Replicas, selector: o.Spec.Selector, template: &o.Spec.Template}
		})
	ReplicaSet = row(&appsv1.ReplicaSet{}, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "replicasets", []string{"rs"}, false,
		func(o *appsv1.ReplicaSet) spec {
			return spec{replicas: &o.Spec.Replicas, selector: o.Spec.Selector, template: &o.Spec.Template}
		})
	ReplicationController = row(&v1.ReplicationController{}, v1.SchemeGroupVersion.WithKind("ReplicationController"), "replicationcontrollers", []string{"rc"}, false,
		func(o *v1.ReplicationController) spec {
			return spec{replicas: &o.Spec.Replicas, selector: &metav1.LabelSelector{MatchLabels: o.Spec.Selector}, template: o.Spec.Template}
		})
)

// Kinds are the workload kinds, in the order help and errors list them.
var Kinds = []Kind{Deployment, StatefulSet, ReplicaSet, ReplicationController}

// New returns an empty object of the kind's Go type.
func (k Kind) New() Object { return k.object.DeepCopyObject().(Object) }

// Is reports whether k and other are the same kind.
func (k Kind) Is(other Kind) bool { return k.GVK == other.GVK }

// GroupVersionResource is the resource of the kind at its version, as an
// admission review names it.
func (k Kind) GroupVersionResource() schema.GroupVersionResource {
	return k.GVK.GroupVersion().WithResource(k.Resource)
}

// Template is obj's pod template: nil for a ReplicationController that has
// none. It is obj's own, not a copy.
func (k Kind) Template(obj Object) *v1.PodTemplateSpec { return k.spec(obj).template }

// Replicas is obj's spec.replicas, with the API's default of 1.
func (k Kind) Replicas(obj Object) int32 {
	if r := *k.spec(obj).replicas; r != nil {
		return *r
	}
	return 1
}

// SetReplicas sets obj's spec.replicas to n, as a write to its scale
// subresource does.
func (k Kind) SetReplicas(obj Object, n int32) { *k.spec(obj).replicas = &n }

// LabelSelector is obj's selector of its pods: nil when it has none, and a
// ReplicationController's map of labels as matchLabels.
func (k Kind) LabelSelector(obj Object) *metav1.LabelSelector { return k.spec(obj).selector }

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
