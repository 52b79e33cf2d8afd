#!/usr/bin/env bash
# build-binaries.sh builds the Kubernetes control plane, etcd, kwok, helm,
# Karpenter's kwok provider and the descheduler from source through the Go
# module proxy into ./bin, once per version.
#
#   hack/build-binaries.sh [NAME...]
#
# NAME is any of: etcd kube-apiserver kube-scheduler kube-controller-manager
# kubectl kwok helm karpenter karpenter-aws-crds descheduler promtool (default:
# all), kubelet kubeadm kube-proxy for the kind node image
# (hack/kind-without-registry), and cert-manager (its controller, cainjector
# and webhook, for the kind e2e's cert-manager mode). karpenter is Karpenter's
# kwok cloud provider, bin/karpenter-kwok, with its CRDs copied from the same
# module into bin/karpenter-crds. karpenter-aws-crds copies the EC2NodeClass
# CRD of Karpenter's AWS provider into bin/karpenter-aws-crds (nothing is
# built). descheduler is sigs.k8s.io/descheduler's command, which the e2e
# suite runs once per rebalancing step. promtool is Prometheus's, for
# `promtool test rules` on the chart's alerts, at the version of
# github.com/prometheus/prometheus that test/chart requires
# (PROMETHEUS_VERSION overrides it). At the versions the test modules
# require, a binary is one of their tools and is built in that module, on
# the dependency versions the tests compile, sharing their compiled packages:
# helm and promtool in test/chart; etcd and the control plane (not kubelet,
# kubeadm, kube-proxy) in test/parity; kwok and the descheduler in test/e2e.
# At another version it is built on its own pins, from a throwaway module or
# with go install. A binary whose version stamp exists in
# bin/.stamps is not rebuilt, so a second run is a no-op.
#
# Why from source: no prebuilt binary can be downloaded on the machines this
# project is built and tested on; only the Go module proxy is reachable.
#
# Each step's output goes to bin/.build/logs/; a step that fails stops the
# build and shows the end of its log.
set -euo pipefail

