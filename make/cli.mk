##@ Build

# The two binaries spreadguard ships. `kubectl spread` finds ./bin/kubectl-spread
# once ./bin is on PATH (the Makefile puts it there for its own recipes).
GO_BUILD_FLAGS ?= -trimpath

.PHONY: build
build: ## Build ./bin/kubectl-spread and ./bin/spreadguard-webhook.
	@mkdir -p $(BIN)
	$(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/kubectl-spread ./cmd/kubectl-spread
	$(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/spreadguard-webhook ./cmd/webhook

.PHONY: examples
examples: ## Run `kubectl spread check` on every example pod (examples/README.md shows the output).
	@mkdir -p $(BIN)
	$(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/kubectl-spread ./cmd/kubectl-spread
	@# A denied pod exits 1; that is the example, not a failure of the target.
	@for pod in examples/pod-*.yaml; do \
	  echo "\$$ kubectl spread check --cluster examples/cluster.yaml --pod $$pod"; \
	  rc=0; $(BIN)/kubectl-spread check --cluster examples/cluster.yaml --pod $$pod || rc=$$?; \
	  echo "(exit $$rc)"; echo; \
	done
