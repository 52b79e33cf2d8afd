# spreadguard's Makefile. `make help` lists the targets.
#
# Every tool is pinned and built into ./bin on first use, from source through
# the Go module proxy; nothing has to be installed by hand beyond Go and make.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
export PATH := $(BIN):$(PATH)
GO ?= go
# Every binary is static (hack/build-binaries.sh says why), and go test is
# built the same way, so that the tools built in the test modules (the
# control plane, etcd, kwok, helm) reuse the packages the tests compiled:
# CGO_ENABLED is part of every package's build key.
export CGO_ENABLED := 0
# The way hack/build-binaries.sh builds; part of every binary's stamp, so a
# bin/ built another way is rebuilt. Change it there too.
BINARY_RECIPE ?= static
export BINARY_RECIPE
# GO_TEST_VET is the -vet flag of every `go test` of the test targets.
# `make lint` runs go vet with all its analyzers over every module and
# build tag, so the tests leave out go test's own subset, which vetted the
# same code again on every run (about half of the unit tests' time here).
# `make test-unit GO_TEST_VET=` puts it back.
GO_TEST_VET ?= -vet=off
export GO_TEST_VET

# Pinned versions of the cluster binaries, built by hack/build-binaries.sh.
KUBE_VERSION ?= v1.37.1
ETCD_VERSION ?= v3.7.0
KWOK_VERSION ?= v0.8.0
HELM_VERSION ?= v3.22.0
# Karpenter's kwok cloud provider, the node autoscaler of the local e2e.
KARPENTER_VERSION ?= v1.15.0
# Karpenter's AWS provider, whose EC2NodeClass CRD the integration tests install.
KARPENTER_AWS_VERSION ?= v1.15.1
export KUBE_VERSION ETCD_VERSION KWOK_VERSION HELM_VERSION KARPENTER_VERSION KARPENTER_AWS_VERSION
# cert-manager of the kind e2e's cert-manager mode (hack/build-binaries.sh cert-manager).
CERT_MANAGER_VERSION ?= v1.21.2
export CERT_MANAGER_VERSION
# The descheduler the e2e suite runs to rebalance a workload after a zone returns.
DESCHEDULER_VERSION ?= v0.36.0
export DESCHEDULER_VERSION

# Pinned Go tools.
CONTROLLER_GEN_VERSION ?= v0.23.0
STATICCHECK_VERSION ?= v0.8.2
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da

# Each make/*.mk fragment adds its part of `make test` to TEST_TARGETS.
TEST_TARGETS :=

