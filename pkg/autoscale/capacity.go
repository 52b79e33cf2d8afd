package autoscale

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpenterv1 "github.com/spreadguard/spreadguard/pkg/apis/karpenter/v1"
	nodeclassv1 "github.com/spreadguard/spreadguard/pkg/apis/nodeclass/v1"
)

// SourceKind is the kind of a source of the nodes an autoscaler can add.
type SourceKind string

const (
	// SourceNodePool is a Karpenter NodePool.
	SourceNodePool SourceKind = "NodePool"
	// SourceNodeGroup is a node group cluster-autoscaler scales, named by
	// its node-group label's value.
	SourceNodeGroup SourceKind = "NodeGroup"
	// SourceNodeTemplate is a NodeTemplate an operator declared. Nothing
	// reports on it, so it never tries and never fails: it can add.
	SourceNodeTemplate SourceKind = "NodeTemplate"
)

// SourceState is what one source says of adding a node in one zone.
type SourceState string

const (
	// CanAdd: the source can add a node there, and reports neither an
	// attempt nor a failure.
	CanAdd SourceState = "CanAdd"
	// Trying: the source is adding a node there now.
	Trying SourceState = "Trying"
	// Failed: the source reported that it could not add a node there.
	Failed SourceState = "Failed"
)

// The reasons of a Source that is trying or has failed. The others are
// the autoscaler's own words: a NodeClaim's Launched reason, an event's
// reason (EventNotTriggerScaleUp, ...).
const (
	// ReasonLaunching, ReasonRegistering, ReasonInitializing: a NodeClaim
	// of the NodePool is not yet Launched, Registered, Initialized.
	ReasonLaunching    = "Launching"
	ReasonRegistering  = "Registering"
	ReasonInitializing = "Initializing"
	// ReasonDeletedBeforeLaunch: a NodeClaim of the NodePool is being
	// deleted before it launched. Karpenter v1.15 deletes a NodeClaim whose
	// launch failed for insufficient capacity or a node class that is not
	// ready, and one that did not launch within its launch timeout.
	ReasonDeletedBeforeLaunch = "DeletedBeforeLaunch"
	// ReasonScaleUpInProgress: cluster-autoscaler's status says a scale-up
	// of the group is in progress.
	ReasonScaleUpInProgress = "ScaleUpInProgress"
	// ReasonBackoff: cluster-autoscaler's status has the group in backoff
	// after a failed scale-up.
	ReasonBackoff = "Backoff"
	// ReasonMaxSize: the group is at its maximum size.
	ReasonMaxSize = "MaxSize"
	// ReasonUnhealthy: cluster-autoscaler's status has the group
	// Unhealthy; it scales up no unhealthy group.
	ReasonUnhealthy = "Unhealthy"
)

// The reasons of the autoscalers' events that report a failure, which
// ZoneCapacity accepts in CapacityInputs.Events.
const (
	// EventNotTriggerScaleUp is cluster-autoscaler's event on a pending
	// pod that no node group it can scale would take: every node group
	// failed, for that pod.
	EventNotTriggerScaleUp = "NotTriggerScaleUp"
	// EventFailedScheduling is Karpenter's event (source karpenter, not
	// kube-scheduler's of the same reason) on a pod no NodePool can take.
	EventFailedScheduling = "FailedScheduling"
	// EventNoCompatibleInstanceTypes is Karpenter's event on a NodePool
	// none of whose instance types fits the pods.
	EventNoCompatibleInstanceTypes = "NoCompatibleInstanceTypes"
	// EventInsufficientCapacityError is Karpenter's event on a NodeClaim,
	// and on the pods it was for, whose launch failed for want of capacity.
	EventInsufficientCapacityError = "InsufficientCapacityError"
)

// eventSources is the kind of source each event reason reports on.
var eventSources = map[string]SourceKind{
	EventNotTriggerScaleUp:         SourceNodeGroup,
	EventFailedScheduling:          SourceNodePool,
	EventNoCompatibleInstanceTypes: SourceNodePool,
	EventInsufficientCapacityError: SourceNodePool,
}

