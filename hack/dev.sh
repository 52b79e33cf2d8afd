#!/usr/bin/env bash
# dev.sh is `make dev`: a local cluster with spreadguard installed and a demo
# applied, up until Ctrl-C.
#
#   hack/dev.sh [run] [--no-demo]   start everything, stay up until INT/TERM
#   hack/dev.sh run --no-webhook    start the cluster alone: no chart, no
#                                   webhook (until an extra replica is started)
#   hack/dev.sh webhook-stop        stop the running webhook process
#   hack/dev.sh webhook-start [FLAG...]   start it again, as it was started,
#                                   with FLAGs added for this start only and
#                                   the configuration the chart renders now
#   hack/dev.sh webhook-extra-start PORT PROBE_PORT [BINARY]
#                                   start another replica (of BINARY)
#   hack/dev.sh webhook-extra-stop PORT               stop it, as a rollout does
#   hack/dev.sh webhook-extra-kill PORT               kill it, as a crash would
#
# `run` starts hack/local-cluster.sh, installs the chart in external-URL mode
# (webhook.url=https://127.0.0.1:PORT, webhook.caBundle=certs/dev/ca.crt) and
# runs bin/spreadguard-webhook as a local process with the configuration file
# the chart rendered into its ConfigMap (read again at every start, so that a
# `helm upgrade` of the release takes effect at the next webhook-start, as at
# a pod's restart: hack/lib/chart-config.sh), the dev certificates of `make certs`
# and the identity of the chart's ServiceAccount, so that the chart's RBAC is
# what the server runs with. Then, unless --no-demo, it applies the demo: a
# namespace with a SpreadPolicy and a Deployment of 9 replicas, and prints
# where the pods landed and the constraints they got.
#
# An extra replica is started as a new pod of the Deployment would be: with
# the configuration the chart's ConfigMap holds at that moment (after a
# `helm upgrade`, the upgraded one), and told to stop with SIGTERM, on
# which it stops being ready and answers for EXTRA_SHUTDOWN_DELAY more
# before it drains (the delay of a replica behind the e2e suite's front,
# which stops sending it connections once its /readyz fails).
#
# When everything is up it writes $DEV_ENV (default _output/dev.env), a
# shell file to `source`: KUBECONFIG, the webhook's log and the commands that
# stop and start it (what the e2e suite's outage scenario runs).
#
# Environment: BIN, DEV_ENV, RELEASE (spreadguard), RELEASE_NAMESPACE
# (spreadguard-system), WEBHOOK_PORT (default: a free port), WEBHOOK_FLAGS
# (flags added to the webhook's command line, after the chart's file: make
# e2e passes --audit-coalesce-delay=1s), EXTRA_SHUTDOWN_DELAY (2s), and those
# of hack/local-cluster.sh
# (LOCAL_CLUSTER_KARPENTER=1 runs Karpenter too).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"
# shellcheck source=lib/webhook-state.sh
source "$ROOT/hack/lib/webhook-state.sh"
# shellcheck source=lib/chart-config.sh
source "$ROOT/hack/lib/chart-config.sh"
BIN=${BIN:-$ROOT/bin}
DEV_ENV=${DEV_ENV:-$ROOT/_output/dev.env}
RELEASE=${RELEASE:-spreadguard}
RELEASE_NAMESPACE=${RELEASE_NAMESPACE:-spreadguard-system}
CERTS=${CERTS:-$ROOT/certs/dev}
DEMO_NAMESPACE=spreadguard-demo
READY_TIMEOUT=${READY_TIMEOUT:-120}
EXTRA_SHUTDOWN_DELAY=${EXTRA_SHUTDOWN_DELAY:-2s}
export BIN

k() { "$BIN/kubectl" --request-timeout=10s "$@"; }

# state VAR reads VAR from the env file of the running `dev.sh run`.
state() {
  [[ -f $DEV_ENV ]] || die "no running hack/dev.sh found ($DEV_ENV is missing)"
  sed -n "s/^\(export \)\{0,1\}$1=//p" "$DEV_ENV" | tail -1
}

# release_state sets RELEASE and RELEASE_NAMESPACE to those of the running
# `dev.sh run` (the defaults when its env file predates them).
release_state() {
  local r
  r=$(state RELEASE)
  RELEASE=${r:-$RELEASE}
  r=$(state RELEASE_NAMESPACE)
  RELEASE_NAMESPACE=${r:-$RELEASE_NAMESPACE}
}

