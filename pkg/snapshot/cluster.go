// Package snapshot is the one loader of cluster snapshots: files (or any
// reader) holding Nodes, Pods, Services, ReplicationControllers,
// ReplicaSets, StatefulSets, Namespaces, SpreadPolicies and
// ClusterSpreadPolicies, as `kubectl get -o yaml` writes them or as a person
// writes them by hand. `kubectl-spread check` reads its --cluster file here,
// `kubectl-spread explain` builds its Cluster from live objects with New, and
// the tests of other packages load their fixtures here, so a snapshot means
// the same thing everywhere.
//
// A Cluster answers the lookups of the admission engine (engine.Sources) and
// gives the node and pod view that pkg/spread counts (Snapshot).
package snapshot

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
	"github.com/spreadguard/spreadguard/pkg/spread"
)

// Cluster is an immutable, in-memory view of the objects spreadguard reads
// from a cluster. Lookups return the stored objects themselves: callers must
// not modify them, as they must not modify objects from an informer cache.
type Cluster struct {
	nodes                  []*v1.Node
	pods                   []*v1.Pod
	services               []*v1.Service
	replicationControllers []*v1.ReplicationController
	replicaSets            []*appsv1.ReplicaSet
	statefulSets           []*appsv1.StatefulSet
	namespaces             []*v1.Namespace
	spreadPolicies         []*v1alpha1.SpreadPolicy
	clusterSpreadPolicies  []*v1alpha1.ClusterSpreadPolicy

	// objects holds everything, in the order added.
	objects []runtime.Object

	// seen holds "Kind namespace/name" (or "Kind name") of every object, to
	// refuse duplicates: two objects under one key cannot both exist in a
	// cluster, and silently keeping one would answer with the wrong one.
	seen map[string]bool
}

// New returns a Cluster holding objects, which must each be a pointer to one
// of the kinds Decode accepts. Namespaced objects without a namespace are put
// in "default", as kubectl does. It is how code that lists a live cluster
// builds a snapshot without a second decoder.
func New(objects ...runtime.Object) (*Cluster, error) {
	c := &Cluster{seen: map[string]bool{}}
	for i, obj := range objects {
		if err := c.add(obj); err != nil {
			return nil, fmt.Errorf("object %d: %w", i+1, err)
		}
	}
	return c, nil
}

// add stores obj after checking its name and that no object of its kind
// and name is stored yet.
func (c *Cluster) add(obj runtime.Object) error {
	kind, namespaced, ok := kindOf(obj)
	if !ok {
		return fmt.Errorf("unsupported object type %T (want one of %s)", obj, wantKinds)
	}
	meta, err := objectMeta(obj)
	if err != nil {
		return err
	}
	if meta.Name == "" {
		return fmt.Errorf("%s has no metadata.name", kind)
	}
	key := kind + " " + meta.Name
	if namespaced {
		if meta.Namespace == "" {
			meta.Namespace = metav1.NamespaceDefault
		}
		key = kind + " " + meta.Namespace + "/" + meta.Name
	} else if meta.Namespace != "" {
		return fmt.Errorf("%s %s is cluster-scoped but sets metadata.namespace %q", kind, meta.Name, meta.Namespace)
	}
	if c.seen[key] {
		return fmt.Errorf("duplicate %s", key)
	}
	c.seen[key] = true
	c.objects = append(c.objects, obj)

	switch o := obj.(type) {
	case *v1.Node:
		c.nodes = append(c.nodes, o)
	case *v1.Pod:
		c.pods = append(c.pods, o)
	case *v1.Service:
		c.services = append(c.services, o)
	case *v1.ReplicationController:
		c.replicationControllers = append(c.replicationControllers, o)
	case *appsv1.ReplicaSet:
		c.replicaSets = append(c.replicaSets, o)
	case *appsv1.StatefulSet:
		c.statefulSets = append(c.statefulSets, o)
	case *v1.Namespace:
		// The apiserver gives every namespace this label, and policies'
		// namespaceSelectors rely on it; a hand-written snapshot rarely
		// spells it out.
		if o.Labels[v1.LabelMetadataName] == "" {
			if o.Labels == nil {
				o.Labels = map[string]string{}
			}
			o.Labels[v1.LabelMetadataName] = o.Name
		}
		c.namespaces = append(c.namespaces, o)
	case *v1alpha1.SpreadPolicy:
		c.spreadPolicies = append(c.spreadPolicies, o)
	case *v1alpha1.ClusterSpreadPolicy:
		c.clusterSpreadPolicies = append(c.clusterSpreadPolicies, o)
	}
	return nil
}

