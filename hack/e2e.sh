#!/usr/bin/env bash
# e2e.sh runs the e2e suite (test/e2e, build tag e2e) on a cluster it starts
# and tears down.
#
#   hack/e2e.sh [local]   the local cluster of hack/dev.sh (kwok nodes in 3
#                         zones), the webhook as a local process, the chart
#                         in external-URL mode; first, on a cluster of its
#                         own, the upgrade scenario (TestUpgrade): the
#                         previous chart installed, then upgraded to this
#                         one under load
#   hack/e2e.sh kind      a kind cluster (a control plane, a worker in each of
#                         3 zones), the webhook image built from Dockerfile and
#                         `kind load`ed, cert-manager, the chart in
#                         cert-manager mode; needs Docker and internet access
#   hack/e2e.sh image [NAME:TAG]
#                         only build the image (default spreadguard-webhook:dev)
#
# When the suite fails, the component logs (local) or `kind export logs`
# (kind) land next to the tests' own logs in test/e2e/_artifacts.
#
# Environment: GO_TEST_FLAGS (e.g. "-run TestE2E/a_StatefulSet"),
# E2E_PHASES (local: "upgrade suite", the default, or either alone),
# LOCAL_CLUSTER_KARPENTER (default 1: Karpenter runs in the local cluster),
# SPREADGUARD_E2E_START_FLAGS_CMD (the command that starts the webhook with
# the flags it is given; default hack/dev.sh webhook-start),
# SPREADGUARD_E2E_DESCHEDULER (default bin/descheduler when built), and for
# kind: KIND (the kind binary), KIND_CLUSTER (spreadguard-e2e),
# KIND_NODE_IMAGE (kind's default when empty), KIND_KEEP=1 (keep the
# cluster), CERT_MANAGER_VERSION (v1.21.2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"
BIN=${BIN:-$ROOT/bin}
ARTIFACTS=$ROOT/test/e2e/_artifacts
RELEASE=${RELEASE:-spreadguard}
RELEASE_NAMESPACE=${RELEASE_NAMESPACE:-spreadguard-system}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
GO_TEST_FLAGS=${GO_TEST_FLAGS:-}
# make exports GO_TEST_VET (-vet=off: make lint vets every module).
GO_TEST_VET=${GO_TEST_VET:-}
export BIN

go_test() {
  log "go test -tags e2e ./... in test/e2e, a module of its own (KUBECONFIG=$KUBECONFIG)"
  # shellcheck disable=SC2086
  (cd "$ROOT/test/e2e" && go test $GO_TEST_VET -tags e2e -count=1 -v -timeout 20m ./... $GO_TEST_FLAGS)
}

# ---------------------------------------------------------------- local

E2E_PHASES=${E2E_PHASES:-upgrade suite}
# Where the previous releases' webhooks are built (hack/previous-webhook.sh).
PREVIOUS_WEBHOOKS=${PREVIOUS_WEBHOOKS:-$ROOT/_output/previous-webhook}

