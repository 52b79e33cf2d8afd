package spreadtest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DeletionTime is the deletionTimestamp that Terminating sets. It is fixed so
// that objects built twice compare equal.
var DeletionTime = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// PodWrapper builds a *v1.Pod. Start with MakePod. Name, Namespace, UID,
// Label and Annotation come with ObjectMetaOptions.
type PodWrapper struct {
	v1.Pod
	ObjectMetaOptions[*PodWrapper]
}

// MakePod returns a builder for a pod in namespace "default".
func MakePod() *PodWrapper {
	w := &PodWrapper{Pod: v1.Pod{ObjectMeta: inDefault()}}
	w.ObjectMetaOptions = BindObjectMeta(w, &w.Pod.ObjectMeta)
	return w
}

// Obj returns a deep copy of the pod built so far.
func (p *PodWrapper) Obj() *v1.Pod { return p.Pod.DeepCopy() }

// Labels adds every label of m.
func (p *PodWrapper) Labels(m map[string]string) *PodWrapper {
	for k, v := range m {
		p.Label(k, v)
	}
	return p
}

// Node binds the pod: spec.nodeName.
func (p *PodWrapper) Node(name string) *PodWrapper {
	p.Spec.NodeName = name
	return p
}

// Terminating sets metadata.deletionTimestamp to DeletionTime.
func (p *PodWrapper) Terminating() *PodWrapper {
	p.DeletionTimestamp = new(DeletionTime)
	return p
}

// Phase sets status.phase.
func (p *PodWrapper) Phase(phase v1.PodPhase) *PodWrapper {
	p.Status.Phase = phase
	return p
}

// OwnerRef adds an owner reference that is not the controller. Its UID is
// the one the owner builders' Name sets.
func (p *PodWrapper) OwnerRef(kind, apiVersion, name string) *PodWrapper {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(kind + "/" + name),
	})
	return p
}

// ControlledBy adds an owner reference with controller: true.
func (p *PodWrapper) ControlledBy(kind, apiVersion, name string) *PodWrapper {
	p.OwnerRef(kind, apiVersion, name)
	ref := &p.OwnerReferences[len(p.OwnerReferences)-1]
	ref.Controller, ref.BlockOwnerDeletion = new(true), new(true)
	return p
}

// SchedulingGate adds a spec.schedulingGates entry.
func (p *PodWrapper) SchedulingGate(name string) *PodWrapper {
	p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: name})
	return p
}

// NodeSelector adds one spec.nodeSelector entry.
func (p *PodWrapper) NodeSelector(k, v string) *PodWrapper {
	setEntry(&p.Spec.NodeSelector, k, v)
	return p
}

// NodeAffinityIn adds "key In vals" to the last required node selector term
// (creating the first term if there is none), so successive calls are ANDed.
func (p *PodWrapper) NodeAffinityIn(key string, vals ...string) *PodWrapper {
	return p.NodeAffinityExpression(key, v1.NodeSelectorOpIn, vals...)
}

// NodeAffinityNotIn adds "key NotIn vals" to the last required term.
func (p *PodWrapper) NodeAffinityNotIn(key string, vals ...string) *PodWrapper {
	return p.NodeAffinityExpression(key, v1.NodeSelectorOpNotIn, vals...)
}

// NodeAffinityExpression adds any matchExpressions requirement (Exists, Gt,
// ...) to the last required term.
func (p *PodWrapper) NodeAffinityExpression(key string, op v1.NodeSelectorOperator, vals ...string) *PodWrapper {
	t := p.lastTerm()
	t.MatchExpressions = append(t.MatchExpressions, v1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals})
	return p
}

// NodeAffinityField adds a matchFields requirement (the only field the API
// allows is metadata.name) to the last required term.
func (p *PodWrapper) NodeAffinityField(key string, op v1.NodeSelectorOperator, vals ...string) *PodWrapper {
	t := p.lastTerm()
	t.MatchFields = append(t.MatchFields, v1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals})
	return p
}

