#!/usr/bin/env bash
# build-node-image.sh builds a kind node image for Kubernetes $KUBE_VERSION
# on a machine that reaches only the Go module proxy and Debian's archive:
# no image is pulled, every one is built here.
#
#   hack/kind-without-registry/build-node-image.sh [STEP...]
#
# STEP is any of (default: all, in this order; each is skipped when its
# inputs did not change since it last ran):
#   binaries  kubelet, kubeadm and kube-proxy from k8s.io/kubernetes (the
#             other control-plane binaries come from hack/build-binaries.sh),
#             CoreDNS from github.com/coredns/coredns, pause from pause.c
#   rootfs    a Debian bookworm rootfs (debootstrap) with systemd,
#             containerd, runc, the CNI plugins and iptables, imported as
#             $KIND_BASE_IMAGE
#   images    the images `kubeadm config images list` names, under those
#             names: FROM scratch + a static binary (kube-proxy: FROM the
#             Debian base, it needs iptables), saved to bin/.kind/images.tar
#   node      $KIND_NODE_IMAGE: hack/kind-without-registry/node-image/Dockerfile on the base,
#             then the images imported into its containerd and committed, as
#             `kind build node-image` does
#
# It prints nothing but progress; the image name is $KIND_NODE_IMAGE
# (spreadguard.local/kind-node:$KUBE_VERSION). Needs a Docker engine
# (hack/kind-without-registry/ensure-docker.sh start), root (debootstrap) and gcc.
# Builds run one at a time: the machines have few cores.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../lib/common.sh
source "$ROOT/hack/lib/common.sh"
HERE=$ROOT/hack/kind-without-registry
BIN=${BIN:-$ROOT/bin}
KUBE_VERSION=${KUBE_VERSION:-v1.37.1}
KIND_VERSION=${KIND_VERSION:-v0.33.0}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
STATE=${KIND_STATE:-$BIN/.kind}
KIND_BASE_IMAGE=${KIND_BASE_IMAGE:-spreadguard.local/kind-base:$DEBIAN_SUITE}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-spreadguard.local/kind-node:$KUBE_VERSION}
# The Debian packages of the node, after kind's images/base/Dockerfile.
NODE_PACKAGES=systemd,systemd-sysv,dbus,iproute2,iptables,nftables,ca-certificates,containerd,runc,containernetworking-plugins,conntrack,ethtool,util-linux,mount,kmod,libseccomp2,procps,jq,socat,e2fsprogs

STAMPS=$STATE/stamps
WORK=$STATE/work
mkdir -p "$STAMPS" "$WORK"

# fresh NAME KEY: whether step NAME last ran with inputs KEY.
fresh() { [[ -f $STAMPS/$1 && $(cat "$STAMPS/$1") == "$2" ]]; }
stamp() { echo "$2" >"$STAMPS/$1"; }
sum() { cat "$@" | sha256sum | cut -c1-16; }
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

module_dir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'; }

# ---------------------------------------------------------------- binaries

# coredns_version is the CoreDNS tag kubeadm deploys.
coredns_version() { image_for coredns | sed 's/.*://'; }

# build_coredns builds CoreDNS with only the plugins of kubeadm's Corefile
# (errors health ready kubernetes prometheus forward cache loop reload
# loadbalance, plus log), which keeps the cloud providers' SDKs out.
build_coredns() {
  local version=$1 dir=$WORK/coredns-$1
  [[ -x $BIN/coredns && -f $BIN/.stamps/coredns-$version ]] && return
  log "building coredns $version"
  rm -rf "$dir" && mkdir -p "$dir"
  (
    cd "$dir"
    run_logged "$STATE/logs/coredns-mod-init.log" "go mod init" go mod init spreadguard.local/build/coredns
    cat >main.go <<'GO'
// Command coredns is CoreDNS with the plugins of kubeadm's Corefile.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order of plugin.cfg, which decides the order a query passes them in.
func init() {
	dnsserver.Directives = []string{
		"reload", "ready", "health", "prometheus", "errors", "log",
		"loadbalance", "cache", "kubernetes", "loop", "forward",
	}
}

func main() { coremain.Run() }
GO
    run_logged "$STATE/logs/coredns-get.log" "go get github.com/coredns/coredns@$version" go get "github.com/coredns/coredns@$version"
    run_logged "$STATE/logs/coredns-tidy.log" "go mod tidy" go mod tidy
    run_logged "$STATE/logs/coredns-build.log" "go build coredns" env CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" .
  )
  rm -f "$BIN/.stamps/coredns"-*
  touch "$BIN/.stamps/coredns-$version"
}