# Every binary is built static, with no C library: most of them go into
# images (kind's node and control-plane images, cert-manager's) that hold
# no dynamic loader, and one built with cgo on a machine with a C compiler
# starts on the host but fails in those images with "no such file or
# directory". The Makefile exports the same for go test, so the tools built
# in the test modules share the tests' compiled packages.
export CGO_ENABLED=0
# BINARY_RECIPE names the way the binaries are built; it is part of every
# stamp, so a bin/ built another way (with cgo, before the line above) is
# rebuilt rather than trusted. Change it, here and in the Makefile, whenever
# a build flag changes what a binary is.
BINARY_RECIPE=${BINARY_RECIPE:-static}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"
BIN=${BIN:-$ROOT/bin}
KUBE_VERSION=${KUBE_VERSION:-v1.37.1}
# The staging modules of k8s.io/kubernetes are published as v0.<minor>.<patch>.
STAGING_VERSION=${STAGING_VERSION:-v0.${KUBE_VERSION#v1.}}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
KARPENTER_VERSION=${KARPENTER_VERSION:-v1.15.0}
# Karpenter's go.mod asks for a newer Go than the project's; the go command
# fetches this toolchain through the module proxy for that build alone.
KARPENTER_GOTOOLCHAIN=${KARPENTER_GOTOOLCHAIN:-go1.27.3}
# Karpenter's AWS provider, whose EC2NodeClass CRD the integration tests
# install; its go.mod asks for the same newer Go, even to download it.
KARPENTER_AWS_VERSION=${KARPENTER_AWS_VERSION:-v1.15.1}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
DESCHEDULER_VERSION=${DESCHEDULER_VERSION:-v0.36.0}
# requires DIR MODULE prints the version of MODULE that DIR/go.mod requires,
# empty if none.
requires() { awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$ROOT/$1/go.mod"; }
# tool_of DIR PKG MODULE VERSION succeeds when DIR/go.mod lists PKG as a tool
# and requires MODULE at VERSION: the tool is then built in that module. The
# go command reads the tool directives, in whichever form they are written.
tool_of() {
  # grep reads all of it: under pipefail, -q could end go list with SIGPIPE.
  (cd "$ROOT/$1" && go list tool) | grep -xF "$2" >/dev/null && [[ $(requires "$1" "$3") == "$4" ]]
}
# One version of Prometheus's module for the chart tests and their promtool.
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-$(requires test/chart github.com/prometheus/prometheus)}

STAMPS=$BIN/.stamps
WORK=$BIN/.build
LOGS=$WORK/logs
mkdir -p "$STAMPS" "$WORK" "$LOGS"

# stamp NAME VERSION is the file that says NAME was built at VERSION with
# this BINARY_RECIPE; the Makefile's prerequisites name the same files.
stamp() { echo "$STAMPS/$1-$2.$BINARY_RECIPE"; }

done_already() { [[ -x $BIN/$1 && -f $(stamp "$1" "$2") ]]; }

mark() {
  rm -f "$STAMPS/$1"-*
  touch "$(stamp "$1" "$2")"
}

# module_file FIELD MODULE@VERSION downloads the module into the Go module
# cache and prints FIELD of what go mod download -json says of it: Dir (its
# source) or GoMod (its go.mod).
module_file() {
  go mod download -json "$2" | sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\$/\1/p"
}

# k8s_module prepares a throwaway module that requires k8s.io/kubernetes and
# replaces every staging module by its published version, as the main
# repository's go.mod replaces them by ./staging paths that a module download
# does not carry. The sample-* modules are not published and not needed.
# It is not run in a command substitution, where bash would ignore set -e.
K8S_MODULE=$WORK/kubernetes-$KUBE_VERSION
k8s_module() {
  local dir=$K8S_MODULE
  if [[ ! -f $dir/.ready ]]; then
    rm -rf "$dir" && mkdir -p "$dir"
    (
      cd "$dir"
      run_logged "$LOGS/kubernetes-mod-init.log" "go mod init" go mod init spreadguard.local/build/kubernetes
      local modfile
      modfile=$(module_file GoMod "k8s.io/kubernetes@$KUBE_VERSION")
      local staging
      staging=$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&/=> \.\/staging/{print $1}' "$modfile" | grep -v '/sample-')
      local args=()
      for m in $staging; do args+=("-replace=$m=$m@$STAGING_VERSION"); done
      # STAGING_PINS ("module@version ...") overrides staging modules whose
      # version the module proxy does not serve for this patch release.
      for pin in ${STAGING_PINS:-}; do args+=("-replace=${pin%@*}=$pin"); done
      go mod edit "${args[@]}"
      printf 'package build\n' >doc.go
      run_logged "$LOGS/kubernetes-get.log" "go get k8s.io/kubernetes@$KUBE_VERSION" go get "k8s.io/kubernetes@$KUBE_VERSION"
    )
    touch "$dir/.ready"
  fi
}

# k8s_ldflags stamps the version a release build carries.
k8s_ldflags() {
  local minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  echo "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 \
-X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

# build_k8s builds a command of k8s.io/kubernetes. At the version test/parity
# requires (the one the tests run against), it is a tool of that module: the
# Kubernetes sources of KUBE_VERSION on the dependency versions every test
# module compiles, which are Kubernetes' own pins or patch and minor releases
# above them (golang.org/x/net, otel, gRPC, Prometheus's client; see
# docs/kubernetes-versions.md). A cold machine then compiles the client and
# API server libraries once for the tests and the control plane, not twice.
# At another version, or with KUBE_OWN_PINS=1, it is built from a throwaway
# module on Kubernetes' own pins.
build_k8s() {
  local name=$1 pkg=$2
  done_already "$name" "$KUBE_VERSION" && { log "$name $KUBE_VERSION already built"; return; }
  if [[ -z ${KUBE_OWN_PINS:-} ]] && tool_of test/parity "$pkg" k8s.io/kubernetes "$KUBE_VERSION"; then
    build_tool test/parity "$name" "$pkg" "$KUBE_VERSION" "$(k8s_ldflags)"
    return
  fi
  local dir=$K8S_MODULE
  k8s_module
  log "building $name $KUBE_VERSION on Kubernetes' own pins (several minutes when cold)"
  (
    cd "$dir"
    run_logged "$LOGS/$name-get.log" "go get $pkg@$KUBE_VERSION" go get "$pkg@$KUBE_VERSION"
    run_logged "$LOGS/$name-build.log" "go build $pkg" go build -trimpath -o "$BIN/$name" \
      -ldflags "-s -w $(k8s_ldflags)" "$pkg"
  )
  mark "$name" "$KUBE_VERSION"
}

# build_etcd builds etcd's server. At the version test/parity requires it is
# that module's tool, next to the API server, whose etcd client, gRPC and
# OpenTelemetry packages it shares; otherwise it is built from a throwaway
# module on etcd's own pins.
build_etcd() {
  done_already etcd "$ETCD_VERSION" && { log "etcd $ETCD_VERSION already built"; return; }
  if tool_of test/parity go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 "$ETCD_VERSION"; then
    build_tool test/parity etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" ""
    return
  fi
  local dir=$WORK/etcd-$ETCD_VERSION
  log "building etcd $ETCD_VERSION"
  rm -rf "$dir" && mkdir -p "$dir"
  (
    cd "$dir"
    run_logged "$LOGS/etcd-mod-init.log" "go mod init" go mod init spreadguard.local/build/etcd
    cat >main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    run_logged "$LOGS/etcd-get.log" "go get go.etcd.io/etcd/server/v3@$ETCD_VERSION" go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    run_logged "$LOGS/etcd-tidy.log" "go mod tidy" go mod tidy
    run_logged "$LOGS/etcd-build.log" "go build etcd" go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" .
  )
  mark etcd "$ETCD_VERSION"
}

# go_install builds a module whose go.mod has no replace directives.
go_install() {
  local name=$1 pkg=$2 version=$3 ldflags=${4:-}
  done_already "$name" "$version" && { log "$name $version already built"; return; }
  log "building $name $version"
  run_logged "$LOGS/$name-install.log" "go install $pkg@$version" \
    env GOBIN="$BIN" go install -trimpath -ldflags "-s -w $ldflags" "$pkg@$version"
  mark "$name" "$version"
}

# helm_ldflags stamps the version a release build carries, and the
# Kubernetes version `helm template` assumes without a cluster (v1.20
# otherwise, which makes charts that check .Capabilities fail offline).
helm_ldflags() {
  local mod="helm.sh/helm/v${HELM_VERSION:1:1}" minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  printf -- '-X %s/internal/version.version=%s' "$mod" "$HELM_VERSION"
  # Helm 4 takes the assumed version from the client libraries instead.
  [[ ${HELM_VERSION:1:1} == 3 ]] &&
    printf -- ' -X %s/pkg/chartutil.k8sVersionMajor=1 -X %s/pkg/chartutil.k8sVersionMinor=%s' "$mod" "$mod" "$minor"
  echo
}

# build_tool builds a tool of one of the test modules (helm and promtool of
# test/chart, the control plane of test/parity) there, with go build's
# default flags, the ones go test uses: the packages it shares with that
# module's tests and the others' (client-go, the API server's libraries,
# most of helm's and Prometheus's) are then compiled once on a cold machine,
# not once per flag set and set of versions.
build_tool() {
  local dir=$1 name=$2 pkg=$3 version=$4 ldflags=$5
  shift 5
  log "building $name $version in $dir's module"
  (
    cd "$ROOT/$dir"
    run_logged "$LOGS/$name-build.log" "go build $pkg" go build "$@" -ldflags "-s -w $ldflags" -o "$BIN/$name" "$pkg"
  )
  mark "$name" "$version"
}

# build_helm builds helm in test/chart's module at the version the chart
# tests render with, or with go install at any other HELM_VERSION.
build_helm() {
  local mod="helm.sh/helm/v${HELM_VERSION:1:1}"
  done_already helm "$HELM_VERSION" && { log "helm $HELM_VERSION already built"; return; }
  if tool_of test/chart "$mod/cmd/helm" "$mod" "$HELM_VERSION"; then
    build_tool test/chart helm "$mod/cmd/helm" "$HELM_VERSION" "$(helm_ldflags)"
  else
    go_install helm "$mod/cmd/helm" "$HELM_VERSION" "$(helm_ldflags)"
  fi
}

# build_promtool builds Prometheus's promtool. The tests only run `promtool
# test rules`, which discovers no targets: the remove_all_sd tag (Prometheus
# 3.10 and later) leaves out the cloud providers' service discovery and
# their SDKs, most of what a cold build compiled. At the version test/chart
# requires it is that module's tool; at another, its module's go.mod has a
# replace directive, which `go install pkg@version` refuses, so it is built
# from a throwaway module that requires it, as etcd is.
build_promtool() {
  local v=$PROMETHEUS_VERSION pkg=github.com/prometheus/prometheus/cmd/promtool
  [[ -n $v ]] || die "no github.com/prometheus/prometheus requirement in test/chart/go.mod; set PROMETHEUS_VERSION"
  done_already promtool "$v" && { log "promtool $v already built"; return; }
  if tool_of test/chart "$pkg" github.com/prometheus/prometheus "$v"; then
    build_tool test/chart promtool "$pkg" "$v" "" -tags remove_all_sd
    return
  fi
  local dir=$WORK/promtool-$v
  log "building promtool $v (a few minutes when cold)"
  rm -rf "$dir" && mkdir -p "$dir"
  (
    cd "$dir"
    run_logged "$LOGS/promtool-mod-init.log" "go mod init" go mod init spreadguard.local/build/promtool
    printf 'package build\n' >doc.go
    run_logged "$LOGS/promtool-get.log" "go get $pkg@$v" go get "$pkg@$v"
    run_logged "$LOGS/promtool-build.log" "go build promtool" go build -trimpath -tags remove_all_sd \
      -ldflags "-s -w" -o "$BIN/promtool" "$pkg"
  )
  mark promtool "$v"
}

# build_karpenter builds the main package of sigs.k8s.io/karpenter/kwok, the
# kwok cloud provider, which launches fake nodes for NodePools: installed
# under a name of its own, as `go install` would call it kwok. Its CRDs are
# the ones of its kwok chart (the NodePool and NodeClaim of pkg/apis/crds with
# the kwok label domain restricted) and its KWOKNodeClass.
build_karpenter() {
  local crds=$BIN/karpenter-crds
  if done_already karpenter-kwok "$KARPENTER_VERSION" && [[ -f $crds/karpenter.sh_nodepools.yaml ]]; then
    log "karpenter-kwok $KARPENTER_VERSION already built"
    return
  fi
  local gobin=$WORK/karpenter-$KARPENTER_VERSION mod
  log "building karpenter-kwok $KARPENTER_VERSION with $KARPENTER_GOTOOLCHAIN (a few minutes when cold)"
  rm -rf "$gobin" && mkdir -p "$gobin"
  run_logged "$LOGS/karpenter-install.log" "go install sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION" \
    env GOTOOLCHAIN="$KARPENTER_GOTOOLCHAIN" GOBIN="$gobin" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$KARPENTER_VERSION" \
    "sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION"
  mv -f "$gobin/kwok" "$BIN/karpenter-kwok"
  mod=$(cd "$gobin" && GOTOOLCHAIN="$KARPENTER_GOTOOLCHAIN" module_file Dir "sigs.k8s.io/karpenter@$KARPENTER_VERSION")
  [[ -n $mod && -d $mod/kwok/charts/crds ]] || die "cannot find the CRDs of sigs.k8s.io/karpenter@$KARPENTER_VERSION in the Go module cache"
  rm -rf "$crds" && mkdir -p "$crds"
  cp "$mod"/kwok/charts/crds/*.yaml "$mod"/kwok/apis/crds/*.yaml "$crds"/
  chmod u+w "$crds"/*.yaml
  rm -rf "$gobin"
  mark karpenter-kwok "$KARPENTER_VERSION"
}

# copy_karpenter_aws_crds copies the EC2NodeClass CRD of
# github.com/aws/karpenter-provider-aws from the Go module cache into
# bin/karpenter-aws-crds, stamped like a binary.
copy_karpenter_aws_crds() {
  local crds=$BIN/karpenter-aws-crds name=karpenter.k8s.aws_ec2nodeclasses.yaml mod dir
  if [[ -f $(stamp karpenter-aws-crds "$KARPENTER_AWS_VERSION") && -f $crds/$name ]]; then
    log "karpenter-aws-crds $KARPENTER_AWS_VERSION already copied"
    return
  fi
  log "copying the EC2NodeClass CRD of karpenter-provider-aws $KARPENTER_AWS_VERSION"
  dir=$(mktemp -d "$WORK/karpenter-aws.XXXXXX")
  mod=$(cd "$dir" && GOTOOLCHAIN="$KARPENTER_GOTOOLCHAIN" module_file Dir "github.com/aws/karpenter-provider-aws@$KARPENTER_AWS_VERSION")
  rm -rf "$dir"
  [[ -n $mod && -f $mod/pkg/apis/crds/$name ]] || die "cannot find $name of github.com/aws/karpenter-provider-aws@$KARPENTER_AWS_VERSION in the Go module cache"
  rm -rf "$crds" && mkdir -p "$crds"
  cp "$mod/pkg/apis/crds/$name" "$crds/"
  chmod u+w "$crds/$name"
  mark karpenter-aws-crds "$KARPENTER_AWS_VERSION"
}

# build_cert_manager builds cert-manager's controller, cainjector and webhook
# with the mains in hack/kind-without-registry/cert-manager. cert-manager's own cmd/* modules and
# Venafi's client are not served by the module proxy, and the mains import
# internal/ packages, which Go allows only inside the module: so they are
# copied into a copy of github.com/cert-manager/cert-manager and built with
# its go.mod, away from the project's. The stamp carries a hash of the mains,
# so editing them rebuilds.
build_cert_manager() {
  local v=$CERT_MANAGER_VERSION src=$ROOT/hack/kind-without-registry/cert-manager
  local tag="$v-$(cat "$src"/*/main.go | sha256sum | cut -c1-12)" name
  if done_already cert-manager-controller "$tag" && done_already cert-manager-cainjector "$tag" &&
    done_already cert-manager-webhook "$tag"; then
    log "cert-manager $v already built"
    return
  fi
  local dir=$WORK/cert-manager-$v
  if [[ ! -f $dir/.ready ]]; then
    local moddir
    moddir=$(module_file Dir "github.com/cert-manager/cert-manager@$v")
    rm -rf "$dir" && cp -r "$moddir" "$dir" && chmod -R u+w "$dir"
    touch "$dir/.ready"
  fi
  log "building cert-manager $v (about 10 minutes when cold)"
  for name in controller cainjector webhook; do
    mkdir -p "$dir/spreadguard/$name"
    cp "$src/$name/main.go" "$dir/spreadguard/$name/main.go"
    (
      cd "$dir"
      run_logged "$LOGS/cert-manager-$name-build.log" "go build cert-manager $name" \
        go build -trimpath -o "$BIN/cert-manager-$name" \
        -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$v" "./spreadguard/$name"
    )
    mark "cert-manager-$name" "$tag"
  done
}

# build_kwok_descheduler builds kwok and sigs.k8s.io/descheduler's command.
# At the versions test/e2e requires they are that module's tools, built as
# the control plane is, on the tests' dependency versions (client-go and the
# rest of the Kubernetes libraries at v0.37.1, where the descheduler pins
# v0.36.1; test/e2e's go.mod carries the descheduler's replace of
# k8s.io/kube-openapi, at the project's version). Otherwise they are built
# in one go build, from a throwaway module that requires both and carries
# the descheduler's replace directives, which `go install module@version`
# refuses; built apart, one low-level module at another patch version made
# the second build recompile the client libraries. When either stamp is
# missing, both are built and stamped.
build_kwok_descheduler() {
  if done_already kwok "$KWOK_VERSION" && done_already descheduler "$DESCHEDULER_VERSION"; then
    log "kwok $KWOK_VERSION and descheduler $DESCHEDULER_VERSION already built"
    return
  fi
  local ldflags="-X sigs.k8s.io/descheduler/pkg/version.version=$DESCHEDULER_VERSION"
  if tool_of test/e2e sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok "$KWOK_VERSION" &&
    tool_of test/e2e sigs.k8s.io/descheduler/cmd/descheduler sigs.k8s.io/descheduler "$DESCHEDULER_VERSION"; then
    build_tool test/e2e kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" ""
    build_tool test/e2e descheduler sigs.k8s.io/descheduler/cmd/descheduler "$DESCHEDULER_VERSION" "$ldflags"
    return
  fi
  local dir=$WORK/kwok-$KWOK_VERSION-descheduler-$DESCHEDULER_VERSION
  log "building kwok $KWOK_VERSION and descheduler $DESCHEDULER_VERSION (a few minutes when cold)"
  rm -rf "$dir" && mkdir -p "$dir"
  (
    cd "$dir"
    run_logged "$LOGS/kwok-descheduler-mod-init.log" "go mod init" go mod init spreadguard.local/build/kwok-descheduler
    printf 'package build\n' >doc.go
    local modfile args=()
    modfile=$(module_file GoMod "sigs.k8s.io/descheduler@$DESCHEDULER_VERSION")
    [[ -n $modfile ]] || die "cannot find the go.mod of sigs.k8s.io/descheduler@$DESCHEDULER_VERSION in the Go module cache"
    # Single-line `replace old => new version` directives, as the
    # descheduler writes them.
    while read -r old new version; do
      args+=("-replace=$old=$new@$version")
    done < <(awk '$1 == "replace" && $3 == "=>" && NF == 5 { print $2, $4, $5 }' "$modfile")
    ((${#args[@]} == 0)) || go mod edit "${args[@]}"
    run_logged "$LOGS/kwok-descheduler-get.log" "go get kwok@$KWOK_VERSION descheduler@$DESCHEDULER_VERSION" \
      go get "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/descheduler/cmd/descheduler@$DESCHEDULER_VERSION"
    run_logged "$LOGS/kwok-descheduler-build.log" "go build kwok descheduler" go build -trimpath -o "$dir/" \
      -ldflags "-s -w $ldflags" \
      sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/descheduler/cmd/descheduler
  )
  mv -f "$dir/kwok" "$BIN/kwok"
  mv -f "$dir/descheduler" "$BIN/descheduler"
  mark kwok "$KWOK_VERSION"
  mark descheduler "$DESCHEDULER_VERSION"
}

build_one() {
  case $1 in
    etcd) build_etcd ;;
    kube-apiserver|kube-scheduler|kube-controller-manager|kubectl|kubelet|kubeadm|kube-proxy)
      build_k8s "$1" "k8s.io/kubernetes/cmd/$1" ;;
    kwok|descheduler) build_kwok_descheduler ;;
    cert-manager) build_cert_manager ;;
    helm) build_helm ;;
    karpenter|karpenter-kwok) build_karpenter ;;
    karpenter-aws-crds) copy_karpenter_aws_crds ;;
    promtool) build_promtool ;;
    *) echo "build-binaries: unknown binary \"$1\" (want etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kubelet, kubeadm, kube-proxy, kwok, helm, karpenter, karpenter-aws-crds, descheduler, promtool or cert-manager)" >&2; exit 2 ;;
  esac
}

main() {
  if [[ $# -eq 0 ]]; then
    set -- etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kwok helm karpenter karpenter-aws-crds descheduler promtool
  fi
  # One build at a time: concurrent runs (make -j) would share bin/.build.
  exec 9>"$WORK/.lock"
  flock 9
  for name in "$@"; do build_one "$name"; done
}

# Everything above only defines functions, so editing this file while it
# runs cannot change a build half-way.
main "$@"
exit
