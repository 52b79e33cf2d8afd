##@ Parity

# The parity test is a module of its own (test/parity) because it imports
# k8s.io/kubernetes for the real scheduler plugins, which the production
# module must never depend on. Its first build compiles the scheduler and
# takes minutes; later runs reuse the Go build cache.
#
# PARITY_SEED, PARITY_N and PARITY_CASE (or the -parity.* flags through
# PARITY_FLAGS) replay a failing case, e.g.
#   make test-parity PARITY_SEED=20260101 PARITY_CASE=17
PARITY_FLAGS ?=
export PARITY_SEED PARITY_N PARITY_CASE

.PHONY: test-parity
test-parity: ## Compare pkg/spread with the real kube-scheduler v1.37.1 plugins on thousands of random clusters.
	cd test/parity && $(GO) test $(GO_TEST_VET) -count=1 ./... $(PARITY_FLAGS)

TEST_TARGETS += test-parity