// Event is a failure an autoscaler reported in an event, as the caller read
// it: ZoneCapacity reads no event itself. The caller passes the events of
// the pods (and of the NodePools and NodeClaims) the question is about,
// and only recent ones: an event says nothing of when capacity returns.
type Event struct {
	// Reason is one of the Event* reasons.
	Reason string
	// NodePool is the NodePool the event is about (the event's NodePool,
	// or the NodeClaim's karpenter.sh/nodepool label); "" for every
	// NodePool, as a pod's event of Karpenter is. Unused for
	// cluster-autoscaler's event, which is about every node group.
	NodePool string
	// Zone is the zone the failure was in (a NodeClaim's); "" for every
	// zone.
	Zone string
	// Message is the event's message, kept in the Source.
	Message string
}

// CapacityInputs is what ZoneCapacity reads: the inputs of the templates,
// Karpenter's NodeClaims and the autoscalers' events of failure.
// ClusterAutoscaler, in Inputs, gives the node groups' scale-up.
type CapacityInputs struct {
	Inputs
	// NodeClaims are Karpenter's NodeClaims; nil without Karpenter.
	NodeClaims []*karpenterv1.NodeClaim
	// Events are the failures the autoscalers reported in events.
	Events []Event
}

// Source is one source of the nodes an autoscaler can add, in one zone.
type Source struct {
	Kind SourceKind
	// Name is the NodePool's, the node group's (its node-group label
	// value) or the NodeTemplate's name.
	Name  string
	State SourceState
	// Reason says why a source is Trying or Failed, in one word: a Reason*
	// constant, a NodeClaim's Launched reason, or an event's reason. ""
	// for CanAdd.
	Reason string
	// Message says more: the NodeClaim, the backoff's error, the sizes, the
	// event's message.
	Message string
}

// ZoneSources are the sources that can add a node in one zone, and what
// they say of it.
type ZoneSources struct {
	Zone string
	// ZoneID is the zone's ID (topology.k8s.aws/zone-id) where a node, a
	// template or a NodeClaim says it; "" elsewhere.
	ZoneID string
	// Sources are sorted by kind, then name; nil when no source can add a
	// node in the zone.
	Sources []Source
}

// Trying reports whether some source is adding a node in the zone now.
func (z ZoneSources) Trying() bool {
	return slices.ContainsFunc(z.Sources, func(s Source) bool { return s.State == Trying })
}

// Failed reports whether the zone has sources and every one has failed.
func (z ZoneSources) Failed() bool {
	return len(z.Sources) > 0 && !slices.ContainsFunc(z.Sources, func(s Source) bool { return s.State != Failed })
}

// Wait reports whether a replica the spread keeps for this zone should
// wait for a new node there: some source is trying, or can add and has not
// failed. It is false in a zone no source serves and in one whose every
// source failed. How long to wait at most is the caller's (the policy's
// fallback after): a source that can add may never try.
func (z ZoneSources) Wait() bool {
	return slices.ContainsFunc(z.Sources, func(s Source) bool { return s.State != Failed })
}

// Capacity is, by zone, the sources that can add a node there: every zone
// a node is in, the operator lists, a template or a NodeClaim carries.
type Capacity map[string]ZoneSources

// ZoneID returns the zone whose ID is id.
func (c Capacity) ZoneID(id string) (ZoneSources, bool) {
	if id == "" {
		return ZoneSources{}, false
	}
	for _, z := range c {
		if z.ZoneID == id {
			return z, true
		}
	}
	return ZoneSources{}, false
}

// sourceKey is one source in one zone.
type sourceKey struct {
	zone string
	kind SourceKind
	name string
}

// sourceFacts gathers what is said of one source in one zone.
type sourceFacts struct {
	trying, failed *Source
}

