#!/usr/bin/env bash
# bench-scale.sh is `make bench-scale`: spreadguard's webhook measured against
# a real control plane holding a large cluster.
#
#   hack/bench-scale.sh            the three modes below
#   hack/bench-scale.sh replicas   BENCH_SCALE_REPLICAS replicas behind a Service
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
# BENCH_SCALE_PARALLEL clients, or started at BENCH_SCALE_RATE a second
# whatever the answers, when that is set) BENCH_SCALE_ROUNDS times in each of four
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
# webhook began per burst, kube-apiserver's mean time per call of a
# mutating and of a validating webhook (its own measure, from sending the
# review to reading the answer), the CPU time per create of the webhook and
# of kube-apiserver, the garbage collections each completed in each burst
# (with, for each, the median p99 of the rounds in which it collected and of
# those in which it did not), and, over all rounds pooled, what each webhook
# adds to webhook=none and the ratios of spreadguard's addition to the
# no-op's and to the patching no-op's, with the 90% interval of each ratio
# over the rounds resampled. Last, the webhook's resident memory (VmRSS,
# VmHWM) and its own decision-time metric.
#
# The script starts processes; perfload measures and sums up. Each moment
# the summary reports on (the cluster filled, the webhook ready and idle,
# after each round, after the rounds) is a `perfload sample` line in
# $OUT/samples.jsonl (/proc/PID/stat and status, cgroup cpu.stat, the
# processes' /metrics, kube-apiserver's watches), and `perfload summarize
# --samples` turns the samples and the bursts into summary.txt.
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
# bursts.jsonl, samples.jsonl, noop-patch.json, webhook.log, noopwebhook*.log, cluster.log,
# logs/ (one file per control-plane component) and pprof/, kept when the run
# fails too.
#
# `replicas` fills the same cluster, with kube-apiserver started with
# --enable-aggregator-routing, then starts spreadguard replicas one after the
# other behind one Service (a Service without selector and an EndpointSlice
# per replica, on the host's address), and after each start measures
# BENCH_SCALE_ROUNDS bursts: per replica the reviews it answered, its CPU time
# per review (from /proc/PID/stat) and its RSS; the create latency; and the
# WATCH requests kube-apiserver serves with 0, 1, 2... replicas. Its results
# go to _output/bench-replicas unless BENCH_SCALE_OUT says otherwise.
#
# Environment (defaults in brackets):
#   BENCH_SCALE_NODES [5000]  BENCH_SCALE_PODS_PER_NODE [30]
#   BENCH_SCALE_BURST [1000]  BENCH_SCALE_PARALLEL [8]  BENCH_SCALE_ROUNDS [5]
#   BENCH_SCALE_RATE [unset]  creates started per second in the four modes'
#                            bursts (an open loop, as users' creates arrive),
#                            in place of BENCH_SCALE_PARALLEL clients, which
#                            keep the API server saturated: what a create
#                            waits then is mostly the queue the clients fill
#   BENCH_SCALE_DRY_RUN [1]   BENCH_SCALE_WORKERS [32] BENCH_SCALE_QPS [2000]
#   BENCH_SCALE_SETTLE_TIMEOUT [30m]  how long to wait for kwok to mark every pod Running
#   BENCH_SCALE_ETCD_QUOTA [8589934592]  etcd's backend quota in bytes
#   BENCH_SCALE_KWOK_POD_PARALLELISM [32]  pods kwok moves at once (see
#                            LOCAL_CLUSTER_KWOK_POD_PARALLELISM); kwok's own 4
#                            takes an hour to mark 150,000 pods Running
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
#   BENCH_SCALE_WEBHOOK_GOGC, BENCH_SCALE_WEBHOOK_GOMEMLIMIT [Go's defaults]
#                            GOGC and GOMEMLIMIT of spreadguard-webhook alone
#                            (the chart's goRuntime.gogc and goRuntime.memoryLimit)
#   BENCH_SCALE_REPLICAS [2]  BENCH_SCALE_HOST_IP [the first non-loopback IPv4 address]  for replicas
#   BENCH_SCALE_REPLICA_CPU [unset]  for replicas: each replica's CPU limit, in
#                            millicores ("100m") or whole cores ("1"), enforced
#                            as the kubelet enforces a container's
#                            limits.cpu: a CFS quota per 100 ms on a cgroup of
#                            its own (cgroup v2 cpu.max, or v1
#                            cpu.cfs_quota_us; needs a writable cpu
#                            controller), from when the replica is ready
#                            (its caches' first sync runs unlimited). With
#                            it the replicas, not kube-apiserver, can be
#                            the limit of the throughput on a small machine.
#   BENCH_SCALE_IDLE_SECONDS [20]  for replicas: before each phase's bursts, how
#                            long to measure each replica's CPU without a review
#   BENCH_SCALE_OUT, BIN, and those of hack/local-cluster.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
NODES=${BENCH_SCALE_NODES:-5000}
PODS_PER_NODE=${BENCH_SCALE_PODS_PER_NODE:-30}
BURST=${BENCH_SCALE_BURST:-1000}
PARALLEL=${BENCH_SCALE_PARALLEL:-8}
RATE=${BENCH_SCALE_RATE:-}
LOAD=${RATE:+$RATE/s, open loop}
LOAD=${LOAD:-$PARALLEL parallel}
ROUNDS=${BENCH_SCALE_ROUNDS:-5}
DRY_RUN=${BENCH_SCALE_DRY_RUN:-1}
WORKERS=${BENCH_SCALE_WORKERS:-32}
QPS=${BENCH_SCALE_QPS:-2000}
SETTLE_TIMEOUT=${BENCH_SCALE_SETTLE_TIMEOUT:-30m}
ETCD_QUOTA=${BENCH_SCALE_ETCD_QUOTA:-8589934592}
WEBHOOK_GOGC=${BENCH_SCALE_WEBHOOK_GOGC:-}
WEBHOOK_GOMEMLIMIT=${BENCH_SCALE_WEBHOOK_GOMEMLIMIT:-}
KWOK_POD_PARALLELISM=${BENCH_SCALE_KWOK_POD_PARALLELISM:-32}
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
    if [[ -n ${LOCAL_CLUSTER_ETCD_PID:-} && -x $DIR/perfload ]]; then
      "$DIR/perfload" sample --tag failed $(control_plane) >/dev/null || true
    fi
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
  export LOCAL_CLUSTER_KWOK_POD_PARALLELISM=$KWOK_POD_PARALLELISM
  "$ROOT/hack/local-cluster.sh" run >"$DIR/cluster.log" 2>&1 &
  CLUSTER_PID=$!
  until [[ -f $LOCAL_CLUSTER_ENV ]]; do
    kill -0 "$CLUSTER_PID" 2>/dev/null || { LOG_TAIL_LINES=60 log_tail "$DIR/cluster.log"; CLUSTER_PID=; die "the local cluster did not start"; }
    sleep 1
  done
  # shellcheck disable=SC1090
  source "$LOCAL_CLUSTER_ENV"
  export KUBECONFIG
  k apply -f "$ROOT/charts/spreadguard/files/crds" >/dev/null
  k wait --for condition=established --timeout=120s -f "$ROOT/charts/spreadguard/files/crds" >/dev/null
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

