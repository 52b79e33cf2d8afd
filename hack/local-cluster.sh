#!/usr/bin/env bash
# local-cluster.sh runs a Kubernetes control plane as processes on 127.0.0.1,
# with kwok faking the nodes and the pods' lifecycle, until it is signalled.
#
#   hack/local-cluster.sh [run]   start, wait until ready, stay up until INT/TERM
#   hack/local-cluster.sh down    stop a cluster left behind by a killed run
#   hack/local-cluster.sh restart-apiserver   restart kube-apiserver of the running cluster
#
# What runs: etcd, kube-apiserver (service-account keys, RBAC), kube-scheduler,
# kube-controller-manager (deployment, replicaset, statefulset, node-lifecycle,
# disruption, which keeps the PodDisruptionBudgets that evictions honour, and
# the controllers those need) and the kwok controller with kwok's default
# stages, managing nodes annotated kwok.x-k8s.io/node=fake: NODES_PER_ZONE
# nodes in each of the zones zone-a, zone-b and zone-c. Pods scheduled to them
# become Running; nothing is actually run.
#
# With LOCAL_CLUSTER_KARPENTER=1 it also runs Karpenter's kwok cloud provider
# (bin/karpenter-kwok, hack/build-binaries.sh karpenter) once the nodes are
# Ready: its CRDs from bin/karpenter-crds are applied first, then it starts
# out of cluster with the admin's rights, no leader election and no webhook
# (v1.15 has none), and a KWOKNodeClass "default" is created for NodePools to
# name. It launches no node until a NodePool exists, and only for pending
# pods that fit one; the nodes it creates carry the annotation
# kwok.x-k8s.io/node=fake, so the kwok controller above makes them Ready like
# the others. Its instance types ($DIR/karpenter-instance-types.json) are one
# on-demand type in the zones its kwok provider names, test-zone-a to
# test-zone-d, apart from the zones of the nodes above.
#
# Once every component is healthy and every node is Ready without taints, it
# writes $LOCAL_CLUSTER_ENV (default _output/local-cluster.env), a shell file
# to `source`: it exports KUBECONFIG (an admin kubeconfig) and names the data
# directory and this script's pid. On exit, however it comes, every process
# is stopped, the data directory is removed and the env file deleted.
#
# Environment:
#   BIN                      where the binaries are (default ./bin)
#   NODES_PER_ZONE           fake nodes per zone (default 2)
#   LOCAL_CLUSTER_ENV        the env file written when ready
#   LOCAL_CLUSTER_LOGS       a directory to copy the component logs into on exit
#   LOCAL_CLUSTER_KEEP=1     keep the data directory on exit (for debugging)
#   LOCAL_CLUSTER_KARPENTER=1  run Karpenter too (default 0)
#   LOCAL_CLUSTER_ETCD_QUOTA etcd's --quota-backend-bytes (default: etcd's
#                            2 GiB)
#   LOCAL_CLUSTER_KWOK_POD_PARALLELISM  how many pods kwok moves through
#                            their stages at once (default: kwok's 4). Each
#                            step is a status PATCH; with 4 at a time on a
#                            busy API server kwok marks about 45 pods a
#                            second Running, an hour for 150,000 pods
#   LOCAL_CLUSTER_AGGREGATOR_ROUTING=1  start kube-apiserver with
#                            --enable-aggregator-routing=true (default 0): it
#                            then calls a webhook given by a Service at one of
#                            the Service's EndpointSlice endpoints, not at its
#                            cluster IP, which nothing here routes
#   ETCD_PORT, ETCD_PEER_PORT, APISERVER_PORT, SCHEDULER_PORT,
#   CONTROLLER_MANAGER_PORT, KWOK_PORT, KARPENTER_METRICS_PORT,
#   KARPENTER_HEALTH_PORT
#                            fixed ports on 127.0.0.1 (default: free ones)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"
BIN=${BIN:-$ROOT/bin}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
NODES_PER_ZONE=${NODES_PER_ZONE:-2}
ZONES=(zone-a zone-b zone-c)
LOCAL_CLUSTER_ENV=${LOCAL_CLUSTER_ENV:-$ROOT/_output/local-cluster.env}
READY_TIMEOUT=${READY_TIMEOUT:-120}
LOCAL_CLUSTER_KARPENTER=${LOCAL_CLUSTER_KARPENTER:-0}
LOCAL_CLUSTER_ETCD_QUOTA=${LOCAL_CLUSTER_ETCD_QUOTA:-}
LOCAL_CLUSTER_AGGREGATOR_ROUTING=${LOCAL_CLUSTER_AGGREGATOR_ROUTING:-0}
LOCAL_CLUSTER_KWOK_POD_PARALLELISM=${LOCAL_CLUSTER_KWOK_POD_PARALLELISM:-}
[[ -z $LOCAL_CLUSTER_KWOK_POD_PARALLELISM || $LOCAL_CLUSTER_KWOK_POD_PARALLELISM =~ ^[1-9][0-9]*$ ]] ||
  die "LOCAL_CLUSTER_KWOK_POD_PARALLELISM must be a positive integer, not '$LOCAL_CLUSTER_KWOK_POD_PARALLELISM'"