// ZoneCapacity says, per zone, which sources can add a node there (from
// the templates Derive(in.Inputs) gives, plus the node groups
// cluster-autoscaler reports at their maximum, which give none), whether
// one is trying now, and whether every one has failed, with the reasons.
//
// A source's state is Trying when any fact says it tries, else Failed when
// any fact says it failed, else CanAdd: a new attempt outranks an older
// failure.
//
//   - A NodePool tries in a zone while one of its NodeClaims there (its
//     zone label once launched, else the zones its requirements allow; all
//     the NodePool's zones when they say none) is not yet Launched,
//     Registered and Initialized (a node rebooting is initialized), and is
//     not being deleted. It failed when such a NodeClaim has Launched
//     False, or is being deleted before Launched is True
//     (ReasonDeletedBeforeLaunch), or an event says so
//     (EventInsufficientCapacityError, EventNoCompatibleInstanceTypes,
//     EventFailedScheduling). A launch error Karpenter retries (Launched
//     Unknown, reason LaunchFailed) is still trying. A NodeClaim makes its
//     NodePool a source of its zone even where the NodePool yields no
//     template now (its limits reached since).
//   - A node group tries while a status group that stands for it in the
//     zone is ScaleUpInProgress; it failed when every one is at its maximum
//     size, in backoff or Unhealthy, or when an EventNotTriggerScaleUp is
//     given; without the status it can add.
//   - A NodeTemplate can add, always.
//
// An event whose reason is none of the Event* reasons is an error.
func ZoneCapacity(in CapacityInputs) (Capacity, error) {
	for _, e := range in.Events {
		if _, ok := eventSources[e.Reason]; !ok {
			return nil, fmt.Errorf("event reason %q is not an autoscaler's failure that spreadguard reads (want one of %s)",
				e.Reason, strings.Join(slices.Sorted(maps.Keys(eventSources)), ", "))
		}
	}
	d := Derive(in.Inputs)
	seen := observe(in.Nodes, []string{v1.LabelTopologyZone}, in.NodeGroupLabel)
	c := capacityBuilder{zoneIDs: map[string]string{}, facts: map[sourceKey]*sourceFacts{}}
	for _, z := range seen.values[v1.LabelTopologyZone] {
		c.zone(z, seen.zoneIDs[z])
	}
	for _, z := range in.Zones {
		c.zone(z, seen.zoneIDs[z])
	}
	for _, t := range d.Templates {
		z := t.Labels[v1.LabelTopologyZone]
		if z == "" {
			continue
		}
		c.zone(z, t.Labels[nodeclassv1.LabelTopologyZoneID])
		switch {
		case strings.HasPrefix(t.Source, "NodePool "):
			c.source(z, SourceNodePool, strings.TrimPrefix(t.Source, "NodePool "))
		case strings.HasPrefix(t.Source, "node group "):
			c.source(z, SourceNodeGroup, strings.TrimPrefix(t.Source, "node group "))
		case strings.HasPrefix(t.Source, "NodeTemplate "):
			c.source(z, SourceNodeTemplate, strings.TrimPrefix(t.Source, "NodeTemplate "))
		}
	}
	// The groups seen on nodes, full ones too: a group at its maximum is a
	// source that failed, not a zone without one.
	for gz := range expandZoneless(seen.groups, sortedSet(in.Zones)) {
		if gz.zone != "" {
			c.zone(gz.zone, "")
			c.source(gz.zone, SourceNodeGroup, gz.group)
		}
	}
	if in.ClusterAutoscaler != nil {
		c.nodeGroups(in.ClusterAutoscaler)
	}
	for _, nc := range in.NodeClaims {
		c.nodeClaim(nc)
	}
	for _, e := range in.Events {
		c.event(e)
	}
	return c.build(), nil
}

type capacityBuilder struct {
	zoneIDs map[string]string
	facts   map[sourceKey]*sourceFacts
}

// zone adds zone z, with its ID when id says it: the first sorted, should
// sources disagree.
func (c *capacityBuilder) zone(z, id string) {
	if cur, ok := c.zoneIDs[z]; !ok || id != "" && (cur == "" || id < cur) {
		c.zoneIDs[z] = id
	}
}