# ---------------------------------------------------------------- webhook

# webhook_start starts the server in the background from the command line
# recorded in the state directory, with the flags after $1 added (later
# flags win), and waits until it is ready. The added flags are not
# recorded: the next start without any is the recorded command again. The
# configuration file is read again from the chart's ConfigMap first, as a
# pod restarted after a `helm upgrade` mounts the upgraded one.
webhook_start() {
  local dir=$1 pid
  shift
  # shellcheck disable=SC1091
  source "$dir/webhook.cmd"
  chart_config "$dir/config.yaml" ||
    die "could not read the chart's configuration (above); the webhook is not started, the cluster stays up"
  # Stopped on purpose until it is ready: a start that fails (a flag the
  # server refuses) is its caller's to report, not a death for the
  # supervisor to tear the cluster down for.
  webhook_state_stopping "$dir"
  echo "----- started $(date -u +%FT%TZ)${*:+ with $*} -----" >>"$dir/webhook.log"
  # Its output goes to the log only, so that a caller waiting on this
  # script's output (the e2e suite) does not wait on the server too.
  "${WEBHOOK_CMD[@]}" "$@" >>"$dir/webhook.log" 2>&1 </dev/null &
  pid=$!
  # In a subshell, as wait_url dies on failure.
  if ! (wait_url "http://$WEBHOOK_PROBE_ADDRESS/readyz" "$READY_TIMEOUT" spreadguard-webhook "$pid" "$dir/webhook.log"); then
    kill -TERM "$pid" 2>/dev/null || true
    die "spreadguard-webhook did not start${*:+ with $*}; start it again with: hack/dev.sh webhook-start"
  fi
  # The new pid is recorded before the stop marker goes (see
  # hack/lib/webhook-state.sh), so the supervisor never sees the old one
  # without the marker.
  webhook_state_started "$dir" "$pid"
}

# webhook_extra_start starts another replica of the webhook on port $2 with
# its probes on $3, as another pod behind the Service would run, with the
# configuration of the chart as installed now, and waits until it is ready.
# $4, when given, is the binary to run (a released one, for the upgrade
# scenario; default bin/spreadguard-webhook): the flags it does not know
# (--host, --leader-election-namespace, --shutdown-delay came after the
# first release) are left out. The identity is made anew at each start, as
# a release installed again has a new ServiceAccount. The supervisor does
# not watch it; cleanup stops it.
webhook_extra_start() {
  local dir=$1 port=$2 probe=$3 bin=${4:-$BIN/spreadguard-webhook}
  [[ -x $bin ]] || die "no webhook binary $bin"
  # The cluster's address and CA, for the identity.
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  chart_config "$dir/config-$port.yaml" || die "could not read the chart's configuration for the replica on port $port"
  webhook_identity "$dir" "webhook-extra-$port.kubeconfig"
  local help args=(--config "$dir/config-$port.yaml" --kubeconfig "$dir/webhook-extra-$port.kubeconfig"
    --port "$port" --cert-dir "$CERTS" --metrics-bind-address 0 --health-probe-bind-address "127.0.0.1:$probe")
  help=$("$bin" --help 2>&1 || true)
  has_flag() { [[ $help =~ (^|[[:space:]])--$1[[:space:]=] ]]; }
  if has_flag host; then args+=(--host 127.0.0.1); fi
  if has_flag leader-election-namespace; then args+=(--leader-election-namespace "$RELEASE_NAMESPACE"); fi
  if has_flag shutdown-delay; then args+=(--shutdown-delay "$EXTRA_SHUTDOWN_DELAY"); fi
  echo "----- started $(date -u +%FT%TZ): $bin ${args[*]} -----" >>"$dir/webhook-extra-$port.log"
  "$bin" "${args[@]}" >>"$dir/webhook-extra-$port.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/webhook-extra-$port.pid.tmp" && mv -f "$dir/webhook-extra-$port.pid.tmp" "$dir/webhook-extra-$port.pid"
  wait_url "http://127.0.0.1:$probe/readyz" "$READY_TIMEOUT" "the extra webhook on port $port" "$pid" "$dir/webhook-extra-$port.log"
}

