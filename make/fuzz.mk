##@ Fuzz

# Every fuzz target of the module, found by name in the test files. `go test
# -fuzz` takes one target of one package at a time.
FUZZ_DIRS = $(sort $(dir $(shell grep -rl --include='*_test.go' '^func Fuzz' cmd pkg 2>/dev/null)))
# The packages whose targets make test fuzzes briefly: the engine's, whose
# test binaries import little beyond the standard library. go test -fuzz
# compiles every package of the test binary again with coverage
# instrumentation; for pkg/admission that is controller-runtime, client-go
# and the API types: 224 s on a cold 2-core machine, after the 82 s the
# engine's targets take, for 10 seconds of fuzzing. Its target,
# FuzzPodEndpoints, runs its seed corpus with the unit tests and is fuzzed
# by make fuzz.
FUZZ_BRIEF_DIRS ?= pkg/spread/
FUZZTIME ?= 10s
FUZZTIME_LONG ?= 5m
# How long go test -fuzz minimizes each new input (-fuzzminimizetime). The
# brief runs of make test do not minimize: Go's default of 60s goes to the
# first input that finds new coverage, and a 10s run of FuzzPodEndpoints,
# whose inputs are whole AdmissionReviews, then ran 33 inputs and stopped
# there. A failing input is still written, unminimized. The long runs keep
# Go's default.
FUZZMINIMIZETIME ?= 0
FUZZMINIMIZETIME_LONG ?= 60s

# run-fuzz runs each fuzz target of the packages $(3) for $(1), minimizing
# new inputs for $(2).
define run-fuzz
	@set -e; for dir in $(3); do \
	  for fn in $$(grep -h '^func Fuzz' $$dir*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "fuzz ./$$dir $$fn for $(1)"; \
	    $(GO) test $(GO_TEST_VET) ./$$dir -run '^$$' -fuzz "^$$fn$$" -fuzztime $(1) -fuzzminimizetime $(2); \
	  done; \
	done
endef

.PHONY: test-fuzz
test-fuzz: ## Run the engine's fuzz targets briefly (FUZZTIME, default 10s each, no minimizing); part of `make test`.
	$(call run-fuzz,$(FUZZTIME),$(FUZZMINIMIZETIME),$(FUZZ_BRIEF_DIRS))

.PHONY: fuzz
fuzz: ## Run every fuzz target for longer (FUZZTIME_LONG, default 5m each).
	$(call run-fuzz,$(FUZZTIME_LONG),$(FUZZMINIMIZETIME_LONG),$(FUZZ_DIRS))

TEST_TARGETS += test-fuzz
