// Package parity holds spreadguard's parity tests against the real
// kube-scheduler v1.37.1: the PodTopologySpread, NodeAffinity,
// TaintToleration and NodeUnschedulable plugins run inside the scheduler's own
// framework runtime, and spreadguard's pkg/spread must find exactly the same
// feasible nodes on thousands of random clusters. The selector that the
// scheduler derives for default constraints (helper.DefaultSelector) is
// compared with spreadguard's in the same way.
//
// Node templates (the nodes an autoscaler can add) are compared the same
// way. About half of the random clusters carry templates: in zones that
// nodes have and in zones none has, without a zone, tainted, failing the
// pod's affinity, with a hostname of their own or an existing node's, and
// names written twice. For each template that counts (the last of its
// name), the test builds the fresh node itself as the semantics say (the
// template's labels, kubernetes.io/hostname set to a fresh name when it has
// none, no pods, schedulable), adds it alone to the cluster and runs the
// four plugins again, PreFilter included. What they decide on that node
// must equal, for the Snapshot, the Index built from it and the Index built
// from informer events: Result.FeasibleTemplates (with Explain, and without
// it for VerdictFeasibleOnNewNode), the names of Result.ExcludedTemplates
// (each with a reason a plugin alone rejects the fresh node for), the
// verdict (FeasibleOnNewNode when only templates are feasible), and a
// FeasibleOnNewNode message naming a feasible template. FeasibleNodes stays
// the set of existing feasible nodes.
//
// The templates and unserved zones of Karpenter NodePools whose
// requirements name the zone and the AWS zone ID (topology.k8s.aws/zone-id)
// with every operator, over node classes with subnets in some zones (some
// without a zone ID, some not resolved yet), the operator's list and the
// nodes' zones, are held to an enumeration written apart
// (TestNodePoolZonesParity): the places each node class serves, or the
// zones named, listed or seen, kept where each requirement holds.
//
// It is a module of its own so that k8s.io/kubernetes never enters the
// dependency graph of the production module. Run it with `make test-parity`
// or, from this directory, `go test -count=1 ./...`; the flags
// -parity.seed, -parity.n and -parity.case (or the PARITY_SEED, PARITY_N and
// PARITY_CASE environment variables) replay a failing case.
package parity
