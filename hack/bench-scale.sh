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
# It asks spreadguard for its patch of a burst pod (perfload
# mutate-patch: the pod's review as the API server sends it, posted to
# /mutate-v1-pod; kept in $OUT/noop-patch.json) and starts a second
# noopwebhook that answers every mutating review with that patch.
# Then it measures bursts of pod creations (BENCH_SCALE_BURST pods from
# BENCH_SCALE_PARALLEL clients) BENCH_SCALE_ROUNDS times in each of four
# modes: no webhook registered (webhook=none), the chart's two webhook
# configurations pointing at the no-op webhook (webhook=noop), the same
# pointing at the patching no-op (webhook=noop-patch: the API server applies
# spreadguard's patch and sends the validating webhook the patched pod, as
# it does for spreadguard), and the same pointing at spreadguard
# (webhook=spreadguard). Each round runs the four modes in a rotated order,
# so that a drift of the machine's load weighs on each alike. Before each
# mode's bursts it checks that the API server calls that mode's webhooks and
# no other (a probe pod: spreadguard denies it, each no-op counts its two
# reviews, the patching no-op's gives it spreadguard's constraints), and each
# burst fails unless its pods came back mutated as the mode mutates them
# (with the patch's constraints exactly under noop-patch). It reports the
# latency of a create call (p50/p90/p99/p99.9), the TLS handshakes each
# webhook began per burst, and, over all rounds pooled, what each webhook
# adds to webhook=none and the ratios of spreadguard's addition to the
# no-op's and to the patching no-op's. Last, the webhook's resident memory
# (VmRSS, VmHWM) and its own decision-time metric.
#
# With BENCH_SCALE_PPROF=1, after the rounds (and apart from them: their
# figures do not carry the profilers' cost), it takes CPU profiles of
# BENCH_SCALE_PPROF_SECONDS in each mode of BENCH_SCALE_PPROF_MODES
# (webhook=noop, then webhook=spreadguard) while bursts of that mode run back
# to back, into $OUT/pprof/ (the bursts' lines in bursts.jsonl there, not in
# the summary). kube-apiserver's /debug/pprof/profile (profiling is on by
# default; the admin kubeconfig may read it) as kube-apiserver-MODE.pprof,
# and the no-op's (/debug/pprof on its metrics port) as
# noopwebhook-noop.pprof, for `go tool pprof`. spreadguard-webhook serves no
# pprof (cmd/webhook has no such option), so it is sampled with
# `perf record -g` when perf is installed and allowed:
# spreadguard-webhook-spreadguard.perf.data, and its flat `perf report` in
# spreadguard-webhook-spreadguard.perf.txt.
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
# bursts.jsonl, noop-patch.json, webhook.log, noopwebhook*.log, cluster.log,
# logs/ (one file per control-plane component) and pprof/, kept when the run
# fails too.
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
#   BENCH_SCALE_PPROF [0]     BENCH_SCALE_PPROF_SECONDS [20]
#   BENCH_SCALE_PPROF_MODES [noop spreadguard]  the modes profiled, in order
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
PPROF=${BENCH_SCALE_PPROF:-0}
PPROF_SECONDS=${BENCH_SCALE_PPROF_SECONDS:-20}
PPROF_MODES=${BENCH_SCALE_PPROF_MODES:-noop spreadguard}
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
NOOP_PATCH_PID=

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
  local pid
  for pid in "$NOOP_PID" "$NOOP_PATCH_PID"; do
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [[ -n $CLUSTER_PID ]] && kill -0 "$CLUSTER_PID" 2>/dev/null; then
    log "stopping the local cluster"
    kill -TERM "$CLUSTER_PID" 2>/dev/null || true
    wait "$CLUSTER_PID" 2>/dev/null || true
  fi
  if [[ -n $DIR ]]; then
    [[ -f $DIR/webhook.log ]] && cp "$DIR/webhook.log" "$OUT/" 2>/dev/null || true
    [[ -f $DIR/noopwebhook.log ]] && cp "$DIR/noopwebhook.log" "$OUT/" 2>/dev/null || true
    [[ -f $DIR/noopwebhook-patch.log ]] && cp "$DIR/noopwebhook-patch.log" "$OUT/" 2>/dev/null || true
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
  [[ $PPROF == [01] && $PPROF_SECONDS =~ ^[1-9][0-9]*$ ]] ||
    die "BENCH_SCALE_PPROF must be 0 or 1 and BENCH_SCALE_PPROF_SECONDS a number of seconds"
  local m
  for m in $PPROF_MODES; do
    [[ $m == noop || $m == noop-patch || $m == spreadguard ]] ||
      die "BENCH_SCALE_PPROF_MODES: $m is not a webhook mode (noop, noop-patch, spreadguard)"
  done
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
# take (no node has its topology key): denied when spreadguard is called;
# else the pod's name and the topology keys of its constraints, which are
# spreadguard's when the patching no-op is called. It has an annotation, as
# burst pods do, so that the patch's add of one applies to it.
probe() {
  k create --dry-run=server -o jsonpath='{.metadata.name} keys: {.spec.topologySpreadConstraints[*].topologyKey}' -f - 2>&1 <<'EOF' || true
apiVersion: v1
kind: Pod
metadata: {generateName: spreadguard-probe-, namespace: default, labels: {spreadguard-probe: "true"}, annotations: {spreadguard-probe: "true"}}
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
# many reviews each no-op webhook answered meanwhile.
probe_calls() {
  local before before_patch answer after after_patch
  before=$(counter "$NOOP_METRICS_URL" noopwebhook_admission_requests_total)
  before_patch=$(counter "$NOOP_PATCH_METRICS_URL" noopwebhook_admission_requests_total)
  answer=$(probe)
  after=$(counter "$NOOP_METRICS_URL" noopwebhook_admission_requests_total)
  after_patch=$(counter "$NOOP_PATCH_METRICS_URL" noopwebhook_admission_requests_total)
  echo "$answer"
  echo "noop reviews: $((after - before)), noop-patch reviews: $((after_patch - before_patch))"
}

# called MODE succeeds when the API server calls the webhooks of MODE (none,
# noop, noop-patch, spreadguard) for a pod create, and no other: spreadguard
# denies the probe, a no-op counts a mutating and a validating review of it,
# and the patching no-op's patch replaces its constraint with spreadguard's.
called() {
  local out
  out=$(probe_calls)
  case $1 in
    none) [[ $out == *"keys: spreadguard.io/no-such-label"* && $out == *"noop reviews: 0, noop-patch reviews: 0" ]] ;;
    noop) [[ $out == *"keys: spreadguard.io/no-such-label"* && $out == *"noop reviews: 2, noop-patch reviews: 0" ]] ;;
    noop-patch) [[ $out == *"keys: "* && $out != *no-such-label* && $out == *"noop reviews: 0, noop-patch reviews: 2" ]] ;;
    spreadguard) [[ $out == *denied* && $out == *"noop reviews: 0, noop-patch reviews: 0" ]] ;;
  esac
}

