#!/usr/bin/env bash
# Checks hack/lib/common.sh: a failed step exits non-zero with its own
# status and shows the end of its log, a step that works is quiet, free
# ports are free and distinct, and waits end on success and on timeout.
# Run by `make test-hack`.
set -euo pipefail
lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"
HACK_NAME=common-test
source "$lib"

dir=$(mktemp -d)
trap 'rm -rf "$dir"; kill $(jobs -p) 2>/dev/null || true' EXIT
failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() { checks=$((checks + 1)); }

# A step that prints 100 numbered lines and exits 3, run in a child shell as
# a script would run it (run_logged exits the script).
out=$(bash -c 'set -euo pipefail; source "$1"; run_logged "$2/step.log" "the numbered step" \
  bash -c "seq 1 100; exit 3"; echo "after the failed step"' _ "$lib" "$dir" 2>&1) && rc=0 || rc=$?
check
[[ $rc == 3 ]] || fail "a step that exits 3: run_logged exited $rc, want 3"
check
[[ $out == *"the numbered step failed (exit status 3)"* ]] || fail "the failure does not name the step and its status: $out"
check
if [[ $out != *$'\n61\n'* || $out != *$'\n100\n'* || $out == *$'\n60\n'* ]]; then
  fail "the failure does not show exactly the last 40 lines of the log (61 to 100): $out"
fi
check
[[ $out != *"after the failed step"* ]] || fail "the script went on after a failed step"
check
[[ $(wc -l <"$dir/step.log") == 100 ]] || fail "the log does not hold the step's whole output"

# A step that works is quiet and leaves its output in the log.
check
out=$(run_logged "$dir/ok.log" "a working step" echo "built" 2>&1) || fail "a working step failed: $out"
[[ -z $out && $(cat "$dir/ok.log") == built ]] || fail "a working step printed \"$out\" and logged \"$(cat "$dir/ok.log")\"; want nothing, and built"

# free_port hands out distinct ports that nothing listens on.
check
free_port a
free_port b
if [[ $a == "$b" ]] || port_in_use "$a" || port_in_use "$b"; then
  fail "free_port gave $a and $b: want two distinct free ports"
fi

# port_in_use sees a listener.
if command -v python3 >/dev/null; then
  check
  free_port p
  python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(30)' "$p" &
  if ! wait_until 10 port_in_use "$p"; then fail "port_in_use does not see a listener on $p"; fi
  kill $! 2>/dev/null || true
fi

# wait_until ends when the condition holds, after its timeout, and when the
# condition itself gives up.
check
touch_later() { sleep 1; touch "$dir/ready"; }
touch_later &
wait_until 10 test -f "$dir/ready" || fail "wait_until timed out on a condition that came true after 1s"
check
start=$SECONDS
if wait_until 1 test -f "$dir/never"; then fail "wait_until succeeded on a condition that never holds"; fi
((SECONDS - start <= 3)) || fail "wait_until 1 took $((SECONDS - start))s"
check
out=$(bash -c 'source "$1"; gone() { die "the process is gone"; }; wait_until 10 gone; echo "waited on"' _ "$lib" 2>&1) && rc=0 || rc=$?
[[ $rc == 1 && $out == *"the process is gone"* && $out != *"waited on"* ]] ||
  fail "a condition that dies: exit $rc, output \"$out\"; want exit 1 and its message"

# semver_sort orders Go module versions as go get compares them: a
# pseudo-version or a pre-release of v1.36.12 below v1.36.12, numbers as
# numbers, pseudo-versions by their time.
check
want='v0.0.0-20260610212136-7ab31c22f7ad
v0.0.0-20261012220534-4341edf3f941
v0.9.0
v0.10.0
v1.36.11
v1.36.12-0.20260120151049-f2248ac996af
v1.36.12-rc.1
v1.36.12
v2.0.0+incompatible'
got=$(printf '%s\n' v1.36.12 v2.0.0+incompatible v0.10.0 v1.36.12-rc.1 v0.0.0-20261012220534-4341edf3f941 \
  v1.36.12-0.20260120151049-f2248ac996af v0.9.0 v1.36.11 v0.0.0-20260610212136-7ab31c22f7ad | semver_sort)
[[ $got == "$want" ]] || fail "semver_sort gave
$got
want
$want"

if ((failures > 0)); then echo "common: $failures of $checks checks failed"; exit 1; fi
echo "common: $checks checks passed"
