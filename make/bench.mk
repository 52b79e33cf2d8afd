##@ Benchmarks

BENCH_COUNT ?= 6
BENCH_PKGS ?= ./pkg/...
BENCH_OUT ?= $(BIN)/bench.txt
BENCHSTAT_STAMP := $(BIN)/.stamps/benchstat-$(BENCHSTAT_VERSION)

$(BENCHSTAT_STAMP):
	@mkdir -p $(BIN)/.stamps
	GOBIN=$(BIN) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)
	@touch $@

.PHONY: bench
bench: $(BENCHSTAT_STAMP) ## Run every benchmark of ./pkg/... 6 times (BENCH_COUNT) into bin/bench.txt and summarise it with benchstat.
	@mkdir -p $(BIN)
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_PKGS) | tee $(BENCH_OUT)
	$(BIN)/benchstat $(BENCH_OUT)

BENCH_EVENTS_OUT ?= $(BIN)/bench-events.txt

.PHONY: bench-events
bench-events: $(BENCHSTAT_STAMP) ## Run only the pod event benchmarks (decoded pod -> transform -> handler -> index, and the index alone) into bin/bench-events.txt.
	@mkdir -p $(BIN)
	$(GO) test -run '^$$' -bench 'BenchmarkPodEvent|BenchmarkIndexPodEvent' -benchmem -count $(BENCH_COUNT) ./pkg/state ./pkg/spread | tee $(BENCH_EVENTS_OUT)
	$(BIN)/benchstat $(BENCH_EVENTS_OUT)