# build_pause compiles pause.c of k8s.io/kubernetes statically.
build_pause() {
  local src
  src=$(module_dir "k8s.io/kubernetes@$KUBE_VERSION")/build/pause/linux/pause.c
  [[ -x $BIN/pause && -f $BIN/.stamps/pause-$KUBE_VERSION ]] && return
  log "compiling pause from $src"
  gcc -Os -Wall -Werror -static -DVERSION="v$(image_for pause | sed 's/.*://')" -o "$BIN/pause" "$src"
  strip "$BIN/pause"
  rm -f "$BIN/.stamps/pause"-*
  touch "$BIN/.stamps/pause-$KUBE_VERSION"
}

step_binaries() {
  "$ROOT/hack/build-binaries.sh" etcd kube-apiserver kube-controller-manager kube-scheduler kubectl
  local name
  "$ROOT/hack/build-binaries.sh" kubeadm kubelet kube-proxy
  build_pause
  build_coredns "$(coredns_version)"
}

# image_for NAME: the image kubeadm asks for whose repository ends in NAME.
image_for() {
  [[ -x $BIN/kubeadm ]] || "$ROOT/hack/build-binaries.sh" kubeadm
  local list
  list=$("$BIN/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" 2>/dev/null)
  grep -E "/$1:" <<<"$list" || die "kubeadm config images list names no $1 image: $list"
}

# ---------------------------------------------------------------- rootfs

step_rootfs() {
  local key tar=$STATE/rootfs-$DEBIAN_SUITE.tar
  key=$(printf '%s\n' "$DEBIAN_SUITE" "$NODE_PACKAGES" | sum)
  if fresh rootfs "$key" && [[ -f $tar ]] && image_exists "$KIND_BASE_IMAGE"; then return; fi
  command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
  }
  if ! fresh rootfs "$key" || [[ ! -f $tar ]]; then
    local dir=$WORK/rootfs
    rm -rf "$dir"
    log "debootstrap $DEBIAN_SUITE (minutes: a minute idle, up to 20 under load)"
    run_logged "$STATE/debootstrap.log" debootstrap \
      debootstrap --variant=minbase --include="$NODE_PACKAGES" "$DEBIAN_SUITE" "$dir" "$DEBIAN_MIRROR"
    # What an image needs not carry: apt's caches and the package lists.
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc \
      "$dir"/usr/share/man "$dir"/usr/share/locale
    tar -C "$dir" --numeric-owner -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  log "importing the rootfs as $KIND_BASE_IMAGE"
  docker import "$tar" "$KIND_BASE_IMAGE" >/dev/null
  stamp rootfs "$key"
}

# ---------------------------------------------------------------- images

