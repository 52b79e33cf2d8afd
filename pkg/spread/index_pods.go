package spread

import (
	v1 "k8s.io/api/core/v1"
)

// This file keeps the index's pods: each counted pod is one count of its
// group (namespace and label set) on its node.

// PodRecord is an existing pod as the Index counts it: its identity, its
// node, its labels, and what decides whether it counts at all. The webhook's
// pod cache keeps pods in a form that converts to a PodRecord without
// allocating, so that a pod event never rebuilds a *v1.Pod.
type PodRecord struct {
	Namespace string
	Name      string
	// NodeName is spec.nodeName: empty until the pod is bound.
	NodeName string
	Labels   LabelSet
	Phase    v1.PodPhase
	// Terminating is whether the pod has a deletion timestamp.
	Terminating bool
	// Constraints are the topology spread constraints the pod carries;
	// they are not counted, only tallied for Carried.
	Constraints ConstraintSet
	// Unready is whether the ReplicaSet controller ranks the pod before
	// it compares any deletion cost: its phase is not Running, or its
	// Ready condition is not True (see Unready). It changes no count; the
	// deletion order reads it.
	Unready bool
}

// Unready reports whether the ReplicaSet controller deletes p before it
// compares any deletion cost: ActivePodsWithRanks ranks a Pending or
// Unknown pod before a Running one, and a pod that is not Ready before a
// Ready one, ahead of the cost
// (https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/controller/controller_utils.go,
// podPhaseToOrdinal and IsPodReady). A Running pod without a Ready
// condition, which no kubelet reports, is taken as Ready.
func Unready(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning {
		return true
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == v1.PodReady {
			return c.Status != v1.ConditionTrue
		}
	}
	return false
}

// PodRecordOf returns the record of p. Once p's label set and constraints
// are interned (a pod of the index carries them), it allocates nothing.
func PodRecordOf(p *v1.Pod) PodRecord {
	return PodRecord{
		Namespace:   p.Namespace,
		Name:        p.Name,
		NodeName:    p.Spec.NodeName,
		Labels:      LabelSetOf(p.Labels),
		Phase:       p.Status.Phase,
		Terminating: p.DeletionTimestamp != nil,
		Constraints: ConstraintSetOf(p.Spec.TopologySpreadConstraints),
		Unready:     Unready(p),
	}
}

// counts reports whether the pod takes part in counting at all: bound, not
// terminating (upstream #87621), and not Succeeded or Failed, which the
// scheduler's pod informer filters out. It is the rule of countable, which
// Snapshot.Check applies to a *v1.Pod.
func (r *PodRecord) counts() bool {
	return r.NodeName != "" && !r.Terminating && r.Phase != v1.PodSucceeded && r.Phase != v1.PodFailed
}

// AddPod records a pod. Only pods that count are kept: bound, not
// terminating, not Succeeded or Failed. Adding a pod that is already there
// updates it.
func (ix *Index) AddPod(p *v1.Pod) {
	if p != nil {
		ix.AddPodRecord(PodRecordOf(p))
	}
}

// UpdatePod records a pod change: a new node, new labels, a deletion
// timestamp or a final phase move or drop its count. An update that
// changes none of those allocates nothing.
func (ix *Index) UpdatePod(old, p *v1.Pod) {
	switch {
	case p == nil && old != nil:
		ix.DeletePod(old)
	case p == nil:
	case old == nil:
		ix.AddPod(p)
	default:
		// Only the old pod's identity is read.
		ix.UpdatePodRecord(PodRecord{Namespace: old.Namespace, Name: old.Name}, PodRecordOf(p))
	}
}

// DeletePod forgets a pod.
func (ix *Index) DeletePod(p *v1.Pod) {
	if p != nil {
		ix.DeletePodRecord(PodRecord{Namespace: p.Namespace, Name: p.Name})
	}
}

// AddPodRecord is AddPod for a record.
func (ix *Index) AddPodRecord(p PodRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.setPod(&p)
}