# counter URL NAME prints the counter NAME at the /metrics URL, summed over
# its series.
counter() { "$DIR/perfload" metric --url "$1" "$2"; }

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
  env ${WEBHOOK_GOGC:+GOGC="$WEBHOOK_GOGC"} ${WEBHOOK_GOMEMLIMIT:+GOMEMLIMIT="$WEBHOOK_GOMEMLIMIT"} \
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

# sample TAG [FLAG...] appends what perfload sample reads, with FLAGs, to
# $OUT/samples.jsonl; its line for people goes to the log.
sample() {
  local tag=$1
  shift
  "$DIR/perfload" sample --tag "$tag" --out "$OUT/samples.jsonl" "$@"
}

# control_plane prints the flags of perfload sample that read kube-apiserver
# and etcd: their memory, and the size of etcd's database.
control_plane() {
  echo "--process kube-apiserver=$LOCAL_CLUSTER_APISERVER_PID --process etcd=$LOCAL_CLUSTER_ETCD_PID --metrics etcd=$ETCD_URL/metrics"
}

# burst MODE [FILE] measures one burst with the webhooks of MODE registered;
# its line goes to FILE (default $OUT/bursts.jsonl).
burst() {
  local mode=$1 file=${2:-$OUT/bursts.jsonl} expect=none
  local args=(--nodes "$NODES" --pods-per-node "$PODS_PER_NODE" --pods "$BURST" --tag "webhook=$mode"
    --apiserver-webhook-calls)
  if [[ -n $RATE ]]; then args+=(--rate "$RATE"); else args+=(--parallel "$PARALLEL"); fi
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

# fill_cluster fills the running cluster and waits for kwok to mark its pods
# Running; it sets fill_seconds, settled and settle_seconds for the summary,
# and samples the control plane.
fill_cluster() {
  log "filling: $NODES nodes, $((NODES * PODS_PER_NODE)) $POD_SIZE pods"
  local t=$SECONDS
  "$DIR/perfload" fill --nodes "$NODES" --pods-per-node "$PODS_PER_NODE" --workers "$WORKERS" --qps "$QPS" --pod-size "$POD_SIZE"
  fill_seconds=$((SECONDS - t))
  log "waiting for kwok to mark every pod Running (at most $SETTLE_TIMEOUT)"
  t=$SECONDS
  settled=yes
  "$DIR/perfload" wait-running --timeout "$SETTLE_TIMEOUT" || settled="no, after $SETTLE_TIMEOUT"
  settle_seconds=$((SECONDS - t))
  # shellcheck disable=SC2046
  sample filled --ready-nodes $(control_plane)
}

main() {
  preflight
  mkdir -p "$OUT"
  : >"$OUT/bursts.jsonl"
  : >"$OUT/samples.jsonl"
  DIR=$(mktemp -d "${TMPDIR:-/tmp}/spreadguard-bench-scale.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  build
  log "starting the local cluster"
  start_cluster

  fill_cluster

  log "starting spreadguard-webhook and noopwebhook"
  start_noop
  start_webhook
  log "webhook ready after ${WEBHOOK_READY_SECONDS}s"
  sample ready --process "webhook=$WEBHOOK_PID"
  start_noop_patch
  sleep 30
  sample idle --process "webhook=$WEBHOOK_PID"

  local modes=(none noop noop-patch spreadguard)
  for r in $(seq 1 "$ROUNDS"); do
    for i in "${!modes[@]}"; do
      local mode=${modes[(r - 1 + i) % ${#modes[@]}]}
      log "round $r/$ROUNDS: $BURST creates, $LOAD, webhook=$mode"
      unregister
      if [[ $mode != none ]]; then register "$mode"; fi
      burst "$mode"
    done
    sample round
  done
  unregister
  # shellcheck disable=SC2046
  sample after --process "webhook=$WEBHOOK_PID" --metrics "webhook=http://$METRICS_ADDRESS/metrics" $(control_plane)
  [[ $PPROF != 1 ]] || profiles

  {
    echo "spreadguard bench-scale, $(date -u +%FT%TZ), commit $COMMIT"
    echo "cluster: $NODES nodes, $((NODES * PODS_PER_NODE)) $POD_SIZE pods + the local cluster's own; filled in ${fill_seconds}s, kwok settled: $settled (${settle_seconds}s, $KWOK_POD_PARALLELISM pods at once); etcd quota $((ETCD_QUOTA / 1048576)) MiB"
    echo "webhook: ready (caches synced) ${WEBHOOK_READY_SECONDS}s after start; GOGC=${WEBHOOK_GOGC:-default} GOMEMLIMIT=${WEBHOOK_GOMEMLIMIT:-default}"
    echo "bursts: dry-run=$([[ $DRY_RUN == 1 ]] && echo yes || echo no)"
    echo "noop-patch: $PATCH_NOTE ($PATCH_FILE)"
    [[ $PPROF != 1 ]] || echo "CPU profiles during webhook=${PPROF_MODES// /, webhook=} bursts: $OUT/pprof"
    "$DIR/perfload" summarize --samples "$OUT/samples.jsonl" "$OUT/bursts.jsonl"
  } | tee "$OUT/summary.txt"
}

# ---------------------------------------------------------------- replicas
#
# `hack/bench-scale.sh replicas` runs BENCH_SCALE_REPLICAS spreadguard
# replicas behind one Service, as the chart does in a cluster, and measures
# what each one serves and costs. kube-apiserver is started with
# --enable-aggregator-routing (LOCAL_CLUSTER_AGGREGATOR_ROUTING=1 of
# hack/local-cluster.sh): it then resolves a webhook's Service to one of the
# endpoints of the Service's EndpointSlices, at random, for each request (v1.37:
# cmd/kube-apiserver/app/server.go buildServiceResolver,
# staging/src/k8s.io/apiserver/pkg/util/webhook/client.go with the
# WebhookRoundTripLoadBalancing gate, beta and on), instead of its cluster IP,
# which nothing routes here without kube-proxy. The Service has no selector;
# each replica is a process on the host's non-loopback address (endpoints may
# not be loopback ones) and its port is listed in an EndpointSlice of its own,
# added once the replica is ready. The serving certificate names the Service
# (spreadguard.spreadguard-system.svc), the name the API server checks.
# Two replicas share the reviews evenly; from three on they do not: the
# resolver (RandomEndpoint in staging/src/k8s.io/apiserver/pkg/util/proxy/
# proxy.go) shuffles the slices with sort.Slice and a comparator that looks
# up a random permutation by the positions it is comparing, not by the
# slices, which puts the slice sorted first first half of the time (with
# three slices: 1/2, 1/3, 1/6 in a simulation of that code). One slice with
# an endpoint per address would be even, but needs an address per replica.

REPLICA_SERVICE=$RELEASE
REPLICA_PIDS=()
REPLICA_PORTS=()
REPLICA_METRICS=()
REPLICA_READY=()
REPLICA_CGROUPS=()
HOST_IP=
# REPLICA_CPU_QUOTA is each replica's CFS quota in microseconds per 100 ms
# period, from BENCH_SCALE_REPLICA_CPU; empty for no limit.
REPLICA_CPU_QUOTA=
IDLE_SECONDS=${BENCH_SCALE_IDLE_SECONDS:-20}
CPU_CGROUP_VERSION=
CPU_CGROUP_ROOT=

# replicas_cleanup stops the replicas, keeps their logs, then cleans up as
# the other commands do.
replicas_cleanup() {
  local rc=$? pid i
  for i in "${!REPLICA_PIDS[@]}"; do
    pid=${REPLICA_PIDS[i]}
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [[ -n $DIR && -f $DIR/replica-$i.log ]]; then cp "$DIR/replica-$i.log" "$OUT/" 2>/dev/null || true; fi
  done
  for i in "${!REPLICA_CGROUPS[@]}"; do
    rmdir "${REPLICA_CGROUPS[i]}" 2>/dev/null || true
  done
  # cleanup reads the exit status from $?; a function sets it without the
  # subshell of (exit), which would run this trap again.
  if ((rc == 0)); then cleanup; else status "$rc" || cleanup; fi
}

status() { return "$1"; }

# replicas_host_ip sets HOST_IP to BENCH_SCALE_HOST_IP or the host's first
# IPv4 address that is not a loopback one.
replicas_host_ip() {
  local ip
  HOST_IP=${BENCH_SCALE_HOST_IP:-}
  if [[ -z $HOST_IP ]]; then
    for ip in $(hostname -I 2>/dev/null); do
      if [[ $ip =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ && $ip != 127.* ]]; then
        HOST_IP=$ip
        break
      fi
    done
  fi
  [[ -n $HOST_IP ]] || die "found no IPv4 address of this host outside 127.0.0.0/8; name one with BENCH_SCALE_HOST_IP"
}

# replicas_cpu_limit reads BENCH_SCALE_REPLICA_CPU into REPLICA_CPU_QUOTA
# and finds where to make the replicas' cgroups: cgroup v2's root when it
# hands the cpu controller to its children, else the hierarchy of cgroup
# v1's cpu controller.
replicas_cpu_limit() {
  local limit=${BENCH_SCALE_REPLICA_CPU:-} millicores
  [[ -n $limit ]] || return 0
  if [[ $limit =~ ^([1-9][0-9]*)m$ ]]; then
    millicores=${BASH_REMATCH[1]}
  elif [[ $limit =~ ^[1-9][0-9]*$ ]]; then
    millicores=$((limit * 1000))
  else
    die "BENCH_SCALE_REPLICA_CPU=$limit: want millicores (\"250m\") or whole cores (\"1\")"
  fi
  # The kubelet's conversion (MilliCPUToQuota): quota = millicores x period / 1000.
  REPLICA_CPU_QUOTA=$((millicores * 100))
  ((REPLICA_CPU_QUOTA >= 1000)) || die "BENCH_SCALE_REPLICA_CPU=$limit: at least 10m, the kernel's smallest quota of 1 ms per period"
  if [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control; then
    CPU_CGROUP_VERSION=2 CPU_CGROUP_ROOT=/sys/fs/cgroup
  else
    CPU_CGROUP_VERSION=1
    CPU_CGROUP_ROOT=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
    [[ -n $CPU_CGROUP_ROOT && -w $CPU_CGROUP_ROOT/cpu.cfs_quota_us ]] ||
      die "BENCH_SCALE_REPLICA_CPU needs a writable cgroup cpu controller (cgroup v2 with cpu in /sys/fs/cgroup/cgroup.subtree_control, or a v1 cpu hierarchy): found neither; run as root, or leave it unset"
  fi
}

# replica_cgroup I makes replica I's cgroup with REPLICA_CPU_QUOTA and
# prints its directory.
replica_cgroup() {
  local cg=$CPU_CGROUP_ROOT/spreadguard-bench-$$-replica-$1
  mkdir "$cg" || die "cannot make the cgroup $cg"
  if [[ $CPU_CGROUP_VERSION == 2 ]]; then
    echo "$REPLICA_CPU_QUOTA 100000" >"$cg/cpu.max"
  else
    echo 100000 >"$cg/cpu.cfs_period_us"
    echo "$REPLICA_CPU_QUOTA" >"$cg/cpu.cfs_quota_us"
  fi
  echo "$cg"
}

# replicas_certs reissues the serving certificate for the Service's name too.
replicas_certs() {
  (cd "$ROOT" && go run ./hack/certs -dir "$DIR/certs" \
    -hosts "localhost,127.0.0.1,::1,$REPLICA_SERVICE.$RELEASE_NAMESPACE.svc" >/dev/null)
}

# replicas_service creates the Service the webhook configurations name,
# without a selector: its endpoints are the EndpointSlices of replica_endpoint.
replicas_service() {
  k apply -f - >/dev/null <<EOM
apiVersion: v1
kind: Namespace
metadata: {name: $RELEASE_NAMESPACE}
---
apiVersion: v1
kind: Service
metadata: {name: $REPLICA_SERVICE, namespace: $RELEASE_NAMESPACE}
spec:
  ports: [{name: https, port: 443, protocol: TCP}]
EOM
}

# replica_endpoint I lists replica I in an EndpointSlice of the Service.
# One slice per replica, as the replicas share an address and a slice
# carries one port list for all its endpoints.
replica_endpoint() {
  k apply -f - >/dev/null <<EOM
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $REPLICA_SERVICE-replica-$1
  namespace: $RELEASE_NAMESPACE
  labels:
    kubernetes.io/service-name: $REPLICA_SERVICE
    endpointslice.kubernetes.io/managed-by: bench-scale.spreadguard.io
addressType: IPv4
ports: [{name: https, port: ${REPLICA_PORTS[$1]}, protocol: TCP}]
endpoints: [{addresses: ["$HOST_IP"], conditions: {ready: true}}]
EOM
}

# replicas_register applies the chart's two webhook configurations in
# Service mode, with the CA of $DIR/certs instead of the chart's own.
replicas_register() {
  local ca configs
  ca=$(base64 <"$DIR/certs/ca.crt" | tr -d '\n')
  configs=$("$BIN/helm" template "$RELEASE" "$ROOT/charts/spreadguard" --namespace "$RELEASE_NAMESPACE" \
    --show-only templates/webhook-mutatingwebhookconfiguration.yaml \
    --show-only templates/webhook-validatingwebhookconfiguration.yaml |
    sed "s|^\([[:space:]]*caBundle:\).*|\1 $ca|")
  [[ $(grep -c "service:" <<<"$configs") -eq $(grep -c "caBundle: $ca" <<<"$configs") ]] ||
    die "the chart's webhook configurations do not have one caBundle per Service reference"
  k apply -f - >/dev/null <<<"$configs"
  wait_until 120 replicas_called || die "the API server does not call spreadguard through its Service 120s after registering it"
}

replicas_called() { [[ $(probe) == *denied* ]]; }

# reviews I prints the reviews replica I has answered.
reviews() { counter "http://${REPLICA_METRICS[$1]}/metrics" spreadguard_admission_requests_total; }

# replica_serves I succeeds once a probe reached replica I.
replica_serves() {
  local before
  before=$(reviews "$1")
  probe >/dev/null
  (($(reviews "$1") > before))
}

# replica_flags N prints the flags of perfload sample that read replicas 1..N:
# their process, their /metrics and, under a CPU limit, their cgroup.
replica_flags() {
  local i
  for ((i = 1; i <= $1; i++)); do
    printf -- '--process replica-%d=%s --metrics replica-%d=http://%s/metrics ' "$i" "${REPLICA_PIDS[i]}" "$i" "${REPLICA_METRICS[i]}"
    [[ -z ${REPLICA_CGROUPS[i]:-} ]] || printf -- '--cgroup replica-%d=%s ' "$i" "${REPLICA_CGROUPS[i]}"
  done
}

# crds_watched succeeds once something watches each of spreadguard's
# CRDs: kube-controller-manager's garbage collector watches every
# resource, and finds new ones in its discovery resync, every 30 seconds.
# Until then a replica's count would take in the collector's watches.
crds_watched() {
  local watches crd
  watches=$("$DIR/perfload" watches)
  for crd in "$ROOT"/charts/spreadguard/files/crds/*.yaml; do
    crd=${crd##*/}
    crd=${crd%.yaml}
    [[ $watches == *"${crd%%_*}/${crd#*_} "* ]] || return 1
  done
}

# start_replica I starts replica I on HOST_IP, waits until its caches have
# synced and lists it in the Service's endpoints.
start_replica() {
  local i=$1 port metrics probe_port start=$SECONDS
  free_port port
  free_port metrics
  free_port probe_port
  REPLICA_PORTS[i]=$port
  REPLICA_METRICS[i]=127.0.0.1:$metrics
  "$DIR/spreadguard-webhook" --kubeconfig "$KUBECONFIG" --host "$HOST_IP" --port "$port" --cert-dir "$DIR/certs" \
    --metrics-bind-address "127.0.0.1:$metrics" --metrics-secure=false --health-probe-bind-address "127.0.0.1:$probe_port" \
    --default-action Deny --log-level info >"$DIR/replica-$i.log" 2>&1 </dev/null &
  REPLICA_PIDS[i]=$!
  wait_url "http://127.0.0.1:$probe_port/readyz" "$READY_TIMEOUT" "spreadguard replica $i" "${REPLICA_PIDS[i]}" "$DIR/replica-$i.log"
  REPLICA_READY[i]=$((SECONDS - start))
  log "replica $i (pid ${REPLICA_PIDS[i]}, $HOST_IP:$port) ready after ${REPLICA_READY[i]}s"
  sample ready --phase "replicas=$i" --process "replica-$i=${REPLICA_PIDS[i]}"
  if [[ -n $REPLICA_CPU_QUOTA ]]; then
    # Limited once ready, so that its caches' first list (tens of seconds of
    # CPU at 5,000 nodes) does not stretch each start; writing the process
    # to cgroup.procs moves all its threads.
    REPLICA_CGROUPS[i]=$(replica_cgroup "$i")
    echo "${REPLICA_PIDS[i]}" >"${REPLICA_CGROUPS[i]}/cgroup.procs"
    log "replica $i limited to $BENCH_SCALE_REPLICA_CPU of CPU (${REPLICA_CGROUPS[i]})"
  fi
}

# replicas_idle N samples replicas 1..N before and after
# BENCH_SCALE_IDLE_SECONDS without a review: what their informers cost,
# which a replica pays whatever its share of the reviews.
replicas_idle() {
  # shellcheck disable=SC2046
  sample idle-start --phase "replicas=$1" $(replica_flags "$1")
  sleep "$IDLE_SECONDS"
  # shellcheck disable=SC2046
  sample idle-end --phase "replicas=$1" $(replica_flags "$1")
}

# replicas_bursts N measures BENCH_SCALE_ROUNDS bursts with replicas 1..N
# serving, and samples the replicas before and after them: the reviews each
# answered, the TLS handshakes it began, its CPU time, memory and throttling.
replicas_bursts() {
  local n=$1 r args
  args=(--nodes "$NODES" --pods-per-node "$PODS_PER_NODE" --pods "$BURST" --parallel "$PARALLEL"
    --tag "replicas=$n" --expect-mutated all)
  [[ $DRY_RUN == 1 ]] && args+=(--dry-run)
  # shellcheck disable=SC2046
  sample bursts-start --phase "replicas=$n" $(replica_flags "$n")
  for r in $(seq 1 "$ROUNDS"); do
    log "replicas=$n, round $r/$ROUNDS: $BURST creates, $PARALLEL parallel"
    "$DIR/perfload" burst "${args[@]}" | tee -a "$OUT/bursts.jsonl" | sed 's/,"latenciesMs":\[[^]]*\]//' >&2
    if [[ $DRY_RUN != 1 ]]; then
      k delete pods -A -l spreadguard.io/perf-burst=1 --wait=true --timeout=10m >/dev/null
    fi
  done
  # shellcheck disable=SC2046
  sample bursts-end --phase "replicas=$n" $(replica_flags "$n")
}

replicas_main() {
  OUT=${BENCH_SCALE_OUT:-$ROOT/_output/bench-replicas}
  local replicas=${BENCH_SCALE_REPLICAS:-2}
  [[ $replicas =~ ^[1-9][0-9]*$ ]] || die "BENCH_SCALE_REPLICAS must be a number of at least 1"
  [[ $IDLE_SECONDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_SCALE_IDLE_SECONDS must be a number of seconds, at least 1"
  preflight
  replicas_host_ip
  replicas_cpu_limit
  mkdir -p "$OUT"
  : >"$OUT/bursts.jsonl"
  : >"$OUT/samples.jsonl"
  DIR=$(mktemp -d "${TMPDIR:-/tmp}/spreadguard-bench-replicas.XXXXXX")
  trap replicas_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  build
  replicas_certs
  log "starting the local cluster, kube-apiserver with --enable-aggregator-routing"
  LOCAL_CLUSTER_AGGREGATOR_ROUTING=1 start_cluster
  fill_cluster
  replicas_service
  wait_until 90 crds_watched || log "warning: no watch of spreadguard's CRDs 90s after they were created: the first replica's count may take in the garbage collector's"

  local i
  for ((i = 1; i <= replicas; i++)); do
    # Sampled just before and after the start, so that another
    # component's watches coming and going meanwhile are unlikely; each
    # once the count has stayed the same for 5 seconds, as an informer
    # that was just started may still be opening its watch.
    sample watches-before --phase "replicas=$i" --apiserver-watches --settle
    start_replica "$i"
    sample watches --phase "replicas=$i" --apiserver-watches --settle
    replica_endpoint "$i"
    if ((i == 1)); then
      replicas_register
    else
      wait_until 120 replica_serves "$i" || die "replica $i got no review 120s after its EndpointSlice was created"
    fi
    replicas_idle "$i"
    replicas_bursts "$i"
  done

  {
    echo "spreadguard bench-scale replicas, $(date -u +%FT%TZ), commit $COMMIT"
    echo "cluster: $NODES nodes, $((NODES * PODS_PER_NODE)) $POD_SIZE pods + the local cluster's own; filled in ${fill_seconds}s, kwok settled: $settled (${settle_seconds}s, $KWOK_POD_PARALLELISM pods at once)"
    echo "replicas: on $HOST_IP, behind Service $RELEASE_NAMESPACE/$REPLICA_SERVICE, CPU limit ${BENCH_SCALE_REPLICA_CPU:-none}${REPLICA_CPU_QUOTA:+ (a quota of $REPLICA_CPU_QUOTA µs per 100 ms, cgroup v$CPU_CGROUP_VERSION)}"
    for ((i = 1; i <= replicas; i++)); do
      echo "  replica $i: port ${REPLICA_PORTS[i]}, caches synced ${REPLICA_READY[i]}s after start"
    done
    echo "bursts: dry-run=$([[ $DRY_RUN == 1 ]] && echo yes || echo no)"
    "$DIR/perfload" summarize --samples "$OUT/samples.jsonl" "$OUT/bursts.jsonl"
  } | tee "$OUT/summary.txt"
}

case ${1:-run} in
  run) main ;;
  replicas) replicas_main ;;
  -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
  *) die "unknown command \"$1\" (want run or replicas)" ;;
esac
