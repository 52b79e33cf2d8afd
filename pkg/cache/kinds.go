package cache

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/workload"
)

// InformedKind is one kind of object spreadguard reads from a cluster. InformedKinds is the
// only list of them: the informers and their transforms, the offline
// decoder of cluster files, kubectl-spread's live reads and the test that
// holds the chart's ClusterRole to get/list/watch on exactly these all
// come from it, so that reading one more kind is one more row.
type InformedKind struct {
	// GVK is the kind's group, version and kind.
	GVK schema.GroupVersionKind
	// Resource is the lower-case plural of the kind, as RBAC rules and the
	// API's paths name it.
	Resource string
	// Namespaced is false for a cluster-scoped kind.
	Namespaced bool
	// Optional kinds are read only when the API server serves them (and,
	// for Karpenter's NodePools, when the configuration asks for them), so
	// that a cluster without their CRD (an upgrade from a chart that did
	// not ship NodeTemplate; no Karpenter; Karpenter on another cloud than
	// AWS) never waits on an informer that cannot sync.
	Optional bool
	// Partial kinds have a Go type that mirrors only the fields spreadguard
	// reads of another project's API: a cluster file's object of the kind
	// may carry other fields.
	Partial bool
	// Named kinds are read as the one object the configuration names,
	// never listed whole: cluster-autoscaler's status ConfigMap. The webhook
	// watches that object alone (WatchNamed), the chart grants it by name in
	// a Role of its namespace rather than in the ClusterRole (ReadRules and
	// Watched leave it out), and kubectl-spread's live reads get it by name;
	// a cluster file may hold it like any kind.
	Named bool
	// Transform turns an object as the watch decodes it into what the
	// informer keeps: only what spreadguard reads. Nil keeps the object
	// whole, less its managedFields.
	Transform toolscache.TransformFunc

	object client.Object
	list   client.ObjectList
}

// New returns an empty object of the kind's Go type.
func (k InformedKind) New() client.Object { return k.object.DeepCopyObject().(client.Object) }

// NewList returns an empty list of the kind's Go type.
func (k InformedKind) NewList() client.ObjectList { return k.list.DeepCopyObject().(client.ObjectList) }

// GroupResource is the kind's API group and resource, as errors and RBAC
// name it.
func (k InformedKind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}
}

