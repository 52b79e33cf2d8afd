package spread

import (
	"hash/maphash"
	"maps"
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
// nodes/64 words.
//
// Pods are grouped by namespace and exact label set (the pods of one
// ReplicaSet share one group), and each group keeps its pod count per node.
// A selector is evaluated once per group, not once per pod; an inverted
// index from key=value (and key) to groups finds the groups it can match
// without looking at the others.
type Index struct {
	mu      sync.RWMutex
	seed    maphash.Seed
	scratch sync.Pool

	// nodes holds every node name that is known as a node or that a
	// counted pod is bound to; only entries with an ID are nodes.
	nodes    map[string]*nodeEntry
	slots    []*nodeEntry // by ID; nil when free
	free     []int32
	live     bitset
	keys     map[string]*keyIndex
	taints   map[taintKey]*taintIndex
	cordoned bitset

	serials    uint64
	pods       map[podKey]podRecord
	namespaces map[string]*nsIndex
	groups     map[uint64]*group // by hash of namespace and labels, chained
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

// podRecord is where a counted pod is counted.
type podRecord struct {
	group *group
	node  *nodeEntry
}

// group is the counted pods of one namespace that carry exactly one label
// set.
type group struct {
	ns     *nsIndex
	labels map[string]string
	hash   uint64
	next   *group
	pods   int
	nodes  map[*nodeEntry]int32
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
		seed:       maphash.MakeSeed(),
		nodes:      map[string]*nodeEntry{},
		keys:       map[string]*keyIndex{},
		taints:     map[taintKey]*taintIndex{},
		pods:       map[podKey]podRecord{},
		namespaces: map[string]*nsIndex{},
		groups:     map[uint64]*group{},
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
	return ix
}

// words is the length of a bitset that can hold every node ID.
func (ix *Index) words() int { return (len(ix.slots) + 63) / 64 }

// AddNode records a node. Adding a node that is already there updates it.
// Nodes without a name are ignored.
func (ix *Index) AddNode(n *v1.Node) {
	if n == nil || n.Name == "" {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.setNode(n)
}

// UpdateNode records a node change. Only labels, NoSchedule/NoExecute
// taints and spec.unschedulable matter; an update that changes none of
// them (a status heartbeat) costs a comparison and allocates nothing.
func (ix *Index) UpdateNode(old, n *v1.Node) {
	if n == nil || n.Name == "" {
		if old != nil {
			ix.DeleteNode(old)
		}
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old != nil && old.Name != n.Name {
		ix.removeNode(old.Name)
	}
	ix.setNode(n)
}

// DeleteNode forgets a node. The pods bound to it stay recorded and count
// again if it comes back.
func (ix *Index) DeleteNode(n *v1.Node) {
	if n == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeNode(n.Name)
}

func (ix *Index) setNode(n *v1.Node) {
	e := ix.nodes[n.Name]
	switch {
	case e == nil:
		e = &nodeEntry{name: n.Name, id: -1}
		ix.nodes[n.Name] = e
	case e.id >= 0 && e.unchanged(n):
		return
	case e.id >= 0:
		ix.unindexNode(e)
	}
	if e.id < 0 {
		e.id = ix.allocID()
		ix.slots[e.id] = e
		ix.live.set(e.id)
	}
	e.labels = maps.Clone(n.Labels)
	e.taints = e.taints[:0]
	for _, t := range n.Spec.Taints {
		if doNotScheduleTaint(&t) {
			// timeAdded is left out: it plays no part in toleration.
			e.taints = append(e.taints, v1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	e.unschedulable = n.Spec.Unschedulable
	ix.indexNode(e)
}

// unchanged reports whether n carries what e recorded.
func (e *nodeEntry) unchanged(n *v1.Node) bool {
	if e.unschedulable != n.Spec.Unschedulable || !maps.Equal(e.labels, n.Labels) {
		return false
	}
	i := 0
	for _, t := range n.Spec.Taints {
		if !doNotScheduleTaint(&t) {
			continue
		}
		if i >= len(e.taints) || e.taints[i].Key != t.Key || e.taints[i].Value != t.Value || e.taints[i].Effect != t.Effect {
			return false
		}
		i++
	}
	return i == len(e.taints)
}

func (ix *Index) allocID() int32 {
	if n := len(ix.free); n > 0 {
		id := ix.free[n-1]
		ix.free = ix.free[:n-1]
		return id
	}
	ix.slots = append(ix.slots, nil)
	return int32(len(ix.slots) - 1)
}

func (ix *Index) removeNode(name string) {
	e := ix.nodes[name]
	if e == nil || e.id < 0 {
		return
	}
	ix.unindexNode(e)
	ix.live.clear(e.id)
	ix.slots[e.id] = nil
	ix.free = append(ix.free, e.id)
	e.id = -1
	e.labels, e.taints, e.unschedulable = nil, nil, false
	if e.pods == 0 {
		delete(ix.nodes, name)
	}
}

func (ix *Index) indexNode(e *nodeEntry) {
	for k, v := range e.labels {
		ki := ix.keys[k]
		if ki == nil {
			ki = &keyIndex{values: map[string]*valueIndex{}}
			ix.keys[k] = ki
		}
		vi := ki.values[v]
		if vi == nil {
			ix.serials++
			vi = &valueIndex{value: v, serial: ix.serials}
			ki.values[v] = vi
		}
		ki.nodes.set(e.id)
		vi.nodes.set(e.id)
		switch vi.count++; vi.count {
		case 1:
			vi.only = e.id
		case 2:
			ki.shared++
		}
		for len(ki.valueOf) <= int(e.id) {
			ki.valueOf = append(ki.valueOf, nil)
		}
		ki.valueOf[e.id] = vi
	}
	for _, t := range e.taints {
		tk := taintKey{t.Key, t.Value, t.Effect}
		ti := ix.taints[tk]
		if ti == nil {
			ti = &taintIndex{taint: v1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}}
			ix.taints[tk] = ti
		}
		if !ti.nodes.has(e.id) {
			ti.nodes.set(e.id)
			ti.count++
		}
	}
	if e.unschedulable {
		ix.cordoned.set(e.id)
	}
}

func (ix *Index) unindexNode(e *nodeEntry) {
	for k, v := range e.labels {
		ki := ix.keys[k]
		vi := ki.values[v]
		ki.nodes.clear(e.id)
		vi.nodes.clear(e.id)
		ki.valueOf[e.id] = nil
		if vi.count--; vi.count == 1 {
			ki.shared--
			vi.only = vi.nodes.first()
		}
		if vi.count == 0 {
			delete(ki.values, v)
		}
		if len(ki.values) == 0 {
			delete(ix.keys, k)
		}
	}
	for _, t := range e.taints {
		tk := taintKey{t.Key, t.Value, t.Effect}
		if ti := ix.taints[tk]; ti != nil && ti.nodes.has(e.id) {
			ti.nodes.clear(e.id)
			if ti.count--; ti.count == 0 {
				delete(ix.taints, tk)
			}
		}
	}
	ix.cordoned.clear(e.id)
}

// AddPod records a pod. Only pods that count are kept: bound, not
// terminating, not Succeeded or Failed. Adding a pod that is already there
// updates it.
func (ix *Index) AddPod(p *v1.Pod) {
	if p == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.setPod(p)
}

// UpdatePod records a pod change: a new node, new labels, a deletion
// timestamp or a final phase move or drop its count. An update that
// changes none of those allocates nothing.
func (ix *Index) UpdatePod(old, p *v1.Pod) {
	if p == nil {
		if old != nil {
			ix.DeletePod(old)
		}
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old != nil && (old.Namespace != p.Namespace || old.Name != p.Name) {
		ix.dropPod(podKey{old.Namespace, old.Name})
	}
	ix.setPod(p)
}

// DeletePod forgets a pod.
func (ix *Index) DeletePod(p *v1.Pod) {
	if p == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dropPod(podKey{p.Namespace, p.Name})
}

func (ix *Index) setPod(p *v1.Pod) {
	k := podKey{p.Namespace, p.Name}
	rec, known := ix.pods[k]
	if !countable(p) {
		if known {
			ix.dropPod(k)
		}
		return
	}
	var g *group
	if known {
		if maps.Equal(rec.group.labels, p.Labels) {
			if rec.node.name == p.Spec.NodeName {
				return
			}
			// A move: the pod stays in its group, which must not be
			// dropped on the way even if this is its only pod.
			g = rec.group
			ix.unbind(g, rec.node)
		} else {
			ix.uncount(rec)
		}
	}
	if g == nil {
		g = ix.groupFor(p.Namespace, p.Labels)
		g.pods++
	}
	e := ix.nodes[p.Spec.NodeName]
	if e == nil {
		e = &nodeEntry{name: p.Spec.NodeName, id: -1}
		ix.nodes[e.name] = e
	}
	g.nodes[e]++
	e.pods++
	ix.pods[k] = podRecord{group: g, node: e}
}

func (ix *Index) dropPod(k podKey) {
	if rec, ok := ix.pods[k]; ok {
		ix.uncount(rec)
		delete(ix.pods, k)
	}
}

func (ix *Index) uncount(rec podRecord) {
	g := rec.group
	ix.unbind(g, rec.node)
	if g.pods--; g.pods == 0 {
		ix.removeGroup(g)
	}
}

// unbind takes one pod of g off node entry e.
func (ix *Index) unbind(g *group, e *nodeEntry) {
	if g.nodes[e]--; g.nodes[e] == 0 {
		delete(g.nodes, e)
	}
	if e.pods--; e.pods == 0 && e.id < 0 {
		delete(ix.nodes, e.name)
	}
}

// labelHash hashes a namespace and a label set, independently of map
// order: the hashes of the pairs are summed.
func (ix *Index) labelHash(namespace string, ls map[string]string) uint64 {
	sum := maphash.String(ix.seed, namespace)
	for k, v := range ls {
		sum += (maphash.String(ix.seed, k)*0x9E3779B97F4A7C15 ^ maphash.String(ix.seed, v)) * 0xBF58476D1CE4E5B9
	}
	return sum
}

func (ix *Index) groupFor(namespace string, ls map[string]string) *group {
	h := ix.labelHash(namespace, ls)
	for g := ix.groups[h]; g != nil; g = g.next {
		if g.ns.name == namespace && maps.Equal(g.labels, ls) {
			return g
		}
	}
	ns := ix.namespaces[namespace]
	if ns == nil {
		ns = &nsIndex{
			name:    namespace,
			groups:  map[*group]struct{}{},
			byLabel: map[labelPair]map[*group]struct{}{},
			byKey:   map[string]map[*group]struct{}{},
		}
		ix.namespaces[namespace] = ns
	}
	g := &group{ns: ns, labels: maps.Clone(ls), hash: h, next: ix.groups[h], nodes: map[*nodeEntry]int32{}}
	if g.labels == nil {
		g.labels = map[string]string{}
	}
	ix.groups[h] = g
	ns.groups[g] = struct{}{}
	for k, v := range g.labels {
		addTo(ns.byLabel, labelPair{k, v}, g)
		addTo(ns.byKey, k, g)
	}
	return g
}

func (ix *Index) removeGroup(g *group) {
	if head := ix.groups[g.hash]; head == g {
		if g.next == nil {
			delete(ix.groups, g.hash)
		} else {
			ix.groups[g.hash] = g.next
		}
	} else {
		for prev := head; prev != nil; prev = prev.next {
			if prev.next == g {
				prev.next = g.next
				break
			}
		}
	}
	ns := g.ns
	delete(ns.groups, g)
	for k, v := range g.labels {
		removeFrom(ns.byLabel, labelPair{k, v}, g)
		removeFrom(ns.byKey, k, g)
	}
	if len(ns.groups) == 0 {
		delete(ix.namespaces, ns.name)
	}
}

func addTo[K comparable](m map[K]map[*group]struct{}, k K, g *group) {
	s := m[k]
	if s == nil {
		s = map[*group]struct{}{}
		m[k] = s
	}
	s[g] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[*group]struct{}, k K, g *group) {
	if s := m[k]; s != nil {
		delete(s, g)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}