# webhook_extra_stop stops the replica on port $2 as the kubelet stops a
# pod: SIGTERM, then SIGKILL if it has not exited within the chart's grace
# period (30 s).
webhook_extra_stop() {
  local f=$1/webhook-extra-$2.pid pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  rm -f "$f"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
  die "the replica on port $2 had not stopped 30 s after SIGTERM: killed"
}

# webhook_extra_kill kills the replica on port $2 at once, as a crash would.
webhook_extra_kill() {
  local f=$1/webhook-extra-$2.pid
  [[ -f $f ]] || return 0
  kill -KILL "$(cat "$f")" 2>/dev/null || true
  rm -f "$f"
}

webhook_stop() {
  local dir=$1 pid
  webhook_state_stopping "$dir"
  [[ -f $dir/webhook.pid ]] || return 0
  pid=$(cat "$dir/webhook.pid")
  kill -TERM "$pid" 2>/dev/null || return 0
  # The server drains in-flight requests; give it the chart's grace period.
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------- run

CLUSTER_PID=
DIR=
FAILED=
# The webhook's /metrics, set by prepare_webhook.
WEBHOOK_METRICS_URL=

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ $rc -ne 0 && $rc -ne 130 && $rc -ne 143 && -n $DIR && -f $DIR/webhook.log ]]; then
    log_tail "$DIR/webhook.log"
  fi
  log "tearing down"
  [[ -n $DIR ]] && webhook_stop "$DIR"
  local extra
  for extra in "$DIR"/webhook-extra-*.pid; do
    [[ -f $extra ]] && kill -KILL "$(cat "$extra")" 2>/dev/null
  done
  if [[ -n $CLUSTER_PID ]] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
    kill -TERM "$CLUSTER_PID" 2>/dev/null || true
    wait "$CLUSTER_PID" 2>/dev/null || true
  fi
  if [[ -n $DIR && -n ${DEV_LOGS:-} ]]; then
    mkdir -p "$DEV_LOGS" && cp "$DIR"/webhook*.log "$DEV_LOGS/" 2>/dev/null || true
  fi
  [[ -n $DIR ]] && rm -rf "$DIR"
  rm -f "$DEV_ENV"
  exit "$rc"
}

