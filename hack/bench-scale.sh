#!/usr/bin/env bash
# bench-scale.sh is `make bench-scale`: spreadguard's webhook measured against
# a real control plane holding a large cluster.
#
#   hack/bench-scale.sh
#
# It starts hack/local-cluster.sh, fills it through the API with the cluster
# of test/perf/fixture (BENCH_SCALE_NODES kwok nodes in 3 zones, 30 bound pods
# per node in 30-replica workloads, one Service and one ReplicationController
# per workload, a ClusterSpreadPolicy with hard zone and hostname spread),
# starts spreadguard-webhook and test/perf/cmd/noopwebhook (a webhook that
# allows every review at once, with spreadguard's TLS setup and serving
# certificate) as processes and waits until spreadguard's caches have synced.
# Then it measures bursts of pod creations (BENCH_SCALE_BURST pods from
# BENCH_SCALE_PARALLEL clients) BENCH_SCALE_ROUNDS times in each of three
# modes: no webhook registered (webhook=none), the chart's two webhook
# configurations pointing at the no-op webhook (webhook=noop), and the same
# pointing at spreadguard (webhook=spreadguard). Each round runs the three
# modes in a rotated order, so that a drift of the machine's load weighs on
# each alike. It reports the latency of a create call (p50/p90/p99/p99.9),
# the TLS handshakes each webhook began per burst, and, over all rounds
# pooled, what each webhook adds to webhook=none and the ratio of
# spreadguard's addition to the no-op's. Last, the webhook's resident memory
# (VmRSS, VmHWM) and its own decision-time metric.
#
# The bursts are dry-run creates (dryRun=All) by default: they pass through
# every admission plugin and webhook but are not stored, so that neither the
# scheduler placing them nor kwok running them competes with the measurement
# (a pod the webhook mutated carries hard constraints, which make the
# scheduler's work per pod much larger, and that would be charged to the
# webhook). BENCH_SCALE_DRY_RUN=0 creates them for real and deletes them after
# each burst.
#
# Results go to $BENCH_SCALE_OUT (default _output/bench-scale): summary.txt,
# bursts.jsonl, webhook.log, cluster.log and logs/ (one file per control-plane
# component), kept when the run fails too.
#
# Environment (defaults in brackets):
#   BENCH_SCALE_NODES [5000]  BENCH_SCALE_PODS_PER_NODE [30]
#   BENCH_SCALE_BURST [1000]  BENCH_SCALE_PARALLEL [8]  BENCH_SCALE_ROUNDS [5]
#   BENCH_SCALE_DRY_RUN [1]   BENCH_SCALE_WORKERS [32] BENCH_SCALE_QPS [2000]
#   BENCH_SCALE_SETTLE_TIMEOUT [30m]  how long to wait for kwok to mark every pod Running
#   BENCH_SCALE_ETCD_QUOTA [8589934592]  etcd's backend quota in bytes
#   BENCH_SCALE_POD_SIZE [auto]  the filled pods: full (as real pods are), lean
#                            (only what the scheduler and spreadguard read; see
#                            perfload fill --pod-size), or auto: full up to
#                            60,000 pods, lean beyond. At 5,000 nodes full-sized
#                            pods fill 24 GiB near 120,000 pods (kube-apiserver
#                            12 GiB, kwok 4.6, the scheduler and the
#                            controller-manager 3.3 each), and the API server
#                            is lost. The burst pods are full-sized always.
#   BENCH_SCALE_OUT, BIN, and those of hack/local-cluster.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
NODES=${BENCH_SCALE_NODES:-5000}
PODS_PER_NODE=${BENCH_SCALE_PODS_PER_NODE:-30}
BURST=${BENCH_SCALE_BURST:-1000}
PARALLEL=${BENCH_SCALE_PARALLEL:-8}
ROUNDS=${BENCH_SCALE_ROUNDS:-5}
DRY_RUN=${BENCH_SCALE_DRY_RUN:-1}
WORKERS=${BENCH_SCALE_WORKERS:-32}
QPS=${BENCH_SCALE_QPS:-2000}
SETTLE_TIMEOUT=${BENCH_SCALE_SETTLE_TIMEOUT:-30m}
ETCD_QUOTA=${BENCH_SCALE_ETCD_QUOTA:-8589934592}
POD_SIZE=${BENCH_SCALE_POD_SIZE:-auto}
if [[ $POD_SIZE == auto ]]; then
  POD_SIZE=full
  ((NODES * PODS_PER_NODE <= 60000)) || POD_SIZE=lean
