##@ Server performance

# The webhook server's benchmarks (test/perf): the whole HTTPS admission path
# of the production composition root, and the memory of its caches, at 50 and
# 5,000 nodes. The 5,000-node server takes about a minute to fill once per
# `go test` process; the admission benchmarks share it. Each memory
# measurement fills a fresh child process.
#
#   make bench-server                              # both, BENCH_SERVER_COUNT times, then benchstat
#   make bench-server BENCH_SERVER_ADMISSION=      # only the memory benchmarks
#   make bench-server BENCH_SERVER_MEMORY='BenchmarkServerMemory/nodes=50,'  # a subset
#   SPREADGUARD_PERF_CPUPROFILE=/tmp/prof make bench-server   # CPU profile of each timed run
#   SPREADGUARD_PERF_HEAPPROFILE=/tmp/prof make bench-server  # heap profile after each fill
#
# docs/performance.md has the figures and what they mean.
BENCH_SERVER_COUNT ?= $(or $(BENCH_COUNT),6)
# Per admission benchmark and count: long enough for a p99.9 over thousands
# of reviews where the server is fast.
BENCH_SERVER_TIME ?= 10s
BENCH_SERVER_ADMISSION ?= BenchmarkAdmissionHTTPS
BENCH_SERVER_MEMORY ?= BenchmarkServerMemory
BENCH_SERVER_OUT ?= $(BIN)/bench-server.txt
export SPREADGUARD_PERF_CPUPROFILE SPREADGUARD_PERF_HEAPPROFILE

# make/bench.mk installs benchstat; without it, this file does.
ifndef BENCHSTAT_STAMP
BENCHSTAT_STAMP := $(BIN)/.stamps/benchstat-$(BENCHSTAT_VERSION)
$(BENCHSTAT_STAMP):
	@mkdir -p $(BIN)/.stamps
	GOBIN=$(BIN) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)
	@touch $@
endif

.PHONY: bench-server
bench-server: $(BENCHSTAT_STAMP) ## Benchmark the webhook server (HTTPS reviews/s, p50/p99/p99.9, memory) at 50 and 5,000 nodes into bin/bench-server.txt.
	@mkdir -p $(BIN)
	@# Into a file of this run's own, moved into place at the end: a second
	@# `make bench` started meanwhile must not interleave its lines with these.
	out=$$(mktemp $(BENCH_SERVER_OUT).XXXXXX); trap 'rm -f "$$out"' EXIT; \
	$(if $(BENCH_SERVER_ADMISSION),$(GO) test ./test/perf/ -run '^$$' -bench '$(BENCH_SERVER_ADMISSION)' \
		-benchtime $(BENCH_SERVER_TIME) -count $(BENCH_SERVER_COUNT) -timeout 4h | tee -a "$$out";) \
	$(if $(BENCH_SERVER_MEMORY),$(GO) test ./test/perf/ -run '^$$' -bench '$(BENCH_SERVER_MEMORY)' \
		-benchtime 1x -count $(BENCH_SERVER_COUNT) -timeout 4h | tee -a "$$out";) \
	mv "$$out" $(BENCH_SERVER_OUT)
	$(BIN)/benchstat $(BENCH_SERVER_OUT)

# `make bench` runs these too.
bench: bench-server

# The same, against a real cluster: kube-apiserver, etcd and kwok nodes on this
# machine, the webhook as a process, pods created through the API. Heavy; not
# part of `make test`.
BENCH_SCALE_NODES ?= 5000
BENCH_SCALE_PODS_PER_NODE ?= 30
BENCH_SCALE_BURST ?= 1000
BENCH_SCALE_PARALLEL ?= 8
export BENCH_SCALE_NODES BENCH_SCALE_PODS_PER_NODE BENCH_SCALE_BURST BENCH_SCALE_PARALLEL

.PHONY: bench-scale
bench-scale: $(LOCAL_CLUSTER_BINARIES) $(HELM_BINARY) ## Fill a local cluster (5,000 kwok nodes, 150,000 pods) and measure pod creation with no webhook, a no-op webhook, one answering spreadguard's patch and spreadguard, and its RSS (BENCH_SCALE_PPROF=1: CPU profiles too).
	hack/bench-scale.sh

# The same cluster with BENCH_SCALE_REPLICAS spreadguard replicas behind one
# Service: reviews, CPU per review and RSS per replica, and kube-apiserver's
# watches with 0, 1, 2... replicas.
BENCH_SCALE_REPLICAS ?= 2
export BENCH_SCALE_REPLICAS

.PHONY: bench-replicas
bench-replicas: $(LOCAL_CLUSTER_BINARIES) $(HELM_BINARY) ## Fill a local cluster and measure BENCH_SCALE_REPLICAS spreadguard replicas behind a Service: reviews, CPU and RSS per replica, API server watches.
	hack/bench-scale.sh replicas