// InformedKinds are the kinds spreadguard reads, in the order its informers start
// and errors list them: the nodes and pods it counts, the objects
// kube-scheduler's DefaultSelector derives a selector from, the namespaces
// policies select, and the policies.
var InformedKinds = []InformedKind{
	{GVK: v1.SchemeGroupVersion.WithKind("Node"), Resource: "nodes", Transform: StripNode,
		object: &v1.Node{}, list: &v1.NodeList{}},
	{GVK: v1.SchemeGroupVersion.WithKind("Pod"), Resource: "pods", Namespaced: true, Transform: StripPod,
		object: &v1.Pod{}, list: &v1.PodList{}},
	{GVK: v1.SchemeGroupVersion.WithKind("Service"), Resource: "services", Namespaced: true, Transform: StripService,
		object: &v1.Service{}, list: &v1.ServiceList{}},
	{GVK: workload.ReplicationController.GVK, Resource: workload.ReplicationController.Resource, Namespaced: true,
		Transform: StripReplicationController, object: &v1.ReplicationController{}, list: &v1.ReplicationControllerList{}},
	{GVK: workload.ReplicaSet.GVK, Resource: workload.ReplicaSet.Resource, Namespaced: true,
		Transform: StripReplicaSet, object: &appsv1.ReplicaSet{}, list: &appsv1.ReplicaSetList{}},
	{GVK: workload.StatefulSet.GVK, Resource: workload.StatefulSet.Resource, Namespaced: true,
		Transform: StripStatefulSet, object: &appsv1.StatefulSet{}, list: &appsv1.StatefulSetList{}},
	{GVK: v1.SchemeGroupVersion.WithKind("Namespace"), Resource: "namespaces", Transform: StripNamespace,
		object: &v1.Namespace{}, list: &v1.NamespaceList{}},
	// Policies are kept whole: the validating webhook and the policy
	// watcher read every field.
	{GVK: v1alpha1.GroupVersion.WithKind(v1alpha1.KindSpreadPolicy), Resource: "spreadpolicies", Namespaced: true,
		object: &v1alpha1.SpreadPolicy{}, list: &v1alpha1.SpreadPolicyList{}},
	{GVK: v1alpha1.GroupVersion.WithKind(v1alpha1.KindClusterSpreadPolicy), Resource: "clusterspreadpolicies",
		object: &v1alpha1.ClusterSpreadPolicy{}, list: &v1alpha1.ClusterSpreadPolicyList{}},
	// The nodes an autoscaler can add: declared, and Karpenter's.
	{GVK: v1alpha1.GroupVersion.WithKind(v1alpha1.KindNodeTemplate), Resource: "nodetemplates", Optional: true,
		object: &v1alpha1.NodeTemplate{}, list: &v1alpha1.NodeTemplateList{}},
	{GVK: karpenterv1.GroupVersion.WithKind(karpenterv1.KindNodePool), Resource: "nodepools", Optional: true, Partial: true,
		object: &karpenterv1.NodePool{}, list: &karpenterv1.NodePoolList{}},
	// The node classes whose status says in which zones a NodePool that
	// leaves the zone open adds nodes: Karpenter's AWS provider's, and EKS
	// Auto Mode's.
	{GVK: nodeclassv1.EC2GroupVersion.WithKind(nodeclassv1.KindEC2NodeClass), Resource: "ec2nodeclasses", Optional: true, Partial: true,
		Transform: StripNodeClass, object: &nodeclassv1.EC2NodeClass{}, list: &nodeclassv1.EC2NodeClassList{}},
	{GVK: nodeclassv1.EKSGroupVersion.WithKind(nodeclassv1.KindNodeClass), Resource: "nodeclasses", Optional: true, Partial: true,
		Transform: StripNodeClass, object: &nodeclassv1.NodeClass{}, list: &nodeclassv1.NodeClassList{}},
	// cluster-autoscaler's status (config.Decisions' clusterAutoscalerStatus):
	// the sizes of its node groups, read whole, since it is one object.
	{GVK: v1.SchemeGroupVersion.WithKind("ConfigMap"), Resource: "configmaps", Namespaced: true, Named: true,
		object: &v1.ConfigMap{}, list: &v1.ConfigMapList{}},
	// The workload a scale names, which the forecast of the scale reads
	// (the Scale carries no pod template), and what `kubectl spread plan`
	// reads.
	{GVK: workload.Deployment.GVK, Resource: workload.Deployment.Resource, Namespaced: true,
		Transform: StripDeployment, object: &appsv1.Deployment{}, list: &appsv1.DeploymentList{}},
}

// byType finds a kind by the Go type of its object or of its list.
var byType = func() map[reflect.Type]int {
	m := map[reflect.Type]int{}
	for i, k := range InformedKinds {
		m[reflect.TypeOf(k.object)] = i
		m[reflect.TypeOf(k.list)] = i
	}
	return m
}()

// KindOf returns the kind of obj, an object or a list of one of InformedKinds; ok
// is false for any other type.
func KindOf(obj runtime.Object) (k InformedKind, ok bool) {
	i, ok := byType[reflect.TypeOf(obj)]
	if !ok {
		return InformedKind{}, false
	}
	return InformedKinds[i], true
}

// KindFor returns the kind of gvk; ok is false when spreadguard does not
// read it.
func KindFor(gvk schema.GroupVersionKind) (k InformedKind, ok bool) {
	for _, k := range InformedKinds {
		if k.GVK == gvk {
			return k, true
		}
	}
	return InformedKind{}, false
}

// NewScheme returns a scheme that knows the Go types of InformedKinds (and
// whatever else their API groups register), and nothing more.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// AddToScheme adds the Go types of InformedKinds (and whatever else their API
// groups register) to s: what a client or a cache reading InformedKinds needs
// beside the built-in types, so that a scheme built elsewhere (the
// webhook's) cannot miss a row.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, appsv1.AddToScheme, v1alpha1.AddToScheme, karpenterv1.AddToScheme, nodeclassv1.AddToScheme} {
		if err := add(s); err != nil {
			return fmt.Errorf("building the scheme: %w", err)
		}
	}
	for _, k := range InformedKinds {
		if !s.Recognizes(k.GVK) {
			return fmt.Errorf("building the scheme: %s is not registered", k.GVK)
		}
	}
	return nil
}