build() {
  local missing=()
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm; do
    [[ -x $BIN/$b ]] || missing+=("$b")
  done
  [[ ${LOCAL_CLUSTER_KARPENTER:-} != 1 || -x $BIN/karpenter-kwok ]] || missing+=(karpenter)
  if ((${#missing[@]})); then
    log "building ${missing[*]} from source (once; several minutes each when cold)"
    for b in "${missing[@]}"; do "$ROOT/hack/build-binaries.sh" "$b"; done
  fi
  [[ -f $CERTS/tls.crt && -f $CERTS/tls.key && -f $CERTS/ca.crt ]] ||
    die "no dev certificates in $CERTS (tls.crt, tls.key, ca.crt): run make certs"
  log "building bin/spreadguard-webhook"
  (cd "$ROOT" && go build -o "$BIN/spreadguard-webhook" ./cmd/webhook)
}

start_cluster() {
  export LOCAL_CLUSTER_ENV=$DIR/cluster.env
  "$ROOT/hack/local-cluster.sh" run &
  CLUSTER_PID=$!
  until [[ -f $LOCAL_CLUSTER_ENV ]]; do
    kill -0 "$CLUSTER_PID" 2>/dev/null || { wait "$CLUSTER_PID" || true; CLUSTER_PID=; die "the local cluster did not start (its logs are above)"; }
    sleep 0.5
  done
  # shellcheck disable=SC1090
  source "$LOCAL_CLUSTER_ENV"
  export KUBECONFIG
}

install_chart() {
  local ca
  ca=$(base64 <"$CERTS/ca.crt" | tr -d '\n')
  log "installing the chart (release $RELEASE in $RELEASE_NAMESPACE, webhook.url=https://127.0.0.1:$WEBHOOK_PORT)"
  run_logged "$DIR/helm.log" "helm install" "$BIN/helm" upgrade --install "$RELEASE" "$ROOT/charts/spreadguard" \
    --namespace "$RELEASE_NAMESPACE" --create-namespace \
    --set webhook.url="https://127.0.0.1:$WEBHOOK_PORT" --set webhook.caBundle="$ca" \
    --wait --timeout 2m
}

# webhook_identity writes $1/$2 (default webhook.kubeconfig), with a token
# of the chart's ServiceAccount, or with the admin's credentials when the
# chart made none.
webhook_identity() {
  local dir=$1 file=${2:-webhook.kubeconfig} sa token
  sa=$(k -n "$RELEASE_NAMESPACE" get serviceaccount -l "app.kubernetes.io/instance=$RELEASE" -o name 2>/dev/null | head -1)
  sa=${sa#serviceaccount/}
  if [[ -z $sa ]]; then
    log "the chart made no ServiceAccount: the webhook runs with the admin's credentials"
    cp "$KUBECONFIG" "$dir/$file"
    return
  fi
  token=$(k -n "$RELEASE_NAMESPACE" create token "$sa" --duration=48h)
  cat >"$dir/$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $APISERVER_URL
    certificate-authority: $LOCAL_CLUSTER_DIR/pki/ca.crt
users:
- name: $sa
  user:
    token: $token
contexts:
- name: local
  context: {cluster: local, user: $sa}
current-context: local
EOF
  log "the webhook runs as ServiceAccount $RELEASE_NAMESPACE/$sa"
}

prepare_webhook() {
  chart_config "$DIR/config.yaml" || die "could not read the chart's configuration"
  webhook_identity "$DIR"
  local metrics probe scheme=https
  free_port metrics
  free_port probe
  metrics=127.0.0.1:$metrics probe=127.0.0.1:$probe
  grep -q 'metricsSecure: false' "$DIR/config.yaml" && scheme=http
  WEBHOOK_METRICS_URL=$scheme://$metrics/metrics
  # Flags win over the chart's file: the ports and paths of a local process
  # differ from those of a pod, and it has no namespace of its own for the
  # audit's Lease.
  local cmd=("$BIN/spreadguard-webhook" --config "$DIR/config.yaml" --kubeconfig "$DIR/webhook.kubeconfig"
    --host 127.0.0.1 --port "$WEBHOOK_PORT" --cert-dir "$CERTS"
    --metrics-bind-address "$metrics" --health-probe-bind-address "$probe"
    --leader-election-namespace "$RELEASE_NAMESPACE")
  local extra=()
  read -r -a extra <<<"${WEBHOOK_FLAGS:-}"
  cmd+=("${extra[@]}")
  {
    declare -p cmd | sed 's/^declare -a cmd=/WEBHOOK_CMD=/'
    echo "WEBHOOK_PROBE_ADDRESS=$probe"
  } >"$DIR/webhook.cmd"
}

# wait_serving waits until the API server calls the webhook: a dry-run pod
# that no node can take (no node has its topology key) is denied.
wait_serving() {
  local out
  denied() {
    out=$(k create --dry-run=server -o name -f - 2>&1 <<'EOF' || true
apiVersion: v1
kind: Pod
metadata: {name: spreadguard-probe, namespace: default, labels: {spreadguard-probe: "true"}}
spec:
  containers: [{name: pause, image: registry.k8s.io/pause:3.10}]
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: spreadguard.io/no-such-label, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {spreadguard-probe: "true"}}}
EOF
    )
    [[ $out == *denied* ]]
  }
  wait_until 60 denied || die "the API server does not call the webhook 60s after the install (last answer: $out)"
}

demo() {
  log "applying the demo in namespace $DEMO_NAMESPACE"
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $DEMO_NAMESPACE}
---
apiVersion: spreadguard.io/v1alpha1
kind: SpreadPolicy
metadata: {name: zones, namespace: $DEMO_NAMESPACE}
spec:
  constraints:
  - {topologyKey: topology.kubernetes.io/zone, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}
  - {topologyKey: kubernetes.io/hostname, maxSkew: 2, whenUnsatisfiable: ScheduleAnyway}
  validation: {action: Deny}
EOF
  # The namespace's default ServiceAccount comes a moment after the namespace.
  wait_until 30 k -n "$DEMO_NAMESPACE" get serviceaccount default >/dev/null 2>&1 ||
    die "no default ServiceAccount in $DEMO_NAMESPACE"
  k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $DEMO_NAMESPACE}
spec:
  replicas: 9
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
EOF
  k -n "$DEMO_NAMESPACE" rollout status deployment/web --timeout=120s >/dev/null
}