# build_image TAG DOCKERFILE FILE... builds TAG from DOCKERFILE with only
# FILEs in its context.
build_image() {
  local tag=$1 dockerfile=$2 ctx
  shift 2
  ctx=$(mktemp -d "$WORK/ctx.XXXXXX")
  cp "$@" "$ctx/"
  cp "$dockerfile" "$ctx/Dockerfile"
  log "building $tag"
  DOCKER_BUILDKIT=0 docker build -q -t "$tag" --build-arg "NAME=$(basename "$1")" \
    --build-arg "BASE=$KIND_BASE_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# check_static fails, naming it, when a binary the node or its images hold
# is dynamically linked: none of them has a loader (hack/static).
check_static() {
  (cd "$ROOT" && go run ./hack/static "$@") || die "the binaries above would not start in the node image; rebuild them (hack/build-binaries.sh rebuilds a bin/ of another recipe)"
}

step_images() {
  local key tar=$STATE/images.tar
  check_static "$BIN"/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd,pause,coredns,kubelet,kubeadm}
  key=$(sum "$BIN"/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd,pause,coredns} \
    "$HERE"/images/*/Dockerfile "$HERE/node-image/files/etc/containerd/config.toml" "$STAMPS/rootfs")
  if fresh images "$key" && [[ -f $tar ]]; then return; fi
  local tags=() name tag
  for name in kube-apiserver kube-controller-manager kube-scheduler etcd; do
    tag=$(image_for "$name")
    build_image "$tag" "$HERE/images/static/Dockerfile" "$BIN/$name"
    tags+=("$tag")
  done
  tag=$(image_for kube-proxy); build_image "$tag" "$HERE/images/kube-proxy/Dockerfile" "$BIN/kube-proxy"; tags+=("$tag")
  tag=$(image_for pause); build_image "$tag" "$HERE/images/pause/Dockerfile" "$BIN/pause"; tags+=("$tag")
  # containerd's sandbox image, as in stock kind, may be another tag of
  # pause (kind v0.33.0 keeps pause:3.10); the node carries both.
  local sandbox
  sandbox=$(sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' "$HERE/node-image/files/etc/containerd/config.toml")
  if [[ -n $sandbox && $sandbox != "$tag" ]]; then docker tag "$tag" "$sandbox"; tags+=("$sandbox"); fi
  tag=$(image_for coredns); build_image "$tag" "$HERE/images/coredns/Dockerfile" "$BIN/coredns"; tags+=("$tag")
  log "saving ${#tags[@]} images to $tar"
  docker save -o "$tar.tmp" "${tags[@]}" && mv "$tar.tmp" "$tar"
  stamp images "$key"
}

# ---------------------------------------------------------------- node

step_node() {
  local key kind_dir
  kind_dir=$(module_dir "sigs.k8s.io/kind@$KIND_VERSION")
  [[ -d $kind_dir/images/base/files ]] || die "no images/base/files in sigs.k8s.io/kind@$KIND_VERSION"
  key=$( (cd "$HERE/node-image" && find . -type f | sort | xargs cat; echo "$KIND_VERSION") | sum)
  key=$key-$(sum "$BIN"/{kubelet,kubeadm,kubectl} "$STAMPS/rootfs" "$STAMPS/images")
  if fresh node "$key" && image_exists "$KIND_NODE_IMAGE"; then return; fi

  local ctx stage=$KIND_NODE_IMAGE-stage
  ctx=$(mktemp -d "$WORK/ctx.XXXXXX")
  cp -r "$HERE/node-image/." "$ctx/"
  cp -r "$kind_dir/images/base/files" "$ctx/kind-files"
  chmod -R u+w "$ctx/kind-files"
  mv "$ctx/kind-files/usr/local/bin/entrypoint" "$ctx/kind-files/usr/local/bin/kind-entrypoint"
  mkdir -p "$ctx/bin" && cp "$BIN"/{kubelet,kubeadm,kubectl} "$ctx/bin/"
  log "building the node stage on $KIND_BASE_IMAGE"
  DOCKER_BUILDKIT=0 docker build -q -t "$stage" --build-arg "BASE=$KIND_BASE_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"

  # As `kind build node-image`: start containerd in a container of the
  # stage, import the images unpacked later (the node's /var is a volume,
  # where overlayfs works), and commit.
  local id
  id=$(docker run -d --entrypoint=sleep --security-opt seccomp=unconfined "$stage" infinity)
  # shellcheck disable=SC2064
  trap "docker rm -f -v $id >/dev/null 2>&1 || true" RETURN
  docker exec "$id" bash -c 'nohup containerd >/var/log/containerd-build.log 2>&1 &'
  docker exec "$id" bash -c 'for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; cat /var/log/containerd-build.log; exit 1' >&2
  log "importing the control-plane images into the node's containerd"
  docker exec -i "$id" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
    --all-platforms --no-unpack --digests - <"$STATE/images.tar" >/dev/null
  docker exec "$id" ctr --namespace=k8s.io images list -q >&2
  # PID 1 is sleep, which reaps no one: containerd stays a zombie once gone.
  docker exec "$id" bash -c 'pkill -x containerd
    for i in $(seq 1 100); do ps -C containerd -o stat= | grep -qv "^Z" || break; sleep 0.2; done
    rm -f /var/log/containerd-build.log'
  docker exec "$id" bash -c "echo -n $KUBE_VERSION >/kind/version"
  docker commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' \
    "$id" "$KIND_NODE_IMAGE" >/dev/null
  docker image rm "$stage" >/dev/null 2>&1 || true
  stamp node "$key"
  log "built $KIND_NODE_IMAGE"
}

# ---------------------------------------------------------------- main

command -v docker >/dev/null && docker info >/dev/null 2>&1 ||
  die "no Docker engine answers: hack/kind-without-registry/ensure-docker.sh start"
[[ $# -gt 0 ]] || set -- binaries rootfs images node
for step in "$@"; do
  case $step in
    binaries|rootfs|images|node)
      start=$SECONDS
      "step_$step"
      log "$step: $((SECONDS - start))s"
      ;;
    *) die "unknown step \"$step\" (want binaries, rootfs, images or node)" ;;
  esac
done
