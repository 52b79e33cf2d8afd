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
