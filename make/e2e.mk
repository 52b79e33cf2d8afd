##@ End to end

# The stamps of the cluster binaries (their rules are in the Makefile).
# Spelled out rather than $(ETCD) & co., which are defined after this file
# is included and would expand to nothing in a prerequisite list.
LOCAL_CLUSTER_BINARIES := $(BIN)/.stamps/etcd-$(ETCD_VERSION).$(BINARY_RECIPE) \
	$(BIN)/.stamps/kube-apiserver-$(KUBE_VERSION).$(BINARY_RECIPE) \
	$(BIN)/.stamps/kube-controller-manager-$(KUBE_VERSION).$(BINARY_RECIPE) \
	$(BIN)/.stamps/kube-scheduler-$(KUBE_VERSION).$(BINARY_RECIPE) \
	$(BIN)/.stamps/kubectl-$(KUBE_VERSION).$(BINARY_RECIPE) \
	$(BIN)/.stamps/kwok-$(KWOK_VERSION).$(BINARY_RECIPE)
HELM_BINARY := $(BIN)/.stamps/helm-$(HELM_VERSION).$(BINARY_RECIPE)
# Karpenter runs in the local cluster of the e2e suite (LOCAL_CLUSTER_KARPENTER).
KARPENTER_BINARY := $(BIN)/.stamps/karpenter-kwok-$(KARPENTER_VERSION).$(BINARY_RECIPE)
# The descheduler the rebalancing scenario runs (test/e2e/descheduler_test.go).
DESCHEDULER_BINARY := $(BIN)/.stamps/descheduler-$(DESCHEDULER_VERSION).$(BINARY_RECIPE)

KIND_VERSION ?= v0.33.0
KIND_BIN := $(BIN)/kind-$(KIND_VERSION)
# The node image of `make e2e-kind`; empty means kind's default for its
# version. Passed explicitly, so that a KIND_NODE_IMAGE exported for another
# target does not leak into this one.
E2E_KIND_NODE_IMAGE ?=
IMAGE ?= spreadguard-webhook:dev

.PHONY: cluster-up
cluster-up: $(LOCAL_CLUSTER_BINARIES) ## Run the local cluster alone (kwok nodes in 3 zones) until Ctrl-C; `source _output/local-cluster.env` sets KUBECONFIG.
	hack/local-cluster.sh run

.PHONY: dev
dev: $(LOCAL_CLUSTER_BINARIES) $(HELM_BINARY) certs ## Local cluster + webhook process + chart + a demo Deployment; prints the placement, stays up until Ctrl-C.
	hack/dev.sh run

# What the e2e suite needs built before it starts; `make test` builds these
# before its lanes start, so that no binary is built by two at once.
E2E_PREREQUISITES := $(LOCAL_CLUSTER_BINARIES) $(HELM_BINARY) $(KARPENTER_BINARY) $(DESCHEDULER_BINARY) certs

.PHONY: e2e
e2e: $(E2E_PREREQUISITES) ## Run the e2e suite on a local cluster started and torn down around it.
	hack/e2e.sh local

$(KIND_BIN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/kind@$(KIND_VERSION)
	mv $(BIN)/kind $@

# KIND_FROM_SOURCE=1 builds the node image from source even where kind's own
# images could be pulled; auto picks that only where Docker Hub is out of reach.
KIND_FROM_SOURCE ?= auto

.PHONY: e2e-kind
e2e-kind: ## Run the e2e suite on kind (1 control plane + 3 zoned workers): stock kind and cert-manager with internet access, a node image built from source otherwise.
	@if [ "$(KIND_FROM_SOURCE)" = 1 ] || { [ "$(KIND_FROM_SOURCE)" = auto ] && \
	    ! curl -sS --max-time 10 -o /dev/null https://registry-1.docker.io/v2/ 2>/dev/null; }; then \
	  echo "e2e-kind: building the kind node image from source (docs/kind.md)"; \
	  $(MAKE) --no-print-directory e2e-kind-local; \
	else \
	  $(MAKE) --no-print-directory e2e-kind-stock; \
	fi

.PHONY: e2e-kind-stock
e2e-kind-stock: $(KIND_BIN) $(BIN)/.stamps/kubectl-$(KUBE_VERSION).$(BINARY_RECIPE) $(HELM_BINARY) ## Run the e2e suite on stock kind with cert-manager (needs Docker and internet access).
	KIND=$(KIND_BIN) KIND_NODE_IMAGE=$(E2E_KIND_NODE_IMAGE) hack/e2e.sh kind

.PHONY: image
image: ## Build the webhook image (IMAGE=spreadguard-webhook:dev) from Dockerfile: FROM scratch + the static binary (needs Docker).
	hack/e2e.sh image $(IMAGE)

TEST_TARGETS += e2e

##@ Older Kubernetes

# The oldest Kubernetes minor spreadguard supports (docs/kubernetes-versions.md).
# Its staging modules are built at their own patch where the module proxy
# serves one (STAGING_PINS) and without the checksum database, which lacks
# several of them (GONOSUMDB=k8s.io); the checksums still go into the build
# module's go.sum. Its binaries live in bin/$(OLDEST_KUBE_VERSION), apart
# from the ones make test uses; etcd, kwok, helm, Karpenter and the
# descheduler are make test's own, linked in, so the whole suite runs.
OLDEST_KUBE_VERSION ?= v1.31.14
OLDEST_STAGING_PINS ?= k8s.io/cri-client@v0.31.4 k8s.io/csi-translation-lib@v0.31.12 \
	k8s.io/endpointslice@v0.31.4 k8s.io/kube-controller-manager@v0.31.5 \
	k8s.io/kube-proxy@v0.31.5 k8s.io/kube-scheduler@v0.31.8
OLDEST_BIN := $(BIN)/$(OLDEST_KUBE_VERSION)

.PHONY: e2e-oldest
e2e-oldest: $(BIN)/.stamps/etcd-$(ETCD_VERSION).$(BINARY_RECIPE) $(BIN)/.stamps/kwok-$(KWOK_VERSION).$(BINARY_RECIPE) $(HELM_BINARY) $(KARPENTER_BINARY) $(DESCHEDULER_BINARY) certs ## Run the e2e suite against the oldest supported Kubernetes (OLDEST_KUBE_VERSION), built from source; not part of make test.
	mkdir -p $(OLDEST_BIN)
	GONOSUMDB=k8s.io STAGING_PINS="$(OLDEST_STAGING_PINS)" BIN=$(OLDEST_BIN) KUBE_VERSION=$(OLDEST_KUBE_VERSION) \
	  hack/build-binaries.sh kube-apiserver kube-scheduler kube-controller-manager kubectl
	for b in etcd kwok helm karpenter-kwok karpenter-crds descheduler; do ln -sfn ../$$b $(OLDEST_BIN)/$$b; done
	BIN=$(OLDEST_BIN) PATH=$(OLDEST_BIN):$$PATH hack/e2e.sh local
