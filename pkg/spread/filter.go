package spread

import (
	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
)

// enableTaintTolerationComparisonOperators is the v1.37 default of the
// TaintTolerationComparisonOperators feature gate (alpha, off): Lt and Gt
// tolerations tolerate nothing.
const enableTaintTolerationComparisonOperators = false

// noLogger is a zero klog.Logger, which discards everything. The taint
// helpers take a logger only to report comparison-operator parse failures,
// which cannot happen with the gate off. It is obtained through the
// helper's own signature so this package need not import klog.
var noLogger = zeroLoggerOf((*v1.Toleration).ToleratesTaint)

func zeroLoggerOf[L any](func(*v1.Toleration, L, *v1.Taint, bool) bool) (l L) { return l }

// doNotScheduleTaint keeps the taints the TaintToleration filter looks at,
// as helper.DoNotScheduleTaintsFilterFunc does in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/helper/taint.go
func doNotScheduleTaint(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}

// untoleratedTaint returns the first NoSchedule or NoExecute taint of taints
// that tolerations do not tolerate, as the TaintToleration filter and
// nodeTaintsPolicy: Honor find it:
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go
func untoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration) (v1.Taint, bool) {
	return v1helper.FindMatchingUntoleratedTaint(noLogger, taints, tolerations, doNotScheduleTaint, enableTaintTolerationComparisonOperators)
}

// tolerates reports whether tolerations tolerate one taint.
func tolerates(tolerations []v1.Toleration, taint *v1.Taint) bool {
	return v1helper.TolerationsTolerateTaint(noLogger, tolerations, taint, enableTaintTolerationComparisonOperators)
}

// toleratesUnschedulable reports whether a pod may go to a node with
// spec.unschedulable set: only when it tolerates the unschedulable taint, as in
// https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go
func toleratesUnschedulable(tolerations []v1.Toleration) bool {
	return tolerates(tolerations, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
}

// countable reports whether an existing pod takes part in counting at all:
// bound, not terminating (upstream #87621), and not Succeeded or Failed,
// which the scheduler's pod informer filters out.
func countable(p *v1.Pod) bool {
	return p != nil && p.Spec.NodeName != "" && p.DeletionTimestamp == nil &&
		p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}