# ---------------------------------------------------------------- down

down() {
  [[ -f $LOCAL_CLUSTER_ENV ]] || { log "no cluster recorded in $LOCAL_CLUSTER_ENV"; return 0; }
  local pid dir pids
  pid=$(sed -n 's/^LOCAL_CLUSTER_PID=//p' "$LOCAL_CLUSTER_ENV")
  dir=$(sed -n 's/^LOCAL_CLUSTER_DIR=//p' "$LOCAL_CLUSTER_ENV")
  pids=$(sed -n 's/^LOCAL_CLUSTER_COMPONENT_PIDS="\(.*\)"/\1/p' "$LOCAL_CLUSTER_ENV")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    log "stopping the cluster run by pid $pid"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  fi
  # The run was killed without its trap: stop what it left behind.
  for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 1
  for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  [[ -n $dir && -d $dir ]] && rm -rf "$dir"
  rm -f "$LOCAL_CLUSTER_ENV"
}

# ---------------------------------------------------------------- checks

preflight() {
  local missing=()
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
    [[ -x $BIN/$b ]] || missing+=("$b")
  done
  if [[ $LOCAL_CLUSTER_KARPENTER == 1 ]] && [[ ! -x $BIN/karpenter-kwok || ! -d $BIN/karpenter-crds ]]; then
    missing+=(karpenter)
  fi
  if ((${#missing[@]})); then
    die "missing in $BIN: ${missing[*]}; build them with: hack/build-binaries.sh ${missing[*]} (or make binaries)"
  fi
  command -v openssl >/dev/null || die "openssl is needed to make the cluster's certificates and service-account keys"
  if [[ -f $LOCAL_CLUSTER_ENV ]]; then
    local other
    other=$(sed -n 's/^LOCAL_CLUSTER_PID=//p' "$LOCAL_CLUSTER_ENV")
    if [[ -n $other ]] && kill -0 "$other" 2>/dev/null; then
      die "a local cluster is already running (pid $other, see $LOCAL_CLUSTER_ENV); stop it with: hack/local-cluster.sh down"
    fi
    rm -f "$LOCAL_CLUSTER_ENV"
  fi
}

# pick_port VAR sets VAR to the port the caller fixed in the environment
# (failing when it is taken) or to a free one below the ephemeral range.
pick_port() {
  local var=$1 port=${!1:-}
  if [[ -z $port ]]; then
    free_port "$var"
    return
  fi
  [[ $port =~ ^[0-9]+$ ]] || die "$var=$port is not a port number"
  port_in_use "$port" && die "port $port ($var) on 127.0.0.1 is already in use$(who_listens "$port"); pick another with $var=PORT or leave $var unset"
  USED_PORTS+="$port "
}

who_listens() {
  command -v ss >/dev/null || return 0
  local line
  line=$(ss -Hltnp "sport = :$1" 2>/dev/null | head -1 | grep -o 'users:(([^)]*))' || true)
  [[ -n $line ]] && printf ' (%s)' "$line"
}

# ---------------------------------------------------------------- PKI

pki() {
  local d=$DIR/pki
  mkdir -p "$d"
  (
    cd "$d"
    # EC keys: quick to generate on every start, accepted everywhere.
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -subj "/CN=spreadguard-local-ca" -days 7 -out ca.crt 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
    openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
    cert apiserver "/CN=kube-apiserver" \
      "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      serverAuth
    cert admin "/O=system:masters/CN=admin" "" clientAuth
    cert controller-manager "/CN=system:kube-controller-manager" "" clientAuth
    cert scheduler "/CN=system:kube-scheduler" "" clientAuth
    # kwok stands in for every kubelet; it writes node and pod status.
    cert kwok "/O=system:masters/CN=kwok-controller" "" clientAuth
    # Karpenter's own chart grants it nearly as much.
    [[ $LOCAL_CLUSTER_KARPENTER != 1 ]] || cert karpenter "/O=system:masters/CN=karpenter" "" clientAuth
  )
}

cert() {
  local name=$1 subj=$2 san=$3 usage=$4 ext
  ext=$(mktemp)
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -n $san ]] && echo "$san"
  } >"$ext"
  openssl ecparam -name prime256v1 -genkey -noout -out "$name.key" 2>/dev/null
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
    -extfile "$ext" -out "$name.crt" 2>/dev/null
  rm -f "$ext" "$name.csr"
}