func (c *capacityBuilder) source(z string, kind SourceKind, name string) *sourceFacts {
	k := sourceKey{z, kind, name}
	f, ok := c.facts[k]
	if !ok {
		f = &sourceFacts{}
		c.facts[k] = f
	}
	return f
}

// keys returns the sources of kind (and of name, when not "") in zone z
// (every zone when ""), sorted.
func (c *capacityBuilder) keys(kind SourceKind, name, z string) []sourceKey {
	var out []sourceKey
	for k := range c.facts {
		if k.kind == kind && (name == "" || k.name == name) && (z == "" || k.zone == z) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b sourceKey) int { return cmp.Or(cmp.Compare(a.zone, b.zone), cmp.Compare(a.name, b.name)) })
	return out
}

func (f *sourceFacts) try(s Source) {
	if f.trying == nil {
		f.trying = &s
	}
}

func (f *sourceFacts) fail(s Source) {
	if f.failed == nil {
		f.failed = &s
	}
}

// nodeGroups applies cluster-autoscaler's status to the node groups.
func (c *capacityBuilder) nodeGroups(s *ClusterAutoscalerStatus) {
	refs := make([]groupRef, len(s.NodeGroups))
	for i, g := range s.NodeGroups {
		refs[i] = parseGroupName(g.Name)
	}
	for _, k := range c.keys(SourceNodeGroup, "", "") {
		f := c.facts[k]
		var failed *Source
		room := false
		for i, r := range refs {
			if !r.covers(groupZone{group: k.name, zone: k.zone}) {
				continue
			}
			g := s.NodeGroups[i]
			switch {
			case g.ScaleUp == ScaleUpInProgress:
				f.try(Source{Reason: ReasonScaleUpInProgress, Message: fmt.Sprintf("%s: scale-up in progress (%d of max %d)", g.Name, g.Target, g.Max)})
			case g.full():
				failed = cmp.Or(failed, &Source{Reason: ReasonMaxSize, Message: fmt.Sprintf("%s: at its maximum size (%d of max %d)", g.Name, g.Target, g.Max)})
			case g.ScaleUp == ScaleUpBackoff:
				m := g.Name + ": in backoff after a failed scale-up"
				if why := strings.TrimSpace(g.Backoff.ErrorCode + " " + g.Backoff.ErrorMessage); why != "" {
					m += ": " + why
				}
				failed = cmp.Or(failed, &Source{Reason: ReasonBackoff, Message: m})
			case g.Health == HealthUnhealthy:
				failed = cmp.Or(failed, &Source{Reason: ReasonUnhealthy, Message: g.Name + ": unhealthy, so not scaled up"})
			default:
				room = true
			}
		}
		if failed != nil && !room {
			f.fail(*failed)
		}
	}
}

// nodeClaim applies what nc says of its NodePool in its zones.
func (c *capacityBuilder) nodeClaim(nc *karpenterv1.NodeClaim) {
	if nc == nil {
		return
	}
	pool := nc.Labels[karpenterv1.NodePoolLabelKey]
	if pool == "" {
		return
	}
	s, ok := nodeClaimState(nc)
	if !ok {
		return
	}
	if id := nc.Labels[nodeclassv1.LabelTopologyZoneID]; id != "" {
		if z := nc.Labels[v1.LabelTopologyZone]; z != "" {
			c.zone(z, id)
		}
	}
	for _, z := range c.nodeClaimZones(nc, pool) {
		c.zone(z, "")
		f := c.source(z, SourceNodePool, pool)
		if s.State == Trying {
			f.try(s)
		} else {
			f.fail(s)
		}
	}
}

