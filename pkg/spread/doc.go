// Package spread is spreadguard's algorithm: it builds the label selector that
// kube-scheduler's DefaultSelector would build for a pod, turns a namespace's
// default constraints into the constraints to write into a pod, and decides
// whether a pod's hard topology spread constraints can be met on any node.
//
// The package is pure. Its inputs are plain values (pods, nodes, a Snapshot,
// an Index fed by whoever watches a cluster) and small lookup interfaces; it
// never reaches out to an API server, an informer or the network. The webhook,
// the kubectl plugin and the benchmarks all call the same functions.
//
// The semantics mirror kube-scheduler v1.37.1:
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/helper/spread.go
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/podtopologyspread/common.go
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/podtopologyspread/filtering.go
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go
//   - https://github.com/kubernetes/kubernetes/blob/v1.37.1/pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go
package spread