fi
OUT=${BENCH_SCALE_OUT:-$ROOT/_output/bench-scale}
RELEASE=spreadguard
RELEASE_NAMESPACE=spreadguard-system
READY_TIMEOUT=${READY_TIMEOUT:-1800}
export BIN
HACK_LOG_TIME=1
# shellcheck source=lib/common.sh
source "$ROOT/hack/lib/common.sh"

k() { "$BIN/kubectl" --request-timeout=60s "$@"; }

DIR=
COMMIT=
CLUSTER_PID=
WEBHOOK_PID=
NOOP_PID=

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ $rc -ne 0 ]]; then
    log "failed (exit status $rc)"
    # What a lost API server most often comes from: memory, or etcd's quota.
    [[ -z ${LOCAL_CLUSTER_ETCD_PID:-} ]] || log "control plane: $(control_plane_memory 2>&1)"
  fi
  if [[ -n $WEBHOOK_PID ]] && kill -0 "$WEBHOOK_PID" 2>/dev/null; then
    kill -TERM "$WEBHOOK_PID" 2>/dev/null || true
    wait "$WEBHOOK_PID" 2>/dev/null || true
  fi
  if [[ -n $NOOP_PID ]] && kill -0 "$NOOP_PID" 2>/dev/null; then
    kill -TERM "$NOOP_PID" 2>/dev/null || true
    wait "$NOOP_PID" 2>/dev/null || true
  fi
  if [[ -n $CLUSTER_PID ]] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
    log "stopping the local cluster"
    kill -TERM "$CLUSTER_PID" 2>/dev/null || true
    wait "$CLUSTER_PID" 2>/dev/null || true
  fi
  if [[ -n $DIR ]]; then
    [[ -f $DIR/webhook.log ]] && cp "$DIR/webhook.log" "$OUT/" 2>/dev/null || true
    [[ -f $DIR/noopwebhook.log ]] && cp "$DIR/noopwebhook.log" "$OUT/" 2>/dev/null || true
    [[ -f $DIR/cluster.log ]] && cp "$DIR/cluster.log" "$OUT/" 2>/dev/null || true
    rm -rf "$DIR"
  fi
  exit "$rc"
}

