// Package fallback decides, from the scheduler's own signals, when a replica
// is stranded by the spread spreadguard injected, which domains of its
// workload may fall back and when they come back, and how the injected
// constraints bend over those domains. It is pure: plain inputs, no client,
// no informer, no clock of its own. docs/fallback.md says why it bends the
// way it does.
package fallback

import (
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The scheduler's words this package reads, as kube-scheduler v1.37 writes
// them in a pod's PodScheduled condition:
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/types.go
// (FitError.Error: "0/X nodes are available: <reasons>. <post-filter>") and
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/podtopologyspread/plugin.go
const (
	// SpreadReason is PodTopologySpread's Filter reason for a node whose
	// domain would break maxSkew.
	SpreadReason = "node(s) didn't match pod topology spread constraints"
	// noNodeAvailable starts every FitError message.
	noNodeAvailable = " nodes are available: "
)

// Diagnosis is what the scheduler's message on an unschedulable pod says
// about the nodes: how many there were, how many the spread kept out, and
// how many failed for another reason (resources, taints, affinity, a full
// node). A node can count under several reasons, so Spread + Other may
// exceed Nodes.
type Diagnosis struct {
	Nodes  int
	Spread int
	Other  int
}

// ParseFitError reads the node histogram of the scheduler's FitError
// message. ok is false when msg is not such a message (an older or newer
// wording, a message of another scheduler): then nothing is concluded from
// it. It allocates nothing.
func ParseFitError(msg string) (d Diagnosis, ok bool) {
	// "0/6 nodes are available: 2 Insufficient cpu, 4 node(s) didn't
	// match pod topology spread constraints. preemption: ..."
	if !strings.HasPrefix(msg, "0/") {
		return Diagnosis{}, false
	}
	rest := msg[2:]
	i := strings.Index(rest, noNodeAvailable)
	if i <= 0 {
		return Diagnosis{}, false
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil || n < 0 {
		return Diagnosis{}, false
	}
	d.Nodes = n
	rest = rest[i+len(noNodeAvailable):]
	// The histogram ends at the first ". " (or a final "."); the reasons in
	// it are "COUNT REASON" joined by ", ". A reason may itself hold ", "
	// (a taint's value), so a piece that does not start with a count
	// belongs to the reason before it.
	if end := strings.Index(rest, ". "); end >= 0 {
		rest = rest[:end]
	} else {
		rest = strings.TrimSuffix(rest, ".")
	}
	counted := false
	for rest != "" {
		piece := rest
		if j := strings.Index(rest, ", "); j >= 0 {
			piece, rest = rest[:j], rest[j+2:]
		} else {
			rest = ""
		}
		sp := strings.IndexByte(piece, ' ')
		if sp <= 0 {
			continue
		}
		c, err := strconv.Atoi(piece[:sp])
		if err != nil {
			continue
		}
		counted = true
		if piece[sp+1:] == SpreadReason {
			d.Spread += c
		} else {
			d.Other += c
		}
	}
	return d, counted
}

// StrandedBySpread says whether the scheduler's message shows that the
// spread kept the pod out of some nodes and every other node failed it for
// another reason: the domains the spread allows cannot take the pod. A
// message where only the spread refused (nodes that would fit, all in
// domains the skew forbids) or where the spread refused nothing is not.
func (d Diagnosis) StrandedBySpread() bool { return d.Spread > 0 && d.Other > 0 }

// Unschedulable returns the pod's PodScheduled condition when it says the
// scheduler cannot place the pod (status False, reason Unschedulable), the
// pod is bound to no node and no preemption is making room for it (a
// nominated node); nil otherwise.
func Unschedulable(pod *v1.Pod) *v1.PodCondition {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.NominatedNodeName != "" {
		return nil
	}
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodScheduled {
			if c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				return c
			}
			return nil
		}
	}
	return nil
}

// Stranded is a pod the spread keeps from running: since when the scheduler
// has said so, and what it said.
type Stranded struct {
	Since     time.Time
	Diagnosis Diagnosis
}

// StrandedPod reports whether pod is stranded by its spread: unbound,
// unschedulable, with a scheduler message that shows the spread sent it to
// domains where no node fits it. Since is the condition's last transition.
// Whether the spread is one spreadguard injected, and whether an
// autoscaler is still trying, the caller decides.
func StrandedPod(pod *v1.Pod) (Stranded, bool) {
	c := Unschedulable(pod)
	if c == nil {
		return Stranded{}, false
	}
	d, ok := ParseFitError(c.Message)
	if !ok || !d.StrandedBySpread() {
		return Stranded{}, false
	}
	return Stranded{Since: c.LastTransitionTime.Time, Diagnosis: d}, true
}

// Due says whether a replica stranded since since has waited at least after
// at now.
func Due(since, now time.Time, after time.Duration) bool {
	return !since.IsZero() && now.Sub(since) >= after
}