# Targets that need a cluster binary depend on its version stamp; the rules
# that build them are under "Binaries". Defined before the fragments are
# included, since prerequisites expand when a rule is read.
ETCD := $(BIN)/.stamps/etcd-$(ETCD_VERSION).$(BINARY_RECIPE)
KUBE_APISERVER := $(BIN)/.stamps/kube-apiserver-$(KUBE_VERSION).$(BINARY_RECIPE)
KUBE_SCHEDULER := $(BIN)/.stamps/kube-scheduler-$(KUBE_VERSION).$(BINARY_RECIPE)
KUBE_CONTROLLER_MANAGER := $(BIN)/.stamps/kube-controller-manager-$(KUBE_VERSION).$(BINARY_RECIPE)
KUBECTL := $(BIN)/.stamps/kubectl-$(KUBE_VERSION).$(BINARY_RECIPE)
KWOK := $(BIN)/.stamps/kwok-$(KWOK_VERSION).$(BINARY_RECIPE)
HELM := $(BIN)/.stamps/helm-$(HELM_VERSION).$(BINARY_RECIPE)
KARPENTER := $(BIN)/.stamps/karpenter-kwok-$(KARPENTER_VERSION).$(BINARY_RECIPE)
KARPENTER_AWS_CRDS := $(BIN)/.stamps/karpenter-aws-crds-$(KARPENTER_AWS_VERSION).$(BINARY_RECIPE)
DESCHEDULER := $(BIN)/.stamps/descheduler-$(DESCHEDULER_VERSION).$(BINARY_RECIPE)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
	  /^[a-zA-Z0-9_.-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

include $(sort $(wildcard make/*.mk))

##@ Test

TEST_TARGETS := test-unit $(TEST_TARGETS)

# `make test` runs in lanes at once. The e2e suite and the integration tests
# spend most of their time waiting on their API servers, controllers,
# scheduler and kwok (the e2e keeps about a third of two cores busy, the
# integration tests a fifth), so each runs in a lane of its own, beside the
# other targets, which run one after another under nice (TEST_NICE, and the
# integration tests too): the e2e cluster gets the CPU it asks for first and
# the others take what it leaves. The whole run takes about the longest
# lane's time instead of the sum. Each line is prefixed with its lane.
# TEST_LANES=1 runs every target in one lane, in order, with no prefix.
TEST_LANES ?= 3
TEST_NICE ?= 10
# The targets with a lane of their own, in the order they start; any other
# target of TEST_TARGETS runs in the lane "rest".
TEST_OWN_LANES := $(filter e2e test-integration,$(TEST_TARGETS))
TEST_REST_LANE := $(filter-out $(TEST_OWN_LANES),$(TEST_TARGETS))
# What more than one lane builds, built before the lanes start, so that no
# binary is built by two at once.
TEST_PREREQUISITES := $(sort $(E2E_PREREQUISITES) $(INTEGRATION_PREREQUISITES))

.PHONY: test test-lane-rest $(addprefix test-lane-,$(TEST_OWN_LANES))
# `make help` reads the first of these lines.
ifeq ($(TEST_LANES),1)
test: $(TEST_TARGETS) ## Run every test: unit, lint, chart, e2e, fuzz, generated files, hack, integration and parity (in three lanes; TEST_LANES=1: one).
else ifeq ($(TEST_LANES),3)
test: $(TEST_PREREQUISITES)
	$(MAKE) --no-print-directory -j$(words $(TEST_OWN_LANES) rest) $(addprefix test-lane-,$(TEST_OWN_LANES)) test-lane-rest
else
test:
	$(error TEST_LANES=$(TEST_LANES): must be 1 (one target after another) or 3 (the e2e suite and the integration tests each beside the rest))
endif

# A lane's targets run in order (-j1). Its make gets the outer flags and
# variables without the jobserver, which -j1 would only warn about dropping.
TEST_LANE_MAKE = env MAKEFLAGS='$(filter-out -j% --jobserver%,$(MAKEFLAGS))' $(MAKE) --no-print-directory -j1

test-lane-e2e:
	$(TEST_LANE_MAKE) e2e 2>&1 | sed -u 's/^/[e2e] /'

test-lane-test-integration:
	nice -n $(TEST_NICE) $(TEST_LANE_MAKE) test-integration 2>&1 | sed -u 's/^/[integration] /'

# A lane with no target has nothing to run (its make would print the help).
test-lane-rest:
	$(if $(TEST_REST_LANE),nice -n $(TEST_NICE) $(TEST_LANE_MAKE) $(TEST_REST_LANE) 2>&1 | sed -u 's/^/[rest] /',@:)

.PHONY: test-unit
test-unit: ## Run the unit tests (no cluster binaries needed).
	$(GO) test $(GO_TEST_VET) -count=1 ./...

##@ Binaries

.PHONY: binaries
binaries: ## Build every cluster binary (etcd, control plane, kwok, helm, Karpenter's kwok provider, descheduler) into ./bin.
	hack/build-binaries.sh

$(BIN)/.stamps/etcd-$(ETCD_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh etcd
$(BIN)/.stamps/kube-apiserver-$(KUBE_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh kube-apiserver
$(BIN)/.stamps/kube-scheduler-$(KUBE_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh kube-scheduler
$(BIN)/.stamps/kube-controller-manager-$(KUBE_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh kube-controller-manager
$(BIN)/.stamps/kubectl-$(KUBE_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh kubectl
$(BIN)/.stamps/kwok-$(KWOK_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh kwok
$(BIN)/.stamps/helm-$(HELM_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh helm
$(BIN)/.stamps/karpenter-kwok-$(KARPENTER_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh karpenter
$(BIN)/.stamps/karpenter-aws-crds-$(KARPENTER_AWS_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh karpenter-aws-crds
$(BIN)/.stamps/descheduler-$(DESCHEDULER_VERSION).$(BINARY_RECIPE):
	hack/build-binaries.sh descheduler