// Options returns the cache options of the webhook: an informer for every
// kind, each keeping only what the algorithm reads. At 150,000 pods the pod
// cache is most of the server's memory; a compact pod is a few dozen bytes
// instead of several kilobytes.
func Options() crcache.Options {
	byObject := map[client.Object]crcache.ByObject{}
	var optional []toolscache.TransformFunc
	for _, k := range InformedKinds {
		switch {
		case k.Transform == nil:
		case k.Optional:
			// The cache asks the API server for the scope of every type
			// of ByObject when it is made, and fails on a kind it does not
			// serve: an optional kind's transform goes in the default one.
			optional = append(optional, k.Transform)
		default:
			byObject[k.New()] = crcache.ByObject{Transform: k.Transform}
		}
	}
	return crcache.Options{
		// Every informer is started up front and waited for; a read of a
		// kind nobody planned for would start an informer lazily (and need
		// RBAC nobody granted).
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            chainTransforms(append([]toolscache.TransformFunc{crcache.TransformStripManagedFields()}, optional...)),
		// Reads hand out the cached objects without copying them: every
		// reader (lookup.Sources and what it serves: DefaultSelector,
		// policy resolution) only reads, and a copy of a namespace's
		// policies and a pod's owner on every admission request was most of
		// a mutation's allocations.
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
		ByObject:                     byObject,
	}
}

// chainTransforms applies ts in order. Each passes the objects of the
// types it does not know unchanged.
func chainTransforms(ts []toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		for _, t := range ts {
			var err error
			if obj, err = t(obj); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
}

// ReadRules returns the RBAC rules that let spreadguard read InformedKinds:
// get, list and watch, one rule per API group, groups and resources in the
// order of InformedKinds, for the kinds include accepts (all when it is nil). A
// Named kind has none: its one object is granted by name, where it is
// (NamedReadRule).
func ReadRules(include func(InformedKind) bool) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	at := map[string]int{}
	for _, k := range InformedKinds {
		if k.Named || (include != nil && !include(k)) {
			continue
		}
		i, ok := at[k.GVK.Group]
		if !ok {
			i = len(rules)
			at[k.GVK.Group] = i
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{k.GVK.Group}, Verbs: []string{"get", "list", "watch"}})
		}
		rules[i].Resources = append(rules[i].Resources, k.Resource)
	}
	return rules
}

// Watched returns an empty object of every kind the webhook watches, in
// the order of InformedKinds: the kinds that are not optional, and the optional
// ones that want accepts. A Named kind is watched apart (WatchNamed).
func Watched(want func(InformedKind) bool) []client.Object {
	var out []client.Object
	for _, k := range InformedKinds {
		if !k.Named && (!k.Optional || (want != nil && want(k))) {
			out = append(out, k.New())
		}
	}
	return out
}

// WatchNamed limits the cache's informer of obj's kind, a Named kind, to the
// one object key names: a list and watch of key's namespace with a field
// selector on the name, which RBAC grants by resourceNames
// (NamedReadRule), so that neither the cache nor the permissions reach the
// kind's other objects. It starts no informer.
func WatchNamed(o *crcache.Options, obj client.Object, key client.ObjectKey) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]crcache.ByObject{}
	}
	o.ByObject[obj] = crcache.ByObject{
		Namespaces: map[string]crcache.Config{key.Namespace: {}},
		Field:      NameSelector(key.Name),
	}
}

// NameSelector is the field selector of the object called name: the one a
// list or watch must carry to be granted by resourceNames.
func NameSelector(name string) fields.Selector {
	return fields.OneTermEqualSelector("metadata.name", name)
}

// NamedReadRule is the RBAC rule that lets spreadguard read the one object
// of kind k that key names, in a Role of key's namespace: get, list and
// watch on that name alone. RBAC grants a list or watch by resourceNames
// when it selects the name by a field selector (NameSelector), as
// WatchNamed's informer does.
func NamedReadRule(k InformedKind, key client.ObjectKey) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{k.GVK.Group}, Resources: []string{k.Resource},
		ResourceNames: []string{key.Name}, Verbs: []string{"get", "list", "watch"}}
}