register() {
  local port=$WEBHOOK_PORT
  case $1 in
    noop) port=$NOOP_PORT ;;
    noop-patch) port=$NOOP_PATCH_PORT ;;
  esac
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

# spawn_noop LOG [FLAG...] starts a noopwebhook with FLAGs, its output in
# $DIR/LOG, and waits until it serves. It sets SPAWNED_PORT (the webhook's),
# SPAWNED_METRICS (the address of /metrics and /debug/pprof) and SPAWNED_PID.
spawn_noop() {
  local logfile=$DIR/$1 metrics
  shift
  free_port SPAWNED_PORT
  free_port metrics
  SPAWNED_METRICS=127.0.0.1:$metrics
  "$DIR/noopwebhook" --port "$SPAWNED_PORT" --cert-dir "$DIR/certs" --metrics-bind-address "$SPAWNED_METRICS" "$@" \
    >"$logfile" 2>&1 </dev/null &
  SPAWNED_PID=$!
  wait_url "http://$SPAWNED_METRICS/metrics" 60 "noopwebhook $*" "$SPAWNED_PID" "$logfile"
}

start_noop() {
  spawn_noop noopwebhook.log
  NOOP_PORT=$SPAWNED_PORT NOOP_METRICS=$SPAWNED_METRICS NOOP_PID=$SPAWNED_PID
  NOOP_METRICS_URL=http://$NOOP_METRICS/metrics
}