// OrNodeAffinityTerm starts a new required node selector term: the terms
// are ORed, the requirements inside one term ANDed.
func (p *PodWrapper) OrNodeAffinityTerm() *PodWrapper {
	ns := p.requiredSelector()
	ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, v1.NodeSelectorTerm{})
	return p
}

func (p *PodWrapper) requiredSelector() *v1.NodeSelector {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &v1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	na := p.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
	}
	return na.RequiredDuringSchedulingIgnoredDuringExecution
}

func (p *PodWrapper) lastTerm() *v1.NodeSelectorTerm {
	ns := p.requiredSelector()
	if len(ns.NodeSelectorTerms) == 0 {
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, v1.NodeSelectorTerm{})
	}
	return &ns.NodeSelectorTerms[len(ns.NodeSelectorTerms)-1]
}

// Toleration adds a toleration. An empty effect tolerates every effect; op
// Exists ignores the value.
func (p *PodWrapper) Toleration(key string, op v1.TolerationOperator, value string, effect v1.TaintEffect) *PodWrapper {
	p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	return p
}

// SpreadConstraint appends a topology spread constraint, usually built
// with Constraint(...).Obj().
func (p *PodWrapper) SpreadConstraint(c v1.TopologySpreadConstraint) *PodWrapper {
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, *c.DeepCopy())
	return p
}

// ConstraintWrapper builds a v1.TopologySpreadConstraint. Start with
// Constraint. Its Selector, MatchLabel and MatchExpression write
// labelSelector.
type ConstraintWrapper struct {
	v1.TopologySpreadConstraint
	LabelSelectorOptions[*ConstraintWrapper]
}

// Constraint returns a builder for a DoNotSchedule constraint with the given
// maxSkew and topology key, no selector and every optional field unset.
func Constraint(maxSkew int32, topologyKey string) *ConstraintWrapper {
	w := &ConstraintWrapper{TopologySpreadConstraint: v1.TopologySpreadConstraint{
		MaxSkew: maxSkew, TopologyKey: topologyKey, WhenUnsatisfiable: v1.DoNotSchedule,
	}}
	w.LabelSelectorOptions = bindLabelSelector(w, &w.LabelSelector)
	return w
}

// Obj returns a deep copy of the constraint built so far.
func (c *ConstraintWrapper) Obj() v1.TopologySpreadConstraint {
	return *c.TopologySpreadConstraint.DeepCopy()
}

// DoNotSchedule makes the constraint hard (the default of Constraint).
func (c *ConstraintWrapper) DoNotSchedule() *ConstraintWrapper {
	c.WhenUnsatisfiable = v1.DoNotSchedule
	return c
}

// ScheduleAnyway makes the constraint soft.
func (c *ConstraintWrapper) ScheduleAnyway() *ConstraintWrapper {
	c.WhenUnsatisfiable = v1.ScheduleAnyway
	return c
}

// MinDomains sets minDomains.
func (c *ConstraintWrapper) MinDomains(n int32) *ConstraintWrapper {
	c.TopologySpreadConstraint.MinDomains = new(n)
	return c
}

// NodeAffinityPolicy sets nodeAffinityPolicy.
func (c *ConstraintWrapper) NodeAffinityPolicy(p v1.NodeInclusionPolicy) *ConstraintWrapper {
	c.TopologySpreadConstraint.NodeAffinityPolicy = new(p)
	return c
}

// NodeTaintsPolicy sets nodeTaintsPolicy.
func (c *ConstraintWrapper) NodeTaintsPolicy(p v1.NodeInclusionPolicy) *ConstraintWrapper {
	c.TopologySpreadConstraint.NodeTaintsPolicy = new(p)
	return c
}

// MatchLabelKeys appends to matchLabelKeys.
func (c *ConstraintWrapper) MatchLabelKeys(keys ...string) *ConstraintWrapper {
	c.TopologySpreadConstraint.MatchLabelKeys = append(c.TopologySpreadConstraint.MatchLabelKeys, keys...)
	return c
}
