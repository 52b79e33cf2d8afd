#!/usr/bin/env bash
# cert-manager.sh installs cert-manager in a kind cluster from source: its
# controller, cainjector and webhook built by `hack/build-binaries.sh
# cert-manager`, each in an image FROM scratch loaded with `kind load`, and
# cert-manager's own Helm chart from the module github.com/cert-manager/
# cert-manager (deploy/charts/cert-manager) with its image values pointing at
# them. The chart's startupapicheck Job is off (its cmctl is not served by the
# module proxy); instead this waits until cert-manager's webhook admits an
# Issuer.
#
#   hack/kind-without-registry/cert-manager.sh available   succeeds when the module proxy serves the module
#   hack/kind-without-registry/cert-manager.sh install     build, load and install (KIND, KIND_CLUSTER, KUBECONFIG)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../lib/common.sh
source "$ROOT/hack/lib/common.sh"
BIN=${BIN:-$ROOT/bin}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
CERT_MANAGER_NAMESPACE=${CERT_MANAGER_NAMESPACE:-cert-manager}
MODULE=github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION

available() { go mod download -json "$MODULE" >/dev/null 2>&1; }

install() {
  local kind=${KIND:?KIND names the kind binary} cluster=${KIND_CLUSTER:?} t=$SECONDS
  "$ROOT/hack/build-binaries.sh" cert-manager
  log "cert-manager binaries: $((SECONDS - t))s"
  # Their images are FROM scratch: no loader for a dynamically linked binary.
  (cd "$ROOT" && go run ./hack/static "$BIN"/cert-manager-{controller,cainjector,webhook}) ||
    die "a cert-manager binary above is not static"
  local ctx name
  ctx=$(mktemp -d)
  for name in controller cainjector webhook; do
    cp "$BIN/cert-manager-$name" "$ctx/"
    docker build -q -t "spreadguard.local/cert-manager-$name:$CERT_MANAGER_VERSION" --build-arg NAME="$name" \
      -f "$ROOT/hack/kind-without-registry/images/cert-manager/Dockerfile" "$ctx" >/dev/null
    "$kind" load docker-image "spreadguard.local/cert-manager-$name:$CERT_MANAGER_VERSION" --name "$cluster"
  done
  rm -rf "$ctx"
  log "cert-manager images: $((SECONDS - t))s"

  local chart
  chart=$(go mod download -json "$MODULE" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')/deploy/charts/cert-manager
  local sets=(--set crds.enabled=true --set startupapicheck.enabled=false)
  for name in controller cainjector webhook; do
    local key=$name.image
    [[ $name == controller ]] && key=image
    sets+=(--set "$key.repository=spreadguard.local/cert-manager-$name" --set "$key.tag=$CERT_MANAGER_VERSION"
      --set "$key.pullPolicy=Never")
  done
  "$BIN/helm" install cert-manager "$chart" --namespace "$CERT_MANAGER_NAMESPACE" --create-namespace \
    "${sets[@]}" --wait --timeout 5m >/dev/null
  wait_webhook
  log "cert-manager installed: $((SECONDS - t))s"
}

# wait_webhook waits until cert-manager's webhook admits an Issuer (a dry run
# on the server goes through the validating webhook), as startupapicheck does.
wait_webhook() {
  local deadline=$((SECONDS + 180))
  until printf '%s\n' 'apiVersion: cert-manager.io/v1' 'kind: Issuer' 'metadata: {name: probe, namespace: default}' 'spec: {selfSigned: {}}' |
    "$BIN/kubectl" apply --dry-run=server -f - >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "cert-manager's webhook does not answer 3 minutes after its install"
    sleep 2
  done
}

case ${1:-} in
  available) available ;;
  install) install ;;
  *) echo "usage: $0 available|install" >&2; exit 2 ;;
esac
