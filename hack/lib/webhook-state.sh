# webhook-state.sh: how hack/dev.sh hands the local webhook process's state
# (webhook.pid and the stop marker webhook.stopped, both in one directory) to
# its supervisor loop, which tears the cluster down when the webhook dies
# unexpectedly. Sourced; no side effects when sourced.
#
# The invariant the supervisor relies on: whenever the stop marker is absent,
# webhook.pid names the process that is meant to be running. So a start
# writes the new pid (atomically) before it removes the marker, and a stop
# sets the marker before it signals the process.

# webhook_state_started DIR PID records PID as the running webhook.
webhook_state_started() {
  local dir=$1 pid=$2
  echo "$pid" >"$dir/webhook.pid.tmp"
  mv -f "$dir/webhook.pid.tmp" "$dir/webhook.pid"
  rm -f "$dir/webhook.stopped"
}

# webhook_state_stopping DIR records that the webhook is being stopped on
# purpose; call it before signalling the process.
webhook_state_stopping() {
  touch "$1/webhook.stopped"
}

# webhook_died DIR succeeds when the webhook died without being stopped. The
# pid is read again after the marker check: a start that ran in between has
# written a new pid before removing the marker, and is not a death.
webhook_died() {
  local dir=$1 pid
  pid=$(cat "$dir/webhook.pid" 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null && return 1
  [[ -f $dir/webhook.stopped ]] && return 1
  [[ $(cat "$dir/webhook.pid" 2>/dev/null) == "$pid" ]]
}