// nodeClaimState says whether nc is being launched (Trying) or failed to
// launch (Failed); ok is false for a NodeClaim whose node is up, or that
// is being deleted after it launched (a disruption, not a launch).
func nodeClaimState(nc *karpenterv1.NodeClaim) (s Source, ok bool) {
	conds := nc.Status.Conditions
	launched := meta.FindStatusCondition(conds, karpenterv1.ConditionTypeLaunched)
	isTrue := func(t string) bool { return meta.IsStatusConditionTrue(conds, t) }
	msg := "NodeClaim " + nc.Name
	switch {
	case launched != nil && launched.Status == metav1.ConditionFalse:
		return Source{State: Failed, Reason: cmp.Or(launched.Reason, "LaunchFailed"), Message: strings.TrimSuffix(msg+": "+launched.Message, ": ")}, true
	case nc.DeletionTimestamp != nil && !isTrue(karpenterv1.ConditionTypeLaunched):
		return Source{State: Failed, Reason: ReasonDeletedBeforeLaunch, Message: msg + " is being deleted before it launched"}, true
	case nc.DeletionTimestamp != nil:
		return Source{}, false
	case !isTrue(karpenterv1.ConditionTypeLaunched):
		m := msg + " is launching"
		if launched != nil && launched.Message != "" {
			m += ": " + launched.Message
		}
		return Source{State: Trying, Reason: ReasonLaunching, Message: m}, true
	case !isTrue(karpenterv1.ConditionTypeRegistered):
		return Source{State: Trying, Reason: ReasonRegistering, Message: msg + " is registering"}, true
	}
	init := meta.FindStatusCondition(conds, karpenterv1.ConditionTypeInitialized)
	if init == nil || init.Status != metav1.ConditionTrue && init.Reason != karpenterv1.ReasonRebooting {
		return Source{State: Trying, Reason: ReasonInitializing, Message: msg + " is initializing"}, true
	}
	return Source{}, false
}

// nodeClaimZones returns the zones nc's node is or may be in: its zone
// label once launched; else the zones known (and those its In names) that
// its requirements on the zone and the zone ID admit; when they say
// nothing of either, the zones where pool is a source (every zone known
// when it is none).
func (c *capacityBuilder) nodeClaimZones(nc *karpenterv1.NodeClaim, pool string) []string {
	if z := nc.Labels[v1.LabelTopologyZone]; z != "" {
		return []string{z}
	}
	reqs := requirementsFrom(nil, nc.Spec.Requirements)
	zr, idr := reqs[v1.LabelTopologyZone], reqs[nodeclassv1.LabelTopologyZoneID]
	known := slices.Sorted(maps.Keys(c.zoneIDs))
	if zr == nil && idr == nil {
		var out []string
		for _, k := range c.keys(SourceNodePool, pool, "") {
			out = append(out, k.zone)
		}
		if len(out) == 0 {
			return known
		}
		return slices.Compact(out)
	}
	candidates := known
	if zr != nil && zr.hasIn {
		candidates = sortedSet(append(slices.Clone(known), zr.in...))
	}
	var out []string
	for _, z := range candidates {
		if zr.admits(z) && idr.admits(c.zoneIDs[z]) {
			out = append(out, z)
		}
	}
	return out
}

// event applies e to the sources it is about that exist: an event names no
// source that can add a node.
func (c *capacityBuilder) event(e Event) {
	kind := eventSources[e.Reason]
	name := e.NodePool
	if kind == SourceNodeGroup {
		name = ""
	}
	for _, k := range c.keys(kind, name, e.Zone) {
		c.facts[k].fail(Source{Reason: e.Reason, Message: e.Message})
	}
}

func (c *capacityBuilder) build() Capacity {
	out := make(Capacity, len(c.zoneIDs))
	for z, id := range c.zoneIDs {
		out[z] = ZoneSources{Zone: z, ZoneID: id}
	}
	keys := slices.SortedFunc(maps.Keys(c.facts), func(a, b sourceKey) int {
		return cmp.Or(cmp.Compare(a.zone, b.zone), cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	for _, k := range keys {
		f := c.facts[k]
		s := Source{State: CanAdd}
		switch {
		case f.trying != nil:
			s = *f.trying
			s.State = Trying
		case f.failed != nil:
			s = *f.failed
			s.State = Failed
		}
		s.Kind, s.Name = k.kind, k.name
		zs := out[k.zone]
		zs.Sources = append(zs.Sources, s)
		out[k.zone] = zs
	}
	return out
}