# start_noop_patch fetches spreadguard's patch of a burst pod, once its
# caches have synced and while no webhook is registered, and starts the
# noopwebhook that answers every mutating review with it.
start_noop_patch() {
  PATCH_FILE=$OUT/noop-patch.json
  if ! PATCH_NOTE=$("$DIR/perfload" mutate-patch --nodes "$NODES" --pods-per-node "$PODS_PER_NODE" \
    --webhook-url "https://127.0.0.1:$WEBHOOK_PORT/mutate-v1-pod" --ca-file "$DIR/certs/ca.crt" --out "$PATCH_FILE" 2>&1); then
    die "fetching spreadguard's patch: $PATCH_NOTE"
  fi
  PATCH_NOTE=${PATCH_NOTE#\[perfload\] }
  log "$PATCH_NOTE"
  spawn_noop noopwebhook-patch.log --mutate-patch "$PATCH_FILE"
  NOOP_PATCH_PORT=$SPAWNED_PORT NOOP_PATCH_METRICS=$SPAWNED_METRICS NOOP_PATCH_PID=$SPAWNED_PID
  NOOP_PATCH_METRICS_URL=http://$NOOP_PATCH_METRICS/metrics
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

# burst MODE [FILE] measures one burst with the webhooks of MODE registered;
# its line goes to FILE (default $OUT/bursts.jsonl).
burst() {
  local mode=$1 file=${2:-$OUT/bursts.jsonl} expect=none
  local args=(--nodes "$NODES" --pods-per-node "$PODS_PER_NODE" --pods "$BURST" --parallel "$PARALLEL" --tag "webhook=$mode")
  case $mode in
    noop) args+=(--metrics-url "$NOOP_METRICS_URL" --handshakes-metric noopwebhook_tls_handshakes_total) ;;
    noop-patch)
      expect=all
      args+=(--metrics-url "$NOOP_PATCH_METRICS_URL" --handshakes-metric noopwebhook_tls_handshakes_total --expect-constraints "$PATCH_FILE")
      ;;
    spreadguard)
      expect=all
      args+=(--metrics-url "http://$METRICS_ADDRESS/metrics" --handshakes-metric spreadguard_webhook_tls_handshakes_total)
      ;;
  esac
  args+=(--expect-mutated "$expect")
  [[ $DRY_RUN == 1 ]] && args+=(--dry-run)
  # Every latency goes to the file; the console gets the line without them.
  "$DIR/perfload" burst "${args[@]}" | tee -a "$file" | sed 's/,"latenciesMs":\[[^]]*\]//' >&2
  if [[ $DRY_RUN != 1 ]]; then
    # Real pods: remove them, and wait, so that every burst meets the same cluster.
    k delete pods -A -l spreadguard.io/perf-burst=1 --wait=true --timeout=10m >/dev/null
  fi
}

# cpu_profile URL FILE saves the CPU profile of PPROF_SECONDS that the Go
# pprof endpoint at URL (scheme://host:port, authenticated by KUBECONFIG
# when https) takes.
cpu_profile() {
  "$BIN/kubectl" --server="$1" --request-timeout="$((PPROF_SECONDS + 60))s" \
    get --raw "/debug/pprof/profile?seconds=$PPROF_SECONDS" >"$2"
}

# perf_usable succeeds when perf is installed and may sample processes.
perf_usable() {
  command -v perf >/dev/null && perf record -q -o "$DIR/perf-check.data" -- true >/dev/null 2>&1
}

