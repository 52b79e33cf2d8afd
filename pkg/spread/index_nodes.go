package spread

import (
	"cmp"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// This file keeps the index's nodes: their IDs, and the bitsets of nodes
// per label key, key=value and taint that node affinity, nodeSelector,
// tolerations and inclusion policies are evaluated over.

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
		at, _ := ix.nameOrder(e.name)
		ix.byName = slices.Insert(ix.byName, at, e.id)
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
	ix.nodeGen++
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

// nameOrder is where a node named name is, or goes, in ix.byName.
func (ix *Index) nameOrder(name string) (int, bool) {
	return slices.BinarySearchFunc(ix.byName, name, func(id int32, name string) int {
		return cmp.Compare(ix.slots[id].name, name)
	})
}

func (ix *Index) removeNode(name string) {
	e := ix.nodes[name]
	if e == nil || e.id < 0 {
		return
	}
	ix.unindexNode(e)
	ix.nodeGen++
	ix.live.clear(e.id)
	if at, ok := ix.nameOrder(name); ok {
		ix.byName = slices.Delete(ix.byName, at, at+1)
	}
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
