#!/usr/bin/env bash
# ensure-docker.sh makes a Docker engine answer, and stops it again only if it
# was this script that started it.
#
#   hack/kind-without-registry/ensure-docker.sh start   install Debian's docker.io when dockerd is
#                                      missing, start dockerd when `docker info`
#                                      fails, and record that it did so
#   hack/kind-without-registry/ensure-docker.sh stop    stop the dockerd that `start` started
#                                      (no-op when it found one running)
#
# Why by hand: the machines this project is tested on are VMs without systemd
# as PID 1, so `apt-get install docker.io` leaves the daemon stopped.
# State lives in $KIND_STATE (default bin/.kind): dockerd.pid and dockerd.log.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../lib/common.sh
source "$ROOT/hack/lib/common.sh"
STATE=${KIND_STATE:-$ROOT/bin/.kind}
PIDFILE=$STATE/dockerd.pid
LOG=$STATE/dockerd.log

answers() { docker info >/dev/null 2>&1; }

start() {
  mkdir -p "$STATE"
  if answers; then
    log "a Docker engine is already running; leaving it alone"
    return
  fi
  if ! command -v dockerd >/dev/null; then
    [[ $(id -u) == 0 ]] || die "dockerd is not installed and installing it needs root"
    log "installing Debian's docker.io"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null
  fi
  command -v docker >/dev/null || die "docker (the client) is not on PATH after installing docker.io"
  log "starting dockerd (log: $LOG)"
  # setsid: a Ctrl-C in the make that started it must not kill the engine
  # under a cluster that the cleanup still has to delete.
  setsid dockerd >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  dockerd_answers() {
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { log_tail "$LOG"; rm -f "$PIDFILE"; die "dockerd exited (log above)"; }
    answers
  }
  wait_until 60 dockerd_answers || die "dockerd does not answer 60s after its start (log: $LOG)"
  log "dockerd is up (pid $(cat "$PIDFILE"))"
}

stop() {
  [[ -f $PIDFILE ]] || { log "dockerd was not started here; leaving it alone"; return; }
  local pid
  pid=$(cat "$PIDFILE")
  if kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]]; then
    log "stopping dockerd (pid $pid)"
    kill -TERM "$pid"
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null; do
      ((SECONDS < deadline)) || { log "dockerd ignores SIGTERM after 30s; sending SIGKILL"; kill -KILL "$pid"; break; }
      sleep 0.5
    done
  fi
  rm -f "$PIDFILE"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop" ;;
esac