# upgrade_e2e runs the upgrade scenario on a local cluster of its own,
# started without spreadguard: the scenario installs the previous chart,
# upgrades it under load and restarts the webhook, and the cluster goes
# with it, so the suite after it starts from a fresh install. Karpenter is
# left out: the scenario does not need it.
upgrade_e2e() {
  local rc=0 env=$tmp/upgrade.env logs=$tmp/upgrade-logs chart commit
  # The webhook each previous chart shipped with, which serves until the
  # rollout: built from its commit (named in the package's file name) once,
  # and kept under _output.
  for chart in "$ROOT"/test/e2e/testdata/previous/*.tgz; do
    commit=$(basename "$chart" .tgz)
    commit=${commit##*-}
    "$ROOT/hack/previous-webhook.sh" "$commit" "$PREVIOUS_WEBHOOKS/$commit/spreadguard-webhook"
  done
  DEV_ENV=$env LOCAL_CLUSTER_LOGS=$logs DEV_LOGS=$logs LOCAL_CLUSTER_KARPENTER=0 \
    "$ROOT/hack/dev.sh" run --no-webhook &
  upgrade_pid=$!
  until [[ -f $env ]]; do
    kill -0 "$upgrade_pid" 2>/dev/null || { wait "$upgrade_pid" || true; die "the upgrade scenario's cluster did not start (logs above)"; }
    sleep 0.5
  done
  (
    # shellcheck disable=SC1090
    source "$env"
    export KUBECONFIG
    export SPREADGUARD_E2E_PHASE=upgrade
    export SPREADGUARD_E2E_EXTRA_START_CMD="DEV_ENV=$env $WEBHOOK_EXTRA_START_CMD"
    export SPREADGUARD_E2E_EXTRA_STOP_CMD="DEV_ENV=$env $WEBHOOK_EXTRA_STOP_CMD"
    export SPREADGUARD_E2E_EXTRA_KILL_CMD="DEV_ENV=$env $WEBHOOK_EXTRA_KILL_CMD"
    export SPREADGUARD_E2E_WEBHOOK_CERT_DIR=$WEBHOOK_CERT_DIR
    export SPREADGUARD_E2E_HELM=$BIN/helm
    export SPREADGUARD_E2E_ARTIFACTS=$ARTIFACTS
    export SPREADGUARD_E2E_PREVIOUS_WEBHOOKS=$PREVIOUS_WEBHOOKS
    log "go test -tags e2e -run '^TestUpgrade\$' ./... in test/e2e, a module of its own (KUBECONFIG=$KUBECONFIG)"
    # shellcheck disable=SC2086
    cd "$ROOT/test/e2e" && go test $GO_TEST_VET -tags e2e -count=1 -v -timeout 25m -run '^TestUpgrade$' ./...
  ) || rc=$?
  kill -TERM "$upgrade_pid" 2>/dev/null || true
  wait "$upgrade_pid" 2>/dev/null || true
  upgrade_pid=
  if [[ $rc -ne 0 ]]; then
    mkdir -p "$ARTIFACTS/upgrade-cluster" && cp "$logs"/* "$ARTIFACTS/upgrade-cluster/" 2>/dev/null || true
  fi
  return "$rc"
}

local_e2e() {
  local rc=0
  # Globals: the EXIT trap runs after this function has returned.
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/spreadguard-e2e.XXXXXX")
  rm -rf "$ARTIFACTS" && mkdir -p "$ARTIFACTS"
  upgrade_pid=
  dev_pid=
  local_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    for pid in $upgrade_pid $dev_pid; do
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
    exit "$rc"
  }
  trap local_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  if [[ " $E2E_PHASES " == *" upgrade "* ]]; then
    upgrade_e2e || rc=$?
  fi
  if [[ " $E2E_PHASES " == *" suite "* ]]; then
    suite_e2e || rc=$?
  fi
  if [[ $rc -ne 0 ]]; then
    log "FAILED: logs in $ARTIFACTS"
  fi
  return "$rc"
}

# suite_e2e runs the suite on the local cluster of hack/dev.sh with the
# chart installed.
suite_e2e() {
  local rc=0
  export DEV_ENV=$tmp/dev.env LOCAL_CLUSTER_LOGS=$tmp/logs DEV_LOGS=$tmp/logs
  # Karpenter's kwok provider launches nodes for the autoscaler scenarios.
  export LOCAL_CLUSTER_KARPENTER=${LOCAL_CLUSTER_KARPENTER:-1}
  # With Karpenter started, its scenarios must run, not skip.
  export SPREADGUARD_E2E_REQUIRE_KARPENTER=$LOCAL_CLUSTER_KARPENTER
  # The audit's pass 1s after a change rather than 10s: the health and
  # rebalancing scenarios wait for passes. The keeper runs at the chart's
  # default rate (20 patches a second), as users run it.
  export WEBHOOK_FLAGS=${WEBHOOK_FLAGS:---audit-coalesce-delay=1s}

  "$ROOT/hack/dev.sh" run --no-demo &
  dev_pid=$!
  until [[ -f $DEV_ENV ]]; do
    kill -0 "$dev_pid" 2>/dev/null || { wait "$dev_pid" || true; die "the local cluster or the webhook did not start (logs above)"; }
    sleep 0.5
  done
  # shellcheck disable=SC1090
  source "$DEV_ENV"
  export KUBECONFIG
  export SPREADGUARD_E2E_WEBHOOK_LOG=$WEBHOOK_LOG
  export SPREADGUARD_E2E_STOP_CMD="DEV_ENV=$DEV_ENV $WEBHOOK_STOP_CMD"
  export SPREADGUARD_E2E_START_CMD="DEV_ENV=$DEV_ENV $WEBHOOK_START_CMD"
  # The same, taking webhook flags as arguments (hack/dev.sh webhook-start).
  export SPREADGUARD_E2E_START_FLAGS_CMD=${SPREADGUARD_E2E_START_FLAGS_CMD:-"DEV_ENV=$DEV_ENV $WEBHOOK_START_CMD"}
  export SPREADGUARD_E2E_ARTIFACTS=$ARTIFACTS
  export SPREADGUARD_E2E_KUBECTL_SPREAD=$BIN/kubectl-spread
  (cd "$ROOT" && go build -o "$BIN/kubectl-spread" ./cmd/kubectl-spread)
  # Renewing the serving certificate on disk, as cert-manager does.
  (cd "$ROOT" && go build -o "$BIN/spreadguard-certs" ./hack/certs)
  export SPREADGUARD_E2E_WEBHOOK_URL=$WEBHOOK_URL
  # The webhook's /metrics, where the suite counts its reviews.
  export SPREADGUARD_E2E_WEBHOOK_METRICS_URL=$WEBHOOK_METRICS_URL
  export SPREADGUARD_E2E_RENEW_CERT_CMD="$BIN/spreadguard-certs -dir $WEBHOOK_CERT_DIR -renew"
  export SPREADGUARD_E2E_EXTRA_START_CMD="DEV_ENV=$DEV_ENV $WEBHOOK_EXTRA_START_CMD"
  export SPREADGUARD_E2E_EXTRA_STOP_CMD="DEV_ENV=$DEV_ENV $WEBHOOK_EXTRA_STOP_CMD"
  export SPREADGUARD_E2E_EXTRA_KILL_CMD="DEV_ENV=$DEV_ENV $WEBHOOK_EXTRA_KILL_CMD"
  export SPREADGUARD_E2E_RESTART_APISERVER_CMD=$RESTART_APISERVER_CMD
  # The descheduler of the rebalancing scenario (hack/build-binaries.sh
  # descheduler, a prerequisite of make e2e and make e2e-oldest); where BIN
  # has none the scenario is skipped.
  if [[ -z ${SPREADGUARD_E2E_DESCHEDULER:-} && -x $BIN/descheduler ]]; then
    export SPREADGUARD_E2E_DESCHEDULER=$BIN/descheduler
  fi

  go_test || rc=$?

  kill -TERM "$dev_pid" 2>/dev/null || true
  wait "$dev_pid" 2>/dev/null || true
  dev_pid=
  if [[ $rc -ne 0 ]]; then
    mkdir -p "$ARTIFACTS/cluster" && cp "$tmp"/logs/* "$ARTIFACTS/cluster/" 2>/dev/null || true
  fi
  return "$rc"
}

# ---------------------------------------------------------------- kind

# build_image builds the static binary for the Docker engine's architecture
# and the image of Dockerfile around it.
build_image() {
  local image=$1 arch
  command -v docker >/dev/null || die "building the image needs Docker: docker is not on PATH"
  arch=$(docker version -f '{{.Server.Arch}}') || die "no Docker engine answers (docker version)"
  log "building $image for linux/$arch"
  (cd "$ROOT" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w" -o bin/linux/spreadguard-webhook ./cmd/webhook)
  (cd "$ROOT" && go run ./hack/static bin/linux/spreadguard-webhook) || die "the webhook binary is not static; its image has no loader"
  docker build -t "$image" "$ROOT"
}

kind_e2e() {
  local rc=0
  # Globals: the EXIT trap runs after this function has returned.
  kind=${KIND:-$BIN/kind} name=${KIND_CLUSTER:-spreadguard-e2e}
  command -v docker >/dev/null || die "kind needs Docker: docker is not on PATH"
  docker info >/dev/null 2>&1 || die "kind needs a running Docker engine: docker info failed"
  [[ -x $kind ]] || die "no kind at $kind: make e2e-kind installs it (go install sigs.k8s.io/kind)"
  for b in kubectl helm; do [[ -x $BIN/$b ]] || die "missing $BIN/$b: hack/build-binaries.sh $b"; done
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/spreadguard-e2e-kind.XXXXXX")
  rm -rf "$ARTIFACTS" && mkdir -p "$ARTIFACTS"
  export KUBECONFIG=$tmp/kubeconfig
  k() { "$BIN/kubectl" "$@"; }

  kind_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # Tolerant: the cleanup must end with the suite's own status, whatever
    # happens to the cluster it tears down.
    if [[ $rc -ne 0 ]]; then
      "$kind" export logs "$ARTIFACTS/kind" --name "$name" >/dev/null 2>&1 || true
      log "FAILED: logs in $ARTIFACTS"
    fi
    if [[ ${KIND_KEEP:-} == 1 ]]; then
      log "kept kind cluster $name (KUBECONFIG=$KUBECONFIG); delete it with: $kind delete cluster --name $name"
    else
      "$kind" delete cluster --name "$name" >/dev/null 2>&1 || true
      rm -rf "$tmp"
    fi
    exit "$rc"
  }
  trap kind_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  log "creating kind cluster $name"
  "$kind" create cluster --name "$name" --config "$ROOT/hack/kind-config.yaml" \
    ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --kubeconfig "$KUBECONFIG" --wait 3m

  local image=spreadguard-webhook:e2e
  build_image "$image"
  "$kind" load docker-image "$image" --name "$name"

  log "installing cert-manager $CERT_MANAGER_VERSION"
  k apply -f "https://github.com/cert-manager/cert-manager/releases/download/$CERT_MANAGER_VERSION/cert-manager.yaml" >/dev/null
  k -n cert-manager wait --for=condition=Available deployment --all --timeout=5m
  # Available is not yet serving: cert-manager's own webhook needs its CA
  # injected before it admits an Issuer.
  issuer_admitted() {
    k apply --dry-run=server -f - >/dev/null 2>&1 <<'EOF'
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: probe, namespace: default}
spec: {selfSigned: {}}
EOF
  }
  wait_until 180 issuer_admitted || die "cert-manager's webhook does not answer 3 minutes after its install"

  log "installing the chart (cert-manager mode, image $image)"
  "$BIN/helm" install "$RELEASE" "$ROOT/charts/spreadguard" --namespace "$RELEASE_NAMESPACE" --create-namespace \
    --set certManager.enabled=true \
    --set image.repository="${image%%:*}" --set image.tag="${image##*:}" --set image.pullPolicy=Never \
    --wait --timeout 5m

  local deploy
  deploy=$(k -n "$RELEASE_NAMESPACE" get deployment -l "app.kubernetes.io/instance=$RELEASE" -o name | head -1)
  [[ -n $deploy ]] || die "the chart made no Deployment in $RELEASE_NAMESPACE"
  local replicas
  replicas=$(k -n "$RELEASE_NAMESPACE" get "$deploy" -o jsonpath='{.spec.replicas}')
  local kc="$BIN/kubectl --kubeconfig $KUBECONFIG -n $RELEASE_NAMESPACE"
  export SPREADGUARD_E2E_STOP_CMD="$kc scale $deploy --replicas=0 && $kc wait --for=delete pod -l app.kubernetes.io/instance=$RELEASE --timeout=2m"
  export SPREADGUARD_E2E_START_CMD="$kc scale $deploy --replicas=$replicas && $kc rollout status $deploy --timeout=2m"
  export SPREADGUARD_E2E_ARTIFACTS=$ARTIFACTS
  # The suite's cert-manager scenarios (certmanager_test.go) run in this mode.
  export SPREADGUARD_E2E_CERT_MODE=cert-manager
  (cd "$ROOT" && go build -o "$BIN/kubectl-spread" ./cmd/kubectl-spread)
  export SPREADGUARD_E2E_KUBECTL_SPREAD=$BIN/kubectl-spread

  go_test || rc=$?
  return "$rc"
}

case ${1:-local} in
  local) local_e2e ;;
  kind) kind_e2e ;;
  image) build_image "${2:-spreadguard-webhook:dev}" ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown mode \"$1\" (want local or kind)" ;;
esac