kubeconfig() {
  local name=$1 out=$2
  cat >"$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $DIR/pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $DIR/pki/$name.crt
    client-key: $DIR/pki/$name.key
contexts:
- name: local
  context: {cluster: local, user: $name}
current-context: local
EOF
}

# ---------------------------------------------------------------- processes

declare -A PIDS=()
ORDER=()
FAILED=

# start NAME CMD... runs a component in the background, its output in
# $DIR/logs/NAME.log. Without job control, background jobs ignore SIGINT, so
# Ctrl-C reaches only this script, whose trap stops them in order.
start() {
  local name=$1; shift
  "$@" >"$DIR/logs/$name.log" 2>&1 &
  PIDS[$name]=$!
  ORDER+=("$name")
}

print_logs() {
  for name in "${ORDER[@]}"; do
    [[ -f $DIR/logs/$name.log ]] || continue
    log_tail "$DIR/logs/$name.log"
  done
}

stop_all() {
  local i name pid
  for ((i = ${#ORDER[@]} - 1; i >= 0; i--)); do
    name=${ORDER[i]}; pid=${PIDS[$name]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # 130 and 143 are Ctrl-C and SIGTERM: the way to stop, not a failure.
  [[ $rc -ne 0 && $rc -ne 130 && $rc -ne 143 && -z $FAILED ]] && FAILED="exit status $rc"
  if [[ -n $FAILED ]]; then
    log "failed: $FAILED"
    [[ -n ${DIR:-} ]] && print_logs
  fi
  if [[ -n ${DIR:-} ]]; then
    log "stopping"
    stop_all
    if [[ -n ${LOCAL_CLUSTER_LOGS:-} ]]; then
      mkdir -p "$LOCAL_CLUSTER_LOGS" && cp "$DIR"/logs/*.log "$LOCAL_CLUSTER_LOGS"/ 2>/dev/null || true
    fi
    rm -f "$LOCAL_CLUSTER_ENV"
    if [[ ${LOCAL_CLUSTER_KEEP:-} == 1 ]]; then
      log "kept $DIR"
    else
      rm -rf "$DIR"
    fi
  fi
  exit "$rc"
}

# write_env records the running cluster for `source` and for down, in one
# rename so a reader never sees half of it.
write_env() {
  {
    echo "# Written by hack/local-cluster.sh; removed when the cluster stops. Source it."
    echo "export KUBECONFIG=$DIR/admin.kubeconfig"
    echo "LOCAL_CLUSTER_DIR=$DIR"
    echo "LOCAL_CLUSTER_PID=$$"
    echo "LOCAL_CLUSTER_COMPONENT_PIDS=\"${PIDS[*]}\""
    echo "APISERVER_URL=https://127.0.0.1:$APISERVER_PORT"
    echo "ETCD_URL=http://127.0.0.1:$ETCD_PORT"
    echo "LOCAL_CLUSTER_APISERVER_PID=${PIDS[kube-apiserver]}"
    echo "LOCAL_CLUSTER_ETCD_PID=${PIDS[etcd]}"
  } >"$LOCAL_CLUSTER_ENV.tmp"
  mv "$LOCAL_CLUSTER_ENV.tmp" "$LOCAL_CLUSTER_ENV"
}

# restart_apiserver stops kube-apiserver and starts it again with the same
# command line, as a control-plane upgrade or crash would, then bumps
# $DIR/apiserver.generation for whoever asked.
restart_apiserver() {
  local pid=${PIDS[kube-apiserver]} gen
  log "restarting kube-apiserver"
  kill -TERM "$pid" 2>/dev/null || true
  # Its graceful shutdown can take a minute; ten seconds is what it gets.
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  "${APISERVER_CMD[@]}" >>"$DIR/logs/kube-apiserver.log" 2>&1 &
  PIDS[kube-apiserver]=$!
  wait_for "kube-apiserver /readyz on 127.0.0.1:$APISERVER_PORT after a restart" k get --raw /readyz
  write_env
  gen=$(($(cat "$DIR/apiserver.generation" 2>/dev/null || echo 0) + 1))
  echo "$gen" >"$DIR/apiserver.generation.tmp" && mv -f "$DIR/apiserver.generation.tmp" "$DIR/apiserver.generation"
  log "kube-apiserver restarted (restart $gen)"
}

# restart_apiserver_cmd is `restart-apiserver`: it signals the running
# cluster and waits until its kube-apiserver is back.
restart_apiserver_cmd() {
  [[ -f $LOCAL_CLUSTER_ENV ]] || die "no cluster recorded in $LOCAL_CLUSTER_ENV"
  local pid dir before
  pid=$(sed -n 's/^LOCAL_CLUSTER_PID=//p' "$LOCAL_CLUSTER_ENV")
  dir=$(sed -n 's/^LOCAL_CLUSTER_DIR=//p' "$LOCAL_CLUSTER_ENV")
  before=$(cat "$dir/apiserver.generation" 2>/dev/null || echo 0)
  kill -USR1 "$pid" || die "the cluster run by pid $pid is gone"
  restarted() {
    kill -0 "$pid" 2>/dev/null || die "the cluster stopped while kube-apiserver restarted"
    [[ $(cat "$dir/apiserver.generation" 2>/dev/null || echo 0) != "$before" ]]
  }
  wait_until $((2 * READY_TIMEOUT)) restarted || die "kube-apiserver did not come back within $((2 * READY_TIMEOUT))s"
}

# alive fails, naming the component and what its log says, when one exited.
alive() {
  local name pid
  for name in "${ORDER[@]}"; do
    pid=${PIDS[$name]}
    if ! kill -0 "$pid" 2>/dev/null; then
      local why=""
      grep -qi 'address already in use' "$DIR/logs/$name.log" 2>/dev/null &&
        why=": its port on 127.0.0.1 is already in use (another process took it; run again to pick new ports)"
      FAILED="$name exited$why"
      return 1
    fi
  done
}

# wait_for WHAT CMD... polls CMD until it succeeds, failing early when a
# component dies and after READY_TIMEOUT seconds.
wait_for() {
  local what=$1; shift
  ready() { alive || exit 1; "$@" >/dev/null 2>&1; }
  if ! wait_until "$READY_TIMEOUT" ready "$@"; then
    FAILED="timed out after ${READY_TIMEOUT}s waiting for $what"
    exit 1
  fi
}

k() { "$BIN/kubectl" --kubeconfig "$DIR/admin.kubeconfig" --request-timeout=5s "$@"; }

# healthz asks a component's own server. With credentials, as kubectl would
# otherwise prompt for a username; /healthz is open to anyone authenticated.
healthz() {
  "$BIN/kubectl" --server="$1" --insecure-skip-tls-verify=true --request-timeout=3s \
    --client-certificate="$DIR/pki/admin.crt" --client-key="$DIR/pki/admin.key" get --raw /healthz </dev/null
}

# kwok's stages are the defaults kwokctl installs: nodes become Ready and keep
# their lease, pods become Running (Succeeded for Jobs) and go away when deleted.
# They are read from the kwok module the binary was built from, so they always
# match its version.
kwok_config() {
  local mod
  mod=$(cd "$DIR" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n $mod && -d $mod/kustomize/stage ]] || die "cannot find kwok $KWOK_VERSION's default stages in the Go module cache (go mod download sigs.k8s.io/kwok@$KWOK_VERSION)"
  {
    if [[ -n $LOCAL_CLUSTER_KWOK_POD_PARALLELISM ]]; then
      # kwok does not default the options of a KwokConfiguration it reads
      # (a parallelism left out is 0, which it refuses), so the others are
      # kwok's own defaults, spelled out.
      cat <<KWOK
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.0/24
  manageAllNodes: false
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true
  podPlayStageParallelism: $LOCAL_CLUSTER_KWOK_POD_PARALLELISM
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
KWOK
    fi
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
      pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      echo "---"
      cat "$mod/kustomize/stage/$f"
    done
  } >"$DIR/kwok.yaml"
}

nodes_manifest() {
  local zone i name
  for zone in "${ZONES[@]}"; do
    for i in $(seq 1 "$NODES_PER_ZONE"); do
      name=kwok-$zone-$i
      cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: $name
    topology.kubernetes.io/region: local
    topology.kubernetes.io/zone: $zone
    type: kwok
EOF
    done
  done
}

nodes_settled() {
  local want=$(( ${#ZONES[@]} * NODES_PER_ZONE )) out
  out=$(k get nodes -o go-template='{{range .items}}{{.metadata.name}} {{range .status.conditions}}{{if eq .type "Ready"}}{{.status}}{{end}}{{end}} taints:{{range .spec.taints}} {{.key}}{{end}}{{"\n"}}{{end}}') || return 1
  # Every node Ready and free of the not-ready taints the node-lifecycle
  # controller puts on new nodes, so the scheduler may use them all.
  [[ $(grep -c ' True taints:$' <<<"$out") -eq $want ]]
}

# karpenter_instance_types writes the instance types Karpenter may launch:
# one on-demand type in the four zones of its kwok provider's own list, so
# that where it puts a node depends on the NodePool and the pods alone.
karpenter_instance_types() {
  local zone offerings=()
  for zone in test-zone-a test-zone-b test-zone-c test-zone-d; do
    offerings+=("{\"Price\": 0.05, \"Available\": true, \"Requirements\": [
      {\"key\": \"karpenter.sh/capacity-type\", \"operator\": \"In\", \"values\": [\"on-demand\"]},
      {\"key\": \"topology.kubernetes.io/zone\", \"operator\": \"In\", \"values\": [\"$zone\"]}]}")
  done
  local IFS=,
  cat <<EOF
[{"name": "c-2x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
  "resources": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "20Gi", "pods": "32"},
  "offerings": [${offerings[*]}]}]
EOF
}

# start_karpenter applies Karpenter's CRDs, starts it and creates the
# KWOKNodeClass its NodePools name. Its readiness check waits for the
# NodePool and NodeClaim kinds, so it starts after the CRDs are served.
start_karpenter() {
  # Server-side: the NodePool CRD is too large for the annotation of a
  # client-side apply. The trailing slash: kubectl 1.31 reads a
  # symlink to a directory (make e2e-oldest links bin/karpenter-crds) as a
  # file.
  k apply --server-side -f "$BIN/karpenter-crds/" >/dev/null
  k wait --for=condition=Established --timeout=60s -f "$BIN/karpenter-crds/" >/dev/null
  karpenter_instance_types >"$DIR/karpenter-instance-types.json"
  # Short batches: the e2e creates one pod at a time and waits for it.
  start karpenter env KUBECONFIG="$DIR/karpenter.kubeconfig" \
    DISABLE_LEADER_ELECTION=true \
    METRICS_PORT="$KARPENTER_METRICS_PORT" HEALTH_PROBE_PORT="$KARPENTER_HEALTH_PORT" \
    INSTANCE_TYPES_FILE_PATH="$DIR/karpenter-instance-types.json" \
    BATCH_IDLE_DURATION=1s BATCH_MAX_DURATION=3s LOG_LEVEL=info \
    "$BIN/karpenter-kwok"
  wait_for "karpenter /readyz on 127.0.0.1:$KARPENTER_HEALTH_PORT" "$BIN/kubectl" \
    --server="http://127.0.0.1:$KARPENTER_HEALTH_PORT" --request-timeout=3s get --raw /readyz
  # The CRD defaults its status to Ready, which NodePools need to be used.
  k apply -f - >/dev/null <<'EOF'
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
EOF
}

run() {
  preflight
  DIR=$(mktemp -d "${TMPDIR:-/tmp}/spreadguard-cluster.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$DIR/logs" "$(dirname "$LOCAL_CLUSTER_ENV")"
  log "data and logs in $DIR"

  local ports=(ETCD_PORT ETCD_PEER_PORT APISERVER_PORT SCHEDULER_PORT CONTROLLER_MANAGER_PORT KWOK_PORT)
  [[ $LOCAL_CLUSTER_KARPENTER != 1 ]] || ports+=(KARPENTER_METRICS_PORT KARPENTER_HEALTH_PORT)
  for v in "${ports[@]}"; do
    pick_port "$v"
  done
  pki
  kubeconfig admin "$DIR/admin.kubeconfig"
  kubeconfig controller-manager "$DIR/controller-manager.kubeconfig"
  kubeconfig scheduler "$DIR/scheduler.kubeconfig"
  kubeconfig kwok "$DIR/kwok.kubeconfig"
  [[ $LOCAL_CLUSTER_KARPENTER != 1 ]] || kubeconfig karpenter "$DIR/karpenter.kubeconfig"
  kwok_config

  start etcd "$BIN/etcd" --name=local --data-dir="$DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync=true --log-level=warn \
    ${LOCAL_CLUSTER_ETCD_QUOTA:+--quota-backend-bytes="$LOCAL_CLUSTER_ETCD_QUOTA"}
  wait_for "etcd on 127.0.0.1:$ETCD_PORT" "$BIN/kubectl" --server="http://127.0.0.1:$ETCD_PORT" --request-timeout=2s get --raw /health

  APISERVER_CMD=("$BIN/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$DIR/pki/apiserver.crt" --tls-private-key-file="$DIR/pki/apiserver.key" \
    --client-ca-file="$DIR/pki/ca.crt" --cert-dir="$DIR/pki" \
    --requestheader-client-ca-file="$DIR/pki/ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$DIR/pki/sa.pub" --service-account-signing-key-file="$DIR/pki/sa.key" \
    --authorization-mode=RBAC --allow-privileged=true \
    --service-cluster-ip-range=10.96.0.0/16 \
    --endpoint-reconciler-type=none)
  [[ $LOCAL_CLUSTER_AGGREGATOR_ROUTING != 1 ]] || APISERVER_CMD+=(--enable-aggregator-routing=true)
  start kube-apiserver "${APISERVER_CMD[@]}"
  # The loopback address cannot be the kubernetes Service's endpoint, and
  # nothing in this cluster talks to the API through that Service.
  wait_for "kube-apiserver /readyz on 127.0.0.1:$APISERVER_PORT" k get --raw /readyz

  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT" --cert-dir="$DIR/pki/controller-manager" \
    --leader-elect=false --use-service-account-credentials=true \
    --root-ca-file="$DIR/pki/ca.crt" --service-account-private-key-file="$DIR/pki/sa.key" \
    --controllers=deployment-controller,replicaset-controller,statefulset-controller,node-lifecycle-controller,disruption-controller,serviceaccount-controller,namespace-controller,garbage-collector-controller,root-ca-certificate-publisher-controller \
    --node-monitor-period=2s
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --cert-dir="$DIR/pki/scheduler" \
    --leader-elect=false
  start kwok "$BIN/kwok" --kubeconfig="$DIR/kwok.kubeconfig" --config="$DIR/kwok.yaml" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 --server-address="127.0.0.1:$KWOK_PORT"
  wait_for "kube-controller-manager /healthz on 127.0.0.1:$CONTROLLER_MANAGER_PORT" healthz "https://127.0.0.1:$CONTROLLER_MANAGER_PORT"
  wait_for "kube-scheduler /healthz on 127.0.0.1:$SCHEDULER_PORT" healthz "https://127.0.0.1:$SCHEDULER_PORT"
  wait_for "kwok /healthz on 127.0.0.1:$KWOK_PORT" healthz "http://127.0.0.1:$KWOK_PORT"

  nodes_manifest >"$DIR/nodes.yaml"
  k apply -f "$DIR/nodes.yaml" >/dev/null
  wait_for "${#ZONES[@]}x$NODES_PER_ZONE nodes Ready without taints" nodes_settled
  wait_for "the default ServiceAccount" k -n default get serviceaccount default
  [[ $LOCAL_CLUSTER_KARPENTER != 1 ]] || start_karpenter

  write_env
  # restart-apiserver asks for a restart with SIGUSR1; the handler runs
  # between two rounds of the loop below, never during a liveness check.
  trap restart_apiserver USR1
  log "ready in ${SECONDS}s: kube-apiserver https://127.0.0.1:$APISERVER_PORT, $(( ${#ZONES[@]} * NODES_PER_ZONE )) nodes in ${ZONES[*]}$([[ $LOCAL_CLUSTER_KARPENTER != 1 ]] || echo ", Karpenter")"
  log "export KUBECONFIG=$DIR/admin.kubeconfig   (also in $LOCAL_CLUSTER_ENV)"

  while alive; do
    # `wait` returns as soon as a trapped signal arrives; `sleep` alone would not.
    sleep 1 &
    wait $! || true
  done
  exit 1
}

case ${1:-run} in
  run) run ;;
  down) down ;;
  restart-apiserver) restart_apiserver_cmd ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown command \"$1\" (want run, down or restart-apiserver)" ;;
esac
