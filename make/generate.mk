##@ Generate

# controller-gen writes the deepcopy functions next to the API types and the
# CRDs into the chart's files/crds/, which templates/webhook-crds.yaml renders
# as templates (so that `helm upgrade` updates them), not into crds/, which
# Helm installs once and never upgrades.
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
# CRDs only of spreadguard's own API: pkg/apis/karpenter and
# pkg/apis/nodeclass mirror part of CRDs that Karpenter and its cloud
# providers ship. All get deepcopy functions, each in its own package.
API_DIR := ./pkg/apis/spreadguard/...
KARPENTER_API_DIR := ./pkg/apis/karpenter/...
NODECLASS_API_DIR := ./pkg/apis/nodeclass/...
CRD_DIR := charts/spreadguard/files/crds
DEEPCOPY_FILE := pkg/apis/spreadguard/v1alpha1/zz_generated.deepcopy.go
KARPENTER_DEEPCOPY_FILE := pkg/apis/karpenter/v1/zz_generated.deepcopy.go
NODECLASS_DEEPCOPY_FILE := pkg/apis/nodeclass/v1/zz_generated.deepcopy.go

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build the pinned controller-gen into ./bin.

# gen-into writes the deepcopy file and the CRDs under $(1), a directory laid
# out like the repository, so that verify can compare a fresh copy with the
# tree. One shell line, so that it can run inside verify's recipe.
gen-into = mkdir -p $(1)/$(dir $(DEEPCOPY_FILE)) $(1)/$(dir $(KARPENTER_DEEPCOPY_FILE)) $(1)/$(dir $(NODECLASS_DEEPCOPY_FILE)) $(1)/$(CRD_DIR) && \
	$(CONTROLLER_GEN) object paths=$(API_DIR) output:object:dir=$(1)/$(dir $(DEEPCOPY_FILE)) && \
	$(CONTROLLER_GEN) object paths=$(KARPENTER_API_DIR) output:object:dir=$(1)/$(dir $(KARPENTER_DEEPCOPY_FILE)) && \
	$(CONTROLLER_GEN) object paths=$(NODECLASS_API_DIR) output:object:dir=$(1)/$(dir $(NODECLASS_DEEPCOPY_FILE)) && \
	$(CONTROLLER_GEN) crd paths=$(API_DIR) output:crd:dir=$(1)/$(CRD_DIR)

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy functions and the CRDs in charts/spreadguard/files/crds/.
	$(call gen-into,$(ROOT))

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail when a generated file (deepcopy, CRDs) is stale; `make generate` fixes it.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	( $(call gen-into,"$$tmp") ) >/dev/null; \
	stale=0; \
	for f in $(DEEPCOPY_FILE) $(KARPENTER_DEEPCOPY_FILE) $(NODECLASS_DEEPCOPY_FILE) $$(cd "$$tmp" && ls $(CRD_DIR)/*.yaml); do \
	  if ! diff -u "$$f" "$$tmp/$$f" >/dev/null 2>&1; then \
	    echo "stale generated file: $$f (run 'make generate' and commit the result)" >&2; \
	    diff -u "$$f" "$$tmp/$$f" >&2 || true; stale=1; \
	  fi; \
	done; \
	for f in $(CRD_DIR)/*.yaml; do \
	  [ -e "$$f" ] || continue; \
	  if [ ! -e "$$tmp/$$f" ]; then echo "stale generated file: $$f is no longer generated (delete it)" >&2; stale=1; fi; \
	done; \
	exit $$stale

TEST_TARGETS += verify
