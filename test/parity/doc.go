// Package parity holds spreadguard's parity tests against the real
// kube-scheduler v1.37.1: the PodTopologySpread, NodeAffinity,
// TaintToleration and NodeUnschedulable plugins run inside the scheduler's own
// framework runtime, and spreadguard's pkg/spread must find exactly the same
// feasible nodes on thousands of random clusters. The selector that the
// scheduler derives for default constraints (helper.DefaultSelector) is
// compared with spreadguard's in the same way.
//
// It is a module of its own so that k8s.io/kubernetes never enters the
// dependency graph of the production module. Run it with `make test-parity`
// or, from this directory, `go test -count=1 ./...`; the flags
// -parity.seed, -parity.n and -parity.case (or the PARITY_SEED, PARITY_N and
// PARITY_CASE environment variables) replay a failing case.
package parity
