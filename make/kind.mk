##@ kind on machines without a registry

# `make e2e-kind` (make/e2e.mk) assumes Docker and internet access. The
# targets here make the same run work on a VM that reaches only the Go module
# proxy and Debian's archive: dockerd started on demand, a node image and the
# control-plane images built from source (hack/kind-without-registry/build-node-image.sh), and
# a docker shim where `docker run --privileged` fails. See docs/kind.md.

KIND_NODE_IMAGE ?= spreadguard.local/kind-node:$(KUBE_VERSION)
KIND_CLUSTER ?= spreadguard-e2e
# auto: cert-manager mode when the module proxy serves cert-manager's module
# (its controller, cainjector and webhook are built from it, see
# hack/kind-without-registry/cert-manager.sh), the chart's self-signed mode otherwise; or force
# cert-manager / self-signed.
KIND_CERT_MODE ?= auto
export KIND_NODE_IMAGE KIND_CLUSTER KIND_CERT_MODE KIND_VERSION

.PHONY: docker-up
docker-up: ## Start dockerd (installing Debian's docker.io) when no Docker engine answers.
	hack/kind-without-registry/ensure-docker.sh start

.PHONY: docker-down
docker-down: ## Stop the dockerd that `make docker-up` started (no-op otherwise).
	hack/kind-without-registry/ensure-docker.sh stop

.PHONY: kind-node-image
kind-node-image: ## Build the kind node image and the control-plane images from source (KIND_NODE_IMAGE); needs a Docker engine.
	hack/kind-without-registry/build-node-image.sh

.PHONY: e2e-kind-local
e2e-kind-local: $(KIND_BIN) $(BIN)/.stamps/kubectl-$(KUBE_VERSION).$(BINARY_RECIPE) $(HELM_BINARY) ## `make e2e-kind` on a machine without a registry: dockerd, node image, kind cluster, chart, suite, teardown.
	KIND=$(KIND_BIN) bash -c "$$E2E_KIND_LOCAL"

# The run of e2e-kind-local. It does what `hack/e2e.sh kind` does, with the
# node image built here, the docker shim on PATH and cert-manager built from
# source (or the chart's self-signed mode); the suite is run the same way
# (same environment, same go test line). Steps print their wall time.
define E2E_KIND_LOCAL
set -euo pipefail
ROOT=$$PWD BIN=$$PWD/bin
ARTIFACTS=$$ROOT/test/e2e/_artifacts
RELEASE=$${RELEASE:-spreadguard} NS=$${RELEASE_NAMESPACE:-spreadguard-system}
log() { printf '[e2e-kind-local] %s\n' "$$*" >&2; }
t=$$SECONDS
lap() { log "$$1: $$((SECONDS - t))s"; t=$$SECONDS; }

# dockerd is stopped at the end only if this run started it.
own_docker=0
docker info >/dev/null 2>&1 || own_docker=1
hack/kind-without-registry/ensure-docker.sh start
tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/spreadguard-e2e-kind.XXXXXX")
export KUBECONFIG=$$tmp/kubeconfig
cleanup() {
  local rc=$$?
  trap - EXIT INT TERM
  if [[ $$rc -ne 0 ]]; then
    "$$KIND" export logs "$$ARTIFACTS/kind" --name "$$KIND_CLUSTER" >/dev/null 2>&1 || true
    log "FAILED: logs in $$ARTIFACTS"
  fi
  if [[ $${KIND_KEEP:-} == 1 ]]; then
    log "kept kind cluster $$KIND_CLUSTER and dockerd (KUBECONFIG=$$KUBECONFIG); then: $$KIND delete cluster --name $$KIND_CLUSTER; make docker-down"
  else
    "$$KIND" delete cluster --name "$$KIND_CLUSTER" >/dev/null 2>&1 || true
    rm -rf "$$tmp"
    if [[ $$own_docker == 1 ]]; then hack/kind-without-registry/ensure-docker.sh stop; fi
  fi
  exit $$rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rm -rf "$$ARTIFACTS" && mkdir -p "$$ARTIFACTS"

hack/kind-without-registry/build-node-image.sh
lap "node image"

# The shim stands in for docker only where --privileged cannot work.
export PATH=$$ROOT/hack/kind-without-registry/docker-shim:$$PATH DOCKER_BUILDKIT=0
"$$KIND" delete cluster --name "$$KIND_CLUSTER" >/dev/null 2>&1 || true
"$$KIND" create cluster --name "$$KIND_CLUSTER" --config hack/kind-config.yaml \
  --image "$$KIND_NODE_IMAGE" --kubeconfig "$$KUBECONFIG" --wait 3m
lap "cluster create"

image=spreadguard-webhook:e2e
hack/e2e.sh image "$$image"
"$$KIND" load docker-image "$$image" --name "$$KIND_CLUSTER"
lap "webhook image"

k() { "$$BIN/kubectl" "$$@"; }
mode=$$KIND_CERT_MODE
if [[ $$mode == auto ]]; then
  mode=self-signed
  hack/kind-without-registry/cert-manager.sh available && mode=cert-manager
fi
set_cert=(--set certManager.enabled=false)
if [[ $$mode == cert-manager ]]; then
  hack/kind-without-registry/cert-manager.sh install
  set_cert=(--set certManager.enabled=true)
  lap "cert-manager"
else
  log "the chart's self-signed mode"
fi
export SPREADGUARD_E2E_CERT_MODE=$$mode

log "installing the chart ($$mode mode, image $$image)"
"$$BIN/helm" install "$$RELEASE" charts/spreadguard --namespace "$$NS" --create-namespace \
  "$${set_cert[@]}" --set image.repository="$${image%%:*}" --set image.tag="$${image##*:}" \
  --set image.pullPolicy=Never --wait --timeout 5m
deploy=$$(k -n "$$NS" get deployment -l "app.kubernetes.io/instance=$$RELEASE" -o name | head -1)
[[ -n $$deploy ]] || { log "the chart made no Deployment in $$NS"; exit 1; }
replicas=$$(k -n "$$NS" get "$$deploy" -o jsonpath='{.spec.replicas}')
kc="$$BIN/kubectl --kubeconfig $$KUBECONFIG -n $$NS"
export SPREADGUARD_E2E_STOP_CMD="$$kc scale $$deploy --replicas=0 && $$kc wait --for=delete pod -l app.kubernetes.io/instance=$$RELEASE --timeout=2m"
export SPREADGUARD_E2E_START_CMD="$$kc scale $$deploy --replicas=$$replicas && $$kc rollout status $$deploy --timeout=2m"
export SPREADGUARD_E2E_ARTIFACTS=$$ARTIFACTS
CGO_ENABLED=0 go build -o "$$BIN/kubectl-spread" ./cmd/kubectl-spread
export SPREADGUARD_E2E_KUBECTL_SPREAD=$$BIN/kubectl-spread
lap "chart"

log "go test -tags e2e ./... in test/e2e (KUBECONFIG=$$KUBECONFIG)"
(cd test/e2e && go test -tags e2e -count=1 -v -timeout 20m ./... $${GO_TEST_FLAGS:-})
lap "suite"
endef
e2e-kind-local: export E2E_KIND_LOCAL := $(E2E_KIND_LOCAL)
