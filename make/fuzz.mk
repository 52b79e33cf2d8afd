##@ Fuzz

# Every fuzz target of the module, found by name in the test files. `go test
# -fuzz` takes one target of one package at a time.
FUZZ_DIRS = $(sort $(dir $(shell grep -rl --include='*_test.go' '^func Fuzz' cmd pkg 2>/dev/null)))
FUZZTIME ?= 10s
FUZZTIME_LONG ?= 5m

# run-fuzz runs each fuzz target for $(1).
define run-fuzz
	@set -e; for dir in $(FUZZ_DIRS); do \
	  for fn in $$(grep -h '^func Fuzz' $$dir*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "fuzz ./$$dir $$fn for $(1)"; \
	    $(GO) test $(GO_TEST_VET) ./$$dir -run '^$$' -fuzz "^$$fn$$" -fuzztime $(1); \
	  done; \
	done
endef

.PHONY: test-fuzz
test-fuzz: ## Run every fuzz target briefly (FUZZTIME, default 10s each); part of `make test`.
	$(call run-fuzz,$(FUZZTIME))

.PHONY: fuzz
fuzz: ## Run every fuzz target for longer (FUZZTIME_LONG, default 5m each).
	$(call run-fuzz,$(FUZZTIME_LONG))

TEST_TARGETS += test-fuzz
