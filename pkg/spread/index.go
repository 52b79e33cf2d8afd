package spread

import (
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Index keeps the counts that Check needs up to date as nodes and pods come
// and go, so that a check never scans every pod (the scheduler's PreFilter
// does, once per pod it schedules). Informer event handlers write to it,
// admission requests read it; it is safe for concurrent use.
//
// Nodes get small integer IDs, and every question about nodes is a bitset:
// the nodes carrying a label key, a key=value, a NoSchedule/NoExecute
// taint, spec.unschedulable. A pod's nodeSelector, required node affinity,
// tolerations and inclusion policies become a few bitset operations over
// nodes/64 words (index_nodes.go).
//
// Pods are grouped by namespace and exact label set (the pods of one
// ReplicaSet share one group), and each group keeps its pod count per node.
// A selector is evaluated once per group, not once per pod; an inverted
// index from key=value (and key) to groups finds the groups it can match
// without looking at the others (index_pods.go).
type Index struct {
	mu      sync.RWMutex
	scratch sync.Pool

	// nodes holds every node name that is known as a node or that a
	// counted pod is bound to; only entries with an ID are nodes.
	nodes map[string]*nodeEntry
	slots []*nodeEntry // by ID; nil when free
	free  []int32
	// byName holds the IDs of the nodes, ordered by name, so that a
	// Layout lists thousands of nodes in name order without sorting them
	// on every forecast: a node's name never changes under its ID.
	byName   []int32
	live     bitset
	keys     map[string]*keyIndex
	taints   map[taintKey]*taintIndex
	cordoned bitset
	// nodeGen counts the node changes that can move a pod between domains
	// or in or out of counting (labels, taints, a node added or removed),
	// so that a reader keeping pods' domains (a DeletionOrder) knows when
	// to read them again.
	nodeGen uint64

	// templates are the nodes an autoscaler can add, sorted by name.
	templates []Template
	// unserved are the zones an autoscaler's node pool requires that its
	// node class cannot serve, sorted.
	unserved []UnservedZone

	serials    uint64
	pods       map[podKey]counted
	namespaces map[string]*nsIndex
	groups     map[groupKey]*group
}

// nodeEntry is a node name. The node itself may be unknown (a pod bound to
// it arrived first, or the node was deleted): then id is -1 and its pods
// are not counted, but they stay recorded against it, so that the node's
// arrival counts them without revisiting any pod.
type nodeEntry struct {
	name          string
	id            int32
	labels        map[string]string
	taints        []v1.Taint // NoSchedule and NoExecute only, in node order
	unschedulable bool
	// pods is the number of counted pods bound to this name.
	pods int
}

type keyIndex struct {
	nodes  bitset
	values map[string]*valueIndex
	// valueOf maps a node ID to its value of this key.
	valueOf []*valueIndex
	// shared is the number of values that more than one node carries. When
	// it is 0 (kubernetes.io/hostname, normally), the number of domains in
	// a set of nodes is the number of nodes in it.
	shared int
}

type valueIndex struct {
	value string
	// serial orders values for merging counts; unique in the index.
	serial uint64
	nodes  bitset
	count  int
	// only is the node carrying the value when count is 1, so that a
	// hostname domain is dropped by clearing one bit.
	only int32
}

type taintKey struct {
	key, value string
	effect     v1.TaintEffect
}

type taintIndex struct {
	taint v1.Taint
	nodes bitset
	count int
}

type podKey struct{ namespace, name string }

// counted is where a counted pod is counted, and what it carries.
type counted struct {
	group       *group
	node        *nodeEntry
	constraints ConstraintSet
	// unready: see PodRecord.Unready.
	unready bool
}

// groupKey names a group: a namespace and a label set.
type groupKey struct {
	namespace string
	labels    LabelSet
}

// group is the counted pods of one namespace that carry exactly one label
// set.
type group struct {
	ns  *nsIndex
	key groupKey
	// labels is key.labels decoded once, for selectors to match.
	labels map[string]string
	pods   int
	nodes  map[*nodeEntry]int32
	// carried tallies the constraint sets the group's pods carry.
	carried []carriedSet
}

// carriedSet is a constraint set and the number of a group's pods that
// carry it.
type carriedSet struct {
	set  ConstraintSet
	pods int32
}

type labelPair struct{ key, value string }

// nsIndex finds the groups of one namespace by label.
type nsIndex struct {
	name    string
	groups  map[*group]struct{}
	byLabel map[labelPair]map[*group]struct{}
	byKey   map[string]map[*group]struct{}
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{
		scratch:    sync.Pool{New: newQuery},
		nodes:      map[string]*nodeEntry{},
		keys:       map[string]*keyIndex{},
		taints:     map[taintKey]*taintIndex{},
		pods:       map[podKey]counted{},
		namespaces: map[string]*nsIndex{},
		groups:     map[groupKey]*group{},
	}
}

// IndexFromSnapshot returns an Index holding the nodes and pods of s.
func IndexFromSnapshot(s Snapshot) *Index {
	ix := NewIndex()
	for _, n := range s.Nodes {
		ix.AddNode(n)
	}
	for _, p := range s.Pods {
		ix.AddPod(p)
	}
	ix.SetTemplates(s.Templates)
	ix.SetUnservedZones(s.UnservedZones)
	return ix
}

// SetTemplates replaces the templates of the nodes an autoscaler can add.
// A later template of the same name replaces an earlier one.
func (ix *Index) SetTemplates(ts []Template) {
	sorted := UniqueTemplates(ts)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.templates = sorted
}

// Templates returns the templates of the nodes an autoscaler can add,
// sorted by name. SetTemplates replaces the slice, never its elements:
// the caller may read it, not modify it.
func (ix *Index) Templates() []Template {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.templates
}

// SetUnservedZones replaces the zones an autoscaler's node pool requires
// that its node class cannot serve: a denial of a pod spread over zones
// says that pods needing them stay Pending.
func (ix *Index) SetUnservedZones(zs []UnservedZone) {
	sorted := SortedUnservedZones(zs)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.unserved = sorted
}

// UnservedZones returns what SetUnservedZones was last given, sorted; the
// caller may read it, not modify it.
func (ix *Index) UnservedZones() []UnservedZone {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.unserved
}

// words is the length of a bitset that can hold every node ID.
func (ix *Index) words() int { return (len(ix.slots) + 63) / 64 }
