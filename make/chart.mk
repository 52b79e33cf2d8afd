##@ Chart

CHART_DIR := charts/spreadguard
CHART_TEST_DIR := test/chart
# promtool, for `promtool test rules` on the chart's alerts: built by
# hack/build-binaries.sh at the version of github.com/prometheus/prometheus
# that test/chart requires, so the tests and the binary agree.
PROMETHEUS_VERSION ?= $(shell awk '$$1 == "github.com/prometheus/prometheus" { print $$2 }' $(CHART_TEST_DIR)/go.mod)
export PROMETHEUS_VERSION
PROMTOOL := $(BIN)/.stamps/promtool-$(PROMETHEUS_VERSION).$(BINARY_RECIPE)

$(PROMTOOL):
	hack/build-binaries.sh promtool
CERTS_DIR ?= certs/dev
# Names of the development serving certificate: what a local API server uses
# to reach a webhook server running on this machine.
CERT_HOSTS ?= localhost,127.0.0.1,::1

.PHONY: chart-lint
chart-lint: $(HELM) ## Lint the chart (helm lint --strict) with its defaults and every values file in ci/.
	$(BIN)/helm lint --strict --namespace spreadguard-system $(CHART_DIR)
	@for f in $(CHART_DIR)/ci/*.yaml; do \
	  echo "$(BIN)/helm lint --strict --namespace spreadguard-system -f $$f $(CHART_DIR)"; \
	  $(BIN)/helm lint --strict --namespace spreadguard-system -f "$$f" $(CHART_DIR) || exit 1; \
	done
	@# The other way round: every values file of test/chart/testdata/invalid must
	@# fail (the Go tests check that the message names what is wrong).
	@for f in $(CHART_TEST_DIR)/testdata/invalid/*.yaml; do \
	  if $(BIN)/helm lint --strict --namespace spreadguard-system -f "$$f" $(CHART_DIR) >/dev/null 2>&1; then \
	    echo "helm lint accepts $$f, which the schema must refuse" >&2; exit 1; \
	  fi; \
	done; echo "helm lint refuses every values file in $(CHART_TEST_DIR)/testdata/invalid"

.PHONY: test-chart
test-chart: $(HELM) $(ETCD) $(KUBE_APISERVER) $(PROMTOOL) ## Render the chart with Helm 3 and 4 for each ci/ values file, check the objects, dry-run them against kube-apiserver, and test every alert with promtool.
	cd $(CHART_TEST_DIR) && $(GO) test $(GO_TEST_VET) -count=1 ./...

.PHONY: certs
certs: ## Write a development CA and a serving certificate for localhost/127.0.0.1 into certs/dev/ (kept when still good).
	$(GO) run ./hack/certs -dir $(CERTS_DIR) -hosts $(CERT_HOSTS)

.PHONY: chart-docs
chart-docs: ## Regenerate charts/spreadguard/README.md from values.yaml's `# --` comments.
	cd $(CHART_TEST_DIR) && $(GO) run ./cmd/chart-docs -chart $(ROOT)/$(CHART_DIR)

TEST_TARGETS += chart-lint test-chart