preflight() {
  local missing=()
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm; do
    [[ -x $BIN/$b ]] || missing+=("$b")
  done
  ((${#missing[@]} == 0)) || die "missing in $BIN: ${missing[*]}; build them with: hack/build-binaries.sh ${missing[*]}"
  [[ $NODES =~ ^[0-9]+$ && $PODS_PER_NODE =~ ^[0-9]+$ && $BURST =~ ^[0-9]+$ && $ROUNDS =~ ^[0-9]+$ ]] ||
    die "BENCH_SCALE_NODES, _PODS_PER_NODE, _BURST and _ROUNDS must be numbers"
}

build() {
  COMMIT=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
  log "building perfload and spreadguard-webhook at $COMMIT"
  (cd "$ROOT" && go build -o "$DIR/perfload" ./test/perf/cmd/perfload)
  (cd "$ROOT" && CGO_ENABLED=0 go build -o "$DIR/spreadguard-webhook" ./cmd/webhook)
  (cd "$ROOT" && CGO_ENABLED=0 go build -o "$DIR/noopwebhook" ./test/perf/cmd/noopwebhook)
  (cd "$ROOT" && go run ./hack/certs -dir "$DIR/certs" >/dev/null)
}

start_cluster() {
  export LOCAL_CLUSTER_ENV=$DIR/cluster.env
  # The control plane's own logs survive the run (a failed fill is otherwise
  # unexplained: the cluster's directory goes with it).
  rm -rf "$OUT/logs"
  export LOCAL_CLUSTER_LOGS=$OUT/logs
  export LOCAL_CLUSTER_ETCD_QUOTA=$ETCD_QUOTA
  "$ROOT/hack/local-cluster.sh" run >"$DIR/cluster.log" 2>&1 &
  CLUSTER_PID=$!
  until [[ -f $LOCAL_CLUSTER_ENV ]]; do
    kill -0 "$CLUSTER_PID" 2>/dev/null || { LOG_TAIL_LINES=60 log_tail "$DIR/cluster.log"; CLUSTER_PID=; die "the local cluster did not start"; }
    sleep 1
  done
  # shellcheck disable=SC1090
  source "$LOCAL_CLUSTER_ENV"
  export KUBECONFIG
  k apply -f "$ROOT/charts/spreadguard/crds" >/dev/null
  k wait --for condition=established --timeout=120s -f "$ROOT/charts/spreadguard/crds" >/dev/null
}

# webhook_configurations PORT prints the chart's two webhook configurations,
# in external-URL mode, pointing at the local process serving on PORT.
webhook_configurations() {
  "$BIN/helm" template "$RELEASE" "$ROOT/charts/spreadguard" --namespace "$RELEASE_NAMESPACE" \
    --set webhook.url="https://127.0.0.1:$1" \
    --set webhook.caBundle="$(base64 <"$DIR/certs/ca.crt" | tr -d '\n')" \
    --show-only templates/webhook-mutatingwebhookconfiguration.yaml \
    --show-only templates/webhook-validatingwebhookconfiguration.yaml
}

# probe prints what the API server answers to a dry-run pod that no node can
# take (no node has its topology key): denied when the webhook is called.
probe() {
  k create --dry-run=server -o name -f - 2>&1 <<'EOF' || true
apiVersion: v1
kind: Pod
metadata: {generateName: spreadguard-probe-, namespace: default, labels: {spreadguard-probe: "true"}}
spec:
  containers: [{name: pause, image: registry.k8s.io/pause:3.10}]
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: spreadguard.io/no-such-label, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {spreadguard-probe: "true"}}}
EOF
}

# counter URL NAME prints the value of the counter NAME at the /metrics URL.
counter() {
  [[ $1 =~ ^([a-z]+://[^/]+)(/.*)$ ]] || die "counter: $1 is not scheme://host:port/path"
  k --server="${BASH_REMATCH[1]}" get --raw "${BASH_REMATCH[2]}" | awk -v name="$2" '$1 == name { print $2; found = 1 } END { exit !found }'
}

# probe_calls PROBE prints what the API server answers to a probe, then how
# many reviews the no-op webhook answered meanwhile.
probe_calls() {
  local before answer after
  before=$(counter "$NOOP_METRICS_URL" noopwebhook_admission_requests_total)
  answer=$(probe)
  after=$(counter "$NOOP_METRICS_URL" noopwebhook_admission_requests_total)
  echo "$answer"
  echo "noop reviews: $((after - before))"
}

# called MODE succeeds when the API server calls the webhooks of MODE (none,
# noop, spreadguard) for a pod create, and no other: spreadguard denies the
# probe, the no-op counts a mutating and a validating review of it.
called() {
  local out
  out=$(probe_calls)
  case $1 in
    none) [[ $out != *denied* && $out == *"noop reviews: 0" ]] ;;
    noop) [[ $out != *denied* && $out == *"noop reviews: 2" ]] ;;
    spreadguard) [[ $out == *denied* && $out == *"noop reviews: 0" ]] ;;
  esac
}

register() {
  local port=$WEBHOOK_PORT
  [[ $1 == noop ]] && port=$NOOP_PORT
  webhook_configurations "$port" | k apply -f - >/dev/null
  wait_until 120 called "$1" || die "the API server does not call only the $1 webhook 120s after registering it"
}

unregister() {
  k delete mutatingwebhookconfiguration,validatingwebhookconfiguration "$RELEASE" --ignore-not-found >/dev/null
  wait_until 120 called none || die "the API server still calls a webhook 120s after removing it"
}

start_webhook() {
  local metrics probe_port
  free_port WEBHOOK_PORT
  free_port metrics
  free_port probe_port
  METRICS_ADDRESS=127.0.0.1:$metrics
  PROBE_ADDRESS=127.0.0.1:$probe_port
  "$DIR/spreadguard-webhook" --kubeconfig "$KUBECONFIG" --port "$WEBHOOK_PORT" --cert-dir "$DIR/certs" \
    --metrics-bind-address "$METRICS_ADDRESS" --metrics-secure=false --health-probe-bind-address "$PROBE_ADDRESS" \
    --default-action Deny --log-level info >"$DIR/webhook.log" 2>&1 </dev/null &
  WEBHOOK_PID=$!
  local start=$SECONDS
  wait_url "http://$PROBE_ADDRESS/readyz" "$READY_TIMEOUT" spreadguard-webhook "$WEBHOOK_PID" "$DIR/webhook.log"
  WEBHOOK_READY_SECONDS=$((SECONDS - start))
}

start_noop() {
  local metrics
  free_port NOOP_PORT
  free_port metrics
  NOOP_METRICS_URL=http://127.0.0.1:$metrics/metrics
  "$DIR/noopwebhook" --port "$NOOP_PORT" --cert-dir "$DIR/certs" --metrics-bind-address "127.0.0.1:$metrics" \
    >"$DIR/noopwebhook.log" 2>&1 </dev/null &
  NOOP_PID=$!
  wait_url "$NOOP_METRICS_URL" 60 noopwebhook "$NOOP_PID" "$DIR/noopwebhook.log"
}

# memory prints the webhook's resident set and its high-water mark, in MiB.
memory() {
  process_memory "$WEBHOOK_PID"
}

process_memory() {
  awk '/^VmRSS:/ { rss = $2 } /^VmHWM:/ { hwm = $2 } END { printf "VmRSS %.0f MiB, VmHWM %.0f MiB", rss / 1024, hwm / 1024 }' \
    "/proc/$1/status"
}

# control_plane_memory prints the resident memory of kube-apiserver and etcd
# and the size of etcd's database, against its quota.
control_plane_memory() {
  local db
  db=$(curl -s "$ETCD_URL/metrics" | awk '/^etcd_mvcc_db_total_size_in_bytes / { printf "%.0f", $2 / 1048576 }')
  echo "kube-apiserver $(process_memory "$LOCAL_CLUSTER_APISERVER_PID"); etcd $(process_memory "$LOCAL_CLUSTER_ETCD_PID"), database ${db:-?} MiB of a $((ETCD_QUOTA / 1048576)) MiB quota"
}

# decisions prints the mean of the server's own decision-time histogram.
decisions() {
  k --server="http://$METRICS_ADDRESS" get --raw /metrics 2>/dev/null | awk '
    /^spreadguard_admission_decision_duration_seconds_sum/ { split($1, a, "webhook=\""); split(a[2], b, "\""); sum[b[1]] = $2 }
    /^spreadguard_admission_decision_duration_seconds_count/ { split($1, a, "webhook=\""); split(a[2], b, "\""); n[b[1]] = $2 }
    END { for (w in n) if (n[w] > 0) printf "  %s: %d decisions, mean %.3f ms\n", w, n[w], 1000 * sum[w] / n[w] }'
}

# burst MODE measures one burst with the webhooks of MODE registered.
burst() {
  local mode=$1 expect=none
  local args=(--nodes "$NODES" --pods-per-node "$PODS_PER_NODE" --pods "$BURST" --parallel "$PARALLEL" --tag "webhook=$mode")
  case $mode in
    noop) args+=(--metrics-url "$NOOP_METRICS_URL" --handshakes-metric noopwebhook_tls_handshakes_total) ;;
    spreadguard)
      expect=all
      args+=(--metrics-url "http://$METRICS_ADDRESS/metrics" --handshakes-metric spreadguard_webhook_tls_handshakes_total)
      ;;
  esac
  args+=(--expect-mutated "$expect")
  [[ $DRY_RUN == 1 ]] && args+=(--dry-run)
  # Every latency goes to the file; the console gets the line without them.
  "$DIR/perfload" burst "${args[@]}" | tee -a "$OUT/bursts.jsonl" | sed 's/,"latenciesMs":\[[^]]*\]//' >&2
  if [[ $DRY_RUN != 1 ]]; then
    # Real pods: remove them, and wait, so that every burst meets the same cluster.
    k delete pods -A -l spreadguard.io/perf-burst=1 --wait=true --timeout=10m >/dev/null
  fi
}