report() {
  local nodes pods
  nodes=$(k get nodes -o go-template='{{range .items}}{{.metadata.name}} {{index .metadata.labels "topology.kubernetes.io/zone"}}{{"\n"}}{{end}}')
  pods=$(k -n "$DEMO_NAMESPACE" get pods -l app=web -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.spec.nodeName}} {{.metadata.name}}{{"\n"}}{{end}}{{end}}')
  echo
  echo "Deployment $DEMO_NAMESPACE/web, 9 replicas, placed by kube-scheduler:"
  echo
  awk 'NR == FNR { zone[$1] = $2; next }
       $1 != "" { z = zone[$1]; n[z]++; per[z "/" $1]++ }
       END {
         printf "  %-8s %-5s %s\n", "ZONE", "PODS", "NODES (pods)"
         for (z in n) zs[++k] = z
         for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (zs[j] < zs[i]) { t = zs[i]; zs[i] = zs[j]; zs[j] = t }
         for (i = 1; i <= k; i++) {
           z = zs[i]; line = ""
           for (key in per) { split(key, p, "/"); if (p[1] == z) line = line sprintf("%s (%d)  ", p[2], per[key]) }
           printf "  %-8s %-5d %s\n", z, n[z], line
         }
       }' <(echo "$nodes") <(echo "$pods")
  echo
  local one
  one=$(echo "$pods" | awk 'NF { print $2; exit }')
  echo "Constraints spreadguard injected (pod $one, policy $(k -n "$DEMO_NAMESPACE" get pod "$one" -o jsonpath='{.metadata.annotations.spreadguard\.io/policy}')):"
  echo
  k -n "$DEMO_NAMESPACE" get pod "$one" -o go-template='{{range .spec.topologySpreadConstraints}}  {{printf "%-30s" .topologyKey}} maxSkew={{.maxSkew}}  {{printf "%-14s" .whenUnsatisfiable}} nodeTaintsPolicy={{or .nodeTaintsPolicy "-"}}  selector={{range $k, $v := .labelSelector.matchLabels}}{{$k}}={{$v}},{{end}}{{"\n"}}{{end}}' | sed 's/,$//'
}

usage_hints() {
  cat <<EOF

Try it by hand (in another terminal):

  source $DEV_ENV        # sets KUBECONFIG
  kubectl -n $DEMO_NAMESPACE get pods -o wide
  bin/kubectl-spread explain deployment/web -n $DEMO_NAMESPACE   # the next pod, as the webhook sees it
  kubectl -n $DEMO_NAMESPACE scale deployment web --replicas=12     # 4/4/4
  kubectl cordon kwok-zone-c-1 kwok-zone-c-2                         # then scale again
  kubectl -n $DEMO_NAMESPACE get spreadpolicy zones -o yaml
  kubectl get clusterspreadpolicies

  webhook log: $DIR/webhook.log
  stop/start the webhook: hack/dev.sh webhook-stop / hack/dev.sh webhook-start

Try a chart value: upgrade the release, then restart the webhook, which reads the
configuration the chart rendered at each start (as a pod restarted after the upgrade):

  bin/helm upgrade $RELEASE charts/spreadguard -n $RELEASE_NAMESPACE --reuse-values \\
    --set 'autoscaler.zones={zone-a,zone-b,zone-c,zone-d}'
  hack/dev.sh webhook-stop && hack/dev.sh webhook-start

Up until Ctrl-C, which tears everything down.
EOF
}