# profile MODE registers the webhooks of MODE and profiles the CPU while
# bursts of MODE run back to back, until every profile of PPROF_SECONDS has
# ended, into $OUT/pprof; the bursts' lines go to $OUT/pprof/bursts.jsonl.
profile() {
  local mode=$1 dir=$OUT/pprof pids=() n=0 p
  mkdir -p "$dir"
  unregister
  register "$mode"
  cpu_profile "$APISERVER_URL" "$dir/kube-apiserver-$mode.pprof" &
  pids+=($!)
  case $mode in
    noop) cpu_profile "http://$NOOP_METRICS" "$dir/noopwebhook-$mode.pprof" & pids+=($!) ;;
    noop-patch) cpu_profile "http://$NOOP_PATCH_METRICS" "$dir/noopwebhook-patch-$mode.pprof" & pids+=($!) ;;
    spreadguard)
      # It serves no pprof: perf samples it instead, with the call stacks
      # Go's frame pointers give.
      if perf_usable; then
        perf record -q -F 499 -g -p "$WEBHOOK_PID" -o "$dir/spreadguard-webhook-$mode.perf.data" -- sleep "$PPROF_SECONDS" \
          >"$dir/perf-record.log" 2>&1 &
        pids+=($!)
      else
        log "perf is not installed or may not sample: no profile of spreadguard-webhook"
      fi
      ;;
  esac
  profiling() {
    local p
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
    return 1
  }
  while profiling; do
    burst "$mode" "$dir/bursts.jsonl"
    n=$((n + 1))
  done
  for p in "${pids[@]}"; do
    wait "$p" || die "a CPU profile taken during the webhook=$mode bursts failed (see $dir)"
  done
  if [[ -f $dir/spreadguard-webhook-$mode.perf.data ]]; then
    # Now, while the binary whose symbols it names is still there.
    perf report -i "$dir/spreadguard-webhook-$mode.perf.data" --stdio --no-children --sort symbol --percent-limit 0.5 -g none \
      >"$dir/spreadguard-webhook-$mode.perf.txt" 2>/dev/null || log "perf report of spreadguard-webhook failed"
  fi
  log "profiled webhook=$mode during $n bursts: $(cd "$dir" && ls -- *"-$mode".* | tr '\n' ' ')"
}

# profiles profiles each mode of PPROF_MODES in turn, into a new $OUT/pprof.
profiles() {
  local m
  rm -rf "$OUT/pprof"
  for m in $PPROF_MODES; do
    profile "$m"
  done
  unregister
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
  start_noop_patch
  sleep 30
  local rss_idle
  rss_idle=$(memory)

  local modes=(none noop noop-patch spreadguard) loads=()
  for r in $(seq 1 "$ROUNDS"); do
    for i in "${!modes[@]}"; do
      local mode=${modes[(r - 1 + i) % ${#modes[@]}]}
      log "round $r/$ROUNDS: $BURST creates, $PARALLEL parallel, webhook=$mode"
      unregister
      if [[ $mode != none ]]; then register "$mode"; fi
      burst "$mode"
    done
    loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  done
  unregister
  local rss_after decided
  rss_after=$(memory)
  decided=$(decisions)
  [[ $PPROF != 1 ]] || profiles

  {
    echo "spreadguard bench-scale, $(date -u +%FT%TZ), commit $COMMIT"
    echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "cluster: $NODES nodes ($ready_nodes Ready), $((NODES * PODS_PER_NODE)) $POD_SIZE pods + the local cluster's own; filled in ${fill_seconds}s, kwok settled: $settled (${settle_seconds}s)"
    echo "webhook: ready (caches synced) ${WEBHOOK_READY_SECONDS}s after start"
    echo "webhook memory: idle after sync: $rss_idle; after the bursts: $rss_after"
    echo "control plane after the fill: $cp_filled"
    echo "control plane after the bursts: $(control_plane_memory)"
    echo "bursts: dry-run=$([[ $DRY_RUN == 1 ]] && echo yes || echo no); 1-minute load average after each round: ${loads[*]}"
    echo "noop-patch: $PATCH_NOTE ($PATCH_FILE)"
    "$DIR/perfload" summarize "$OUT/bursts.jsonl"
    echo "webhook's own decision time (spreadguard_admission_decision_duration_seconds):"
    echo "$decided"
    [[ $PPROF != 1 ]] || echo "CPU profiles during webhook=${PPROF_MODES// /, webhook=} bursts: $OUT/pprof"
  } | tee "$OUT/summary.txt"
}

case ${1:-run} in
  run) main ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown command \"$1\" (want run)" ;;
esac
