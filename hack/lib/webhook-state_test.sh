#!/usr/bin/env bash
# Checks hack/lib/webhook-state.sh: at every step of a stop and of a start,
# in every order the supervisor can observe them, it never reports a death;
# it does report a real one. Run by `make test-hack`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/webhook-state.sh"

dir=$(mktemp -d)
trap 'rm -rf "$dir"; kill $(jobs -p) 2>/dev/null || true' EXIT
failures=0
expect() { # expect died|alive STEP
  local want=$1 step=$2 got=alive
  webhook_died "$dir" && got=died
  if [[ $got != "$want" ]]; then
    echo "FAIL: $step: supervisor sees the webhook $got, want $want"
    failures=$((failures + 1))
  fi
}
dead_pid() { sh -c 'exit 0' & local p=$!; wait "$p"; echo "$p"; }

# A running webhook.
sleep 300 & old=$!
webhook_state_started "$dir" "$old"
expect alive "running"

# A stop: marker first, then the signal.
webhook_state_stopping "$dir"
expect alive "stop: marker set, process still running"
kill "$old"; wait "$old" 2>/dev/null || true
expect alive "stop: process gone"

# A start, step by step, with the supervisor looking in between: the new
# pid is written before the marker goes.
sleep 300 & new=$!
expect alive "start: process started, state not yet written"
echo "$new" >"$dir/webhook.pid.tmp"; mv -f "$dir/webhook.pid.tmp" "$dir/webhook.pid"
expect alive "start: pid written, marker still there"
rm -f "$dir/webhook.stopped"
expect alive "start: marker removed"

# Why the order matters: with the marker removed before the new pid is
# written, the supervisor sees no marker and the old, dead pid.
webhook_state_stopping "$dir"; kill "$new"; wait "$new" 2>/dev/null || true
rm -f "$dir/webhook.stopped"
expect died "marker removed before the new pid is written"
sleep 300 & newer=$!
webhook_state_started "$dir" "$newer"
expect alive "the new pid written"

# The real functions, watched after each file operation inside them: the
# supervisor must never see a death during 50 stops and starts.
fired=0
look() { if webhook_died "$dir"; then fired=$((fired + 1)); fi; }
rm() { command rm "$@"; look; }
mv() { command mv "$@"; look; }
touch() { command touch "$@"; look; }
for _ in $(seq 1 50); do
  webhook_state_stopping "$dir"; kill "$newer"; wait "$newer" 2>/dev/null || true; look
  sleep 300 & newer=$!; look
  webhook_state_started "$dir" "$newer"
done
unset -f rm mv touch
if ((fired > 0)); then
  echo "FAIL: the supervisor saw a death $fired times inside 50 stops and starts of the real functions"
  failures=$((failures + 1))
fi

# A real death is still seen.
kill "$newer"; wait "$newer" 2>/dev/null || true
expect died "the webhook exited by itself"
webhook_state_started "$dir" "$(dead_pid)"
expect died "the webhook exited at once after a start"

if ((failures > 0)); then echo "webhook-state: $failures failed"; exit 1; fi
echo "webhook-state: 11 checks passed"