run() {
  local with_demo=1 with_webhook=1
  for a in "$@"; do
    case $a in
      --no-demo) with_demo= ;;
      --no-webhook) with_webhook= with_demo= ;;
      *) die "unknown argument \"$a\" (want --no-demo or --no-webhook)" ;;
    esac
  done
  if [[ -f $DEV_ENV ]]; then
    local other
    other=$(sed -n 's/^DEV_PID=//p' "$DEV_ENV")
    [[ -n $other ]] && kill -0 "$other" 2>/dev/null && die "hack/dev.sh is already running (pid $other); stop it first"
    rm -f "$DEV_ENV"
  fi
  build
  mkdir -p "$(dirname "$DEV_ENV")"
  DIR=$(mktemp -d "${TMPDIR:-/tmp}/spreadguard-dev.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  if [[ -n ${WEBHOOK_PORT:-} ]]; then
    port_in_use "$WEBHOOK_PORT" && die "WEBHOOK_PORT $WEBHOOK_PORT on 127.0.0.1 is already in use"
  else
    free_port WEBHOOK_PORT
  fi
  start_cluster
  if [[ -n $with_webhook ]]; then
    install_chart
    prepare_webhook
    webhook_start "$DIR"
    wait_serving
    log "spreadguard-webhook serving on https://127.0.0.1:$WEBHOOK_PORT (log: $DIR/webhook.log)"
  else
    log "the cluster is up, without the chart or a webhook"
  fi

  {
    echo "# Written by hack/dev.sh; removed when it stops. Source it."
    echo "export KUBECONFIG=$KUBECONFIG"
    echo "DEV_PID=$$"
    echo "DEV_DIR=$DIR"
    echo "RELEASE=$RELEASE"
    echo "RELEASE_NAMESPACE=$RELEASE_NAMESPACE"
    echo "WEBHOOK_URL=https://127.0.0.1:$WEBHOOK_PORT"
    echo "WEBHOOK_LOG=$DIR/webhook.log"
    echo "WEBHOOK_METRICS_URL=$WEBHOOK_METRICS_URL"
    echo "WEBHOOK_CERT_DIR=$CERTS"
    echo "WEBHOOK_STOP_CMD=\"$ROOT/hack/dev.sh webhook-stop\""
    echo "WEBHOOK_START_CMD=\"$ROOT/hack/dev.sh webhook-start\""
    echo "WEBHOOK_EXTRA_START_CMD=\"$ROOT/hack/dev.sh webhook-extra-start\""
    echo "WEBHOOK_EXTRA_STOP_CMD=\"$ROOT/hack/dev.sh webhook-extra-stop\""
    echo "WEBHOOK_EXTRA_KILL_CMD=\"$ROOT/hack/dev.sh webhook-extra-kill\""
    echo "RESTART_APISERVER_CMD=\"LOCAL_CLUSTER_ENV=$LOCAL_CLUSTER_ENV $ROOT/hack/local-cluster.sh restart-apiserver\""
  } >"$DEV_ENV.tmp"
  mv "$DEV_ENV.tmp" "$DEV_ENV"

  if [[ -n $with_demo ]]; then
    (cd "$ROOT" && go build -o "$BIN/kubectl-spread" ./cmd/kubectl-spread)
    demo
    report
    usage_hints
  fi

  while kill -0 "$CLUSTER_PID" 2>/dev/null; do
    if webhook_died "$DIR"; then
      die "spreadguard-webhook exited (log: $DIR/webhook.log)"
    fi
    sleep 1 &
    wait $! || true
  done
  wait "$CLUSTER_PID" || true
  CLUSTER_PID=
  die "the local cluster stopped"
}

cmd=${1:-run}
[[ $# -gt 0 ]] && shift
case $cmd in
  run) run "$@" ;;
  # The state is read in an assignment of its own: as an argument, a
  # failed read would not stop the script (set -e ignores it there).
  webhook-stop) dir=$(state DEV_DIR); webhook_stop "$dir" ;;
  webhook-start)
    export KUBECONFIG
    KUBECONFIG=$(state KUBECONFIG)
    dir=$(state DEV_DIR)
    release_state
    webhook_start "$dir" "$@"
    ;;
  webhook-extra-start)
    [[ $# -eq 2 || $# -eq 3 ]] || die "usage: hack/dev.sh webhook-extra-start PORT PROBE_PORT [BINARY]"
    export KUBECONFIG
    KUBECONFIG=$(state KUBECONFIG)
    dir=$(state DEV_DIR)
    release_state
    CERTS=$(state WEBHOOK_CERT_DIR)
    webhook_extra_start "$dir" "$@"
    ;;
  webhook-extra-stop)
    [[ $# -eq 1 ]] || die "usage: hack/dev.sh webhook-extra-stop PORT"
    dir=$(state DEV_DIR)
    webhook_extra_stop "$dir" "$1"
    ;;
  webhook-extra-kill)
    [[ $# -eq 1 ]] || die "usage: hack/dev.sh webhook-extra-kill PORT"
    dir=$(state DEV_DIR)
    webhook_extra_kill "$dir" "$1"
    ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown command \"$cmd\" (want run, webhook-stop, webhook-start, webhook-extra-start, webhook-extra-stop or webhook-extra-kill)" ;;
esac
