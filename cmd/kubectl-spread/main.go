// Command kubectl-spread is spreadguard's kubectl plugin (`kubectl spread`).
// `check` answers offline, from a snapshot file, whether the webhook would
// admit a pod and why not; `explain` answers the same for a workload's next
// pod in a live cluster; `plan` forecasts where a workload's replicas go and
// the first one refused. All run the admission engine the webhook runs.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