// UpdatePodRecord is UpdatePod for records; of old, only the namespace and
// name are read. An update that changes nothing counted allocates nothing.
func (ix *Index) UpdatePodRecord(old, p PodRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if old.Namespace != p.Namespace || old.Name != p.Name {
		ix.dropPod(podKey{old.Namespace, old.Name})
	}
	ix.setPod(&p)
}

// DeletePodRecord is DeletePod for a record; only its namespace and name
// are read.
func (ix *Index) DeletePodRecord(p PodRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dropPod(podKey{p.Namespace, p.Name})
}

func (ix *Index) setPod(p *PodRecord) {
	k := podKey{p.Namespace, p.Name}
	rec, known := ix.pods[k]
	if !p.counts() {
		if known {
			ix.dropPod(k)
		}
		return
	}
	var g *group
	if known {
		if rec.group.key.labels == p.Labels {
			if rec.node.name == p.NodeName && rec.constraints == p.Constraints {
				if rec.unready != p.Unready {
					rec.unready = p.Unready
					ix.pods[k] = rec
				}
				return
			}
			// A move: the pod stays in its group, which must not be
			// dropped on the way even if this is its only pod.
			g = rec.group
			ix.unbind(g, rec.node)
			g.uncarry(rec.constraints)
		} else {
			ix.uncount(rec)
		}
	}
	if g == nil {
		g = ix.groupFor(groupKey{p.Namespace, p.Labels})
		g.pods++
	}
	e := ix.nodes[p.NodeName]
	if e == nil {
		e = &nodeEntry{name: p.NodeName, id: -1}
		ix.nodes[e.name] = e
	}
	g.nodes[e]++
	e.pods++
	g.carry(p.Constraints)
	ix.pods[k] = counted{group: g, node: e, constraints: p.Constraints, unready: p.Unready}
}

func (ix *Index) dropPod(k podKey) {
	if rec, ok := ix.pods[k]; ok {
		ix.uncount(rec)
		delete(ix.pods, k)
	}
}

func (ix *Index) uncount(rec counted) {
	g := rec.group
	ix.unbind(g, rec.node)
	g.uncarry(rec.constraints)
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

// carry tallies one more pod of g carrying cs. A group's pods were
// created alike, so the list holds one set, rarely two: a slice beats a
// map, and a set already there costs no allocation.
func (g *group) carry(cs ConstraintSet) {
	for i := range g.carried {
		if g.carried[i].set == cs {
			g.carried[i].pods++
			return
		}
	}
	g.carried = append(g.carried, carriedSet{set: cs, pods: 1})
}

// uncarry takes back one pod of g carrying cs.
func (g *group) uncarry(cs ConstraintSet) {
	for i := range g.carried {
		if g.carried[i].set != cs {
			continue
		}
		if g.carried[i].pods--; g.carried[i].pods == 0 {
			last := len(g.carried) - 1
			g.carried[i] = g.carried[last]
			g.carried = g.carried[:last]
		}
		return
	}
}

func (ix *Index) groupFor(k groupKey) *group {
	if g := ix.groups[k]; g != nil {
		return g
	}
	ns := ix.namespaces[k.namespace]
	if ns == nil {
		ns = &nsIndex{
			name:    k.namespace,
			groups:  map[*group]struct{}{},
			byLabel: map[labelPair]map[*group]struct{}{},
			byKey:   map[string]map[*group]struct{}{},
		}
		ix.namespaces[k.namespace] = ns
	}
	g := &group{ns: ns, key: k, labels: k.labels.Map(), nodes: map[*nodeEntry]int32{}}
	if g.labels == nil {
		g.labels = map[string]string{}
	}
	ix.groups[k] = g
	ns.groups[g] = struct{}{}
	for k, v := range g.labels {
		addTo(ns.byLabel, labelPair{k, v}, g)
		addTo(ns.byKey, k, g)
	}
	return g
}

func (ix *Index) removeGroup(g *group) {
	delete(ix.groups, g.key)
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
