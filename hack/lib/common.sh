# common.sh: what every hack/ script shares: logging, free ports on
# 127.0.0.1, waiting for a condition or a URL with a timeout, and running a
# step with its output in a log file that is shown when the step fails.
# Sourced; it only defines functions and variables.
#
# Log lines are prefixed with HACK_NAME (default: the script's file name
# without .sh); set it before sourcing to choose another. HACK_LOG_TIME=1
# adds the UTC time to each line.

HACK_NAME=${HACK_NAME:-$(basename "${0%.sh}")}
# LOG_TAIL_LINES is how much of a log a failure shows.
LOG_TAIL_LINES=${LOG_TAIL_LINES:-40}

log() {
  if [[ ${HACK_LOG_TIME:-} == 1 ]]; then
    printf '[%s] %s %s\n' "$HACK_NAME" "$(date -u +%T)" "$*" >&2
  else
    printf '[%s] %s\n' "$HACK_NAME" "$*" >&2
  fi
}

die() { printf '[%s] error: %s\n' "$HACK_NAME" "$*" >&2; exit 1; }

# log_tail LOG prints the last LOG_TAIL_LINES lines of LOG to stderr.
log_tail() {
  [[ -s $1 ]] || { printf '[%s] (%s is empty or missing)\n' "$HACK_NAME" "$1" >&2; return 0; }
  printf -- '----- last %s lines of %s -----\n' "$LOG_TAIL_LINES" "$1" >&2
  tail -n "$LOG_TAIL_LINES" "$1" >&2
  printf -- '----- end of %s -----\n' "$1" >&2
}

# run_logged LOG WHAT CMD... runs CMD with its output in LOG (replaced). When
# CMD fails it says which step failed, prints the end of LOG and exits with
# CMD's status, so that a failed step is never silent.
run_logged() {
  local logfile=$1 what=$2 rc=0
  shift 2
  mkdir -p "$(dirname "$logfile")"
  "$@" >"$logfile" 2>&1 || rc=$?
  ((rc == 0)) && return 0
  printf '[%s] error: %s failed (exit status %d): %s\n' "$HACK_NAME" "$what" "$rc" "$*" >&2
  log_tail "$logfile"
  exit "$rc"
}

# port_in_use PORT succeeds when something listens on 127.0.0.1:PORT.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# USED_PORTS are the ports handed out by free_port (or claimed by the caller
# with USED_PORTS+="PORT "), so that two calls never return the same one
# before anything listens on it.
USED_PORTS=" "

# free_port VAR sets VAR to a port on 127.0.0.1 nothing listens on, below
# the ephemeral range.
free_port() {
  # The local's name must not be one a caller passes as VAR.
  local _free_port
  for _ in $(seq 1 100); do
    _free_port=$((20000 + RANDOM % 12000))
    [[ $USED_PORTS == *" $_free_port "* ]] && continue
    if ! port_in_use "$_free_port"; then
      USED_PORTS+="$_free_port "
      printf -v "$1" '%s' "$_free_port"
      return
    fi
  done
  die "found no free port on 127.0.0.1"
}

# wait_until TIMEOUT CMD... runs CMD every half second until it succeeds
# (status 0) or TIMEOUT seconds have passed (status 1). CMD's output is
# kept, so that a CMD can say why it ends the wait: it runs in this shell,
# and one that must stop early (a process it depends on died) can die.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# wait_url URL TIMEOUT WHAT [PID LOG] waits until GET URL answers (through
# $BIN/kubectl, which every script has). When PID is given and exits first,
# or after TIMEOUT seconds, it prints the end of LOG and dies.
wait_url() {
  local url=$1 timeout=$2 what=$3 pid=${4:-} logfile=${5:-}
  [[ $url =~ ^([a-z]+://[^/]+)(/.*)?$ ]] || die "wait_url: $url is not scheme://host:port/path"
  local server=${BASH_REMATCH[1]} path=${BASH_REMATCH[2]:-/}
  local deadline=$((SECONDS + timeout))
  until "${BIN:?}/kubectl" --server="$server" --request-timeout=3s get --raw "$path" >/dev/null 2>&1; do
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
      [[ -z $logfile ]] || log_tail "$logfile"
      die "$what exited${logfile:+ (log: $logfile)}"
    fi
    if ((SECONDS >= deadline)); then
      [[ -z $logfile ]] || log_tail "$logfile"
      die "$what not ready on $url after ${timeout}s"
    fi
    sleep 0.5
  done
}

# semver_sort sorts the Go module versions on its input, one a line, in
# semantic-version order, lowest first. sort -V alone puts a pre-release
# or a pseudo-version of v1.2.3 (v1.2.3-0.2026...) after v1.2.3; a "~"
# sorts before everything, even the end of the string.
semver_sort() {
  sed -E 's/^(v[0-9]+\.[0-9]+\.[0-9]+)-/\1~/' | sort -V | sed -E 's/^(v[0-9]+\.[0-9]+\.[0-9]+)~/\1-/'
}