// kindOf names the kind of obj and says whether it is namespaced; ok is
// false for a type a Cluster does not hold.
func kindOf(obj runtime.Object) (kind string, namespaced, ok bool) {
	switch obj.(type) {
	case *v1.Node:
		return "Node", false, true
	case *v1.Pod:
		return "Pod", true, true
	case *v1.Service:
		return "Service", true, true
	case *v1.ReplicationController:
		return "ReplicationController", true, true
	case *appsv1.ReplicaSet:
		return "ReplicaSet", true, true
	case *appsv1.StatefulSet:
		return "StatefulSet", true, true
	case *v1.Namespace:
		return "Namespace", false, true
	case *v1alpha1.SpreadPolicy:
		return v1alpha1.KindSpreadPolicy, true, true
	case *v1alpha1.ClusterSpreadPolicy:
		return v1alpha1.KindClusterSpreadPolicy, false, true
	}
	return "", false, false
}

func objectMeta(obj runtime.Object) (*metav1.ObjectMeta, error) {
	o, ok := obj.(interface{ GetObjectMeta() metav1.Object })
	if !ok {
		return nil, fmt.Errorf("object type %T has no metadata", obj)
	}
	m, ok := o.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, fmt.Errorf("object type %T has no metadata", obj)
	}
	return m, nil
}

// Snapshot returns the nodes and pods, in the order they were added, for
// spread.IndexFromSnapshot or spread.Snapshot.Check.
func (c *Cluster) Snapshot() spread.Snapshot {
	return spread.Snapshot{Nodes: c.nodes, Pods: c.pods}
}

// Len is the number of objects in the Cluster.
func (c *Cluster) Len() int {
	return len(c.objects)
}

// Objects returns every object in the order they were added, e.g. to seed
// a fake clientset with the same cluster a test checks offline.
func (c *Cluster) Objects() []runtime.Object {
	return slices.Clone(c.objects)
}

// Services returns the Services of namespace, in the order they were added.
func (c *Cluster) Services(namespace string) ([]*v1.Service, error) {
	return inNamespace(c.services, namespace), nil
}

// ReplicationController returns namespace/name, or nil if there is none.
func (c *Cluster) ReplicationController(namespace, name string) (*v1.ReplicationController, error) {
	return find(c.replicationControllers, namespace, name), nil
}

// ReplicaSet returns namespace/name, or nil if there is none.
func (c *Cluster) ReplicaSet(namespace, name string) (*appsv1.ReplicaSet, error) {
	return find(c.replicaSets, namespace, name), nil
}

// StatefulSet returns namespace/name, or nil if there is none.
func (c *Cluster) StatefulSet(namespace, name string) (*appsv1.StatefulSet, error) {
	return find(c.statefulSets, namespace, name), nil
}

// Namespace returns the Namespace name, or nil if the snapshot holds none.
func (c *Cluster) Namespace(name string) (*v1.Namespace, error) {
	return find(c.namespaces, "", name), nil
}

// SpreadPolicies returns the SpreadPolicies of namespace, in the order they
// were added.
func (c *Cluster) SpreadPolicies(namespace string) ([]*v1alpha1.SpreadPolicy, error) {
	return inNamespace(c.spreadPolicies, namespace), nil
}

// ClusterSpreadPolicies returns every ClusterSpreadPolicy, in the order they
// were added.
func (c *Cluster) ClusterSpreadPolicies() ([]*v1alpha1.ClusterSpreadPolicy, error) {
	return c.clusterSpreadPolicies, nil
}

func inNamespace[T metav1.Object](objs []T, namespace string) []T {
	var out []T
	for _, o := range objs {
		if o.GetNamespace() == namespace {
			out = append(out, o)
		}
	}
	return out
}

func find[T metav1.Object](objs []T, namespace, name string) T {
	for _, o := range objs {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	var zero T
	return zero
}
