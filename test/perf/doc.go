// Package perf holds spreadguard's server-side benchmarks: the whole HTTPS
// admission path of the real composition root (cmd/webhook/app.Run) and the
// memory of its informer caches and index, at 50 nodes / 1,500 pods and at
// 5,000 nodes / 150,000 pods.
//
// Nothing here needs an apiserver. The server is the production one; only
// its informers are handed a list-watch that streams a generated cluster
// (package fixture) the way kube-apiserver's watch-list does, so the pod and
// node objects still pass through pkg/cache's transforms and the index's
// event handlers. The HTTPS client runs in a child process (the test binary
// re-executed), so the benchmark process's CPU time is the server's alone.
//
//	go test ./test/perf/ -run '^$' -bench . -benchtime 10s
//	make bench-server          # -count 6 and benchstat into bin/bench-server.txt
//
// The algorithm's own benchmarks live beside it, in pkg/spread.
// docs/performance.md has the figures, the machine and the commands.
package perf