main() {
  preflight
  mkdir -p "$OUT"
  : >"$OUT/bursts.jsonl"
  DIR=$(mktemp -d "${TMPDIR:-/tmp}/spreadguard-bench-scale.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  build
  log "starting the local cluster"
  start_cluster

  log "filling: $NODES nodes, $((NODES * PODS_PER_NODE)) pods"
  local t=$SECONDS
  "$DIR/perfload" fill --nodes "$NODES" --pods-per-node "$PODS_PER_NODE" --workers "$WORKERS" --qps "$QPS" --pod-size "$POD_SIZE"
  local fill_seconds=$((SECONDS - t))
  log "waiting for kwok to mark every pod Running (at most $SETTLE_TIMEOUT)"
  t=$SECONDS
  local settled=yes
  "$DIR/perfload" wait-running --timeout "$SETTLE_TIMEOUT" || settled="no, after $SETTLE_TIMEOUT"
  local settle_seconds=$((SECONDS - t))
  local cp_filled
  cp_filled=$(control_plane_memory)
  log "control plane: $cp_filled"
  local ready_nodes
  ready_nodes=$(k get nodes --no-headers | awk '$2 == "Ready"' | wc -l)

  log "starting spreadguard-webhook and noopwebhook"
  start_noop
  start_webhook
  log "webhook ready after ${WEBHOOK_READY_SECONDS}s: $(memory)"
  sleep 30
  local rss_idle
  rss_idle=$(memory)

  local modes=(none noop spreadguard) loads=()
  for r in $(seq 1 "$ROUNDS"); do
    for i in 0 1 2; do
      local mode=${modes[(r - 1 + i) % 3]}
      log "round $r/$ROUNDS: $BURST creates, $PARALLEL parallel, webhook=$mode"
      unregister
      if [[ $mode != none ]]; then register "$mode"; fi
      burst "$mode"
    done
    loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  done
  unregister
  local rss_after
  rss_after=$(memory)

  {
    echo "spreadguard bench-scale, $(date -u +%FT%TZ), commit $COMMIT"
    echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "cluster: $NODES nodes ($ready_nodes Ready), $((NODES * PODS_PER_NODE)) $POD_SIZE pods + the local cluster's own; filled in ${fill_seconds}s, kwok settled: $settled (${settle_seconds}s)"
    echo "webhook: ready (caches synced) ${WEBHOOK_READY_SECONDS}s after start"
    echo "webhook memory: idle after sync: $rss_idle; after the bursts: $rss_after"
    echo "control plane after the fill: $cp_filled"
    echo "control plane after the bursts: $(control_plane_memory)"
    echo "bursts: dry-run=$([[ $DRY_RUN == 1 ]] && echo yes || echo no); 1-minute load average after each round: ${loads[*]}"
    "$DIR/perfload" summarize "$OUT/bursts.jsonl"
    echo "webhook's own decision time (spreadguard_admission_decision_duration_seconds):"
    decisions
  } | tee "$OUT/summary.txt"
}

case ${1:-run} in
  run) main ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown command \"$1\" (want run)" ;;
esac
