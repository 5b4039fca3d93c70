#!/usr/bin/env bash
# Runs `swift test --skip-build` with line-buffered output and a bound on its wall time. Every wait in the tests has
# a timeout of its own, so a run past the bound is a hang: the stacks of every thread of the test process and the
# tail of the newest relay logs are printed, the run is stopped, and it fails (exit 124). A hang is a defect (a
# thread or child that never stops, in a test or on the way out after every test passed), so it is never run again
# in the hope of a pass. Without the bound a hang would sit silent until CI's own limit, its last lines lost in a
# buffer.
#   usage: tools/bounded-test.sh SECONDS [swift test arguments...]
set -uo pipefail
bound=$1; shift
swift=${SWIFT:-swift}
log=$(mktemp /tmp/bounded-test.XXXXXX)
trap 'rm -f "$log"' EXIT

# Line-buffered (the test process inherits it), so what a hung run printed last is on screen.
buffering=()
command -v stdbuf >/dev/null && buffering=(stdbuf -oL -eL)

# One run; 124 if it hung.
run() {
  # A session of its own, so that a hang is stopped with every process the tests started.
  setsid "${buffering[@]}" "$swift" test --skip-build "$@" > >(tee "$log") 2>&1 &
  runner=$!
  trap 'pkill -TERM -s "$runner"; exit 130' INT TERM
  local deadline=$((SECONDS + bound))
  while kill -0 "$runner" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 1; done
  if ! kill -0 "$runner" 2>/dev/null; then
    wait "$runner"
    return
  fi
  echo "swift test still running after ${bound} s: a test hangs; the stacks of the test process follow" >&2
  for pid in $(pgrep -s "$runner" -f 'PackageTests'); do
    echo "--- threads of $pid" >&2
    if command -v gdb >/dev/null; then
      timeout 120 gdb -p "$pid" -batch -ex 'thread apply all bt 40' 2>&1 | grep -E '^(Thread|#)' >&2
    else
      cat /proc/"$pid"/task/*/stack >&2 2>/dev/null
    fi
  done
  for relayLog in $(ls -dt /tmp/prefect-push-test-*/relay.log 2>/dev/null | head -3); do
    echo "--- last lines of $relayLog" >&2
    tail -20 "$relayLog" >&2
  done
  # The whole session: the test process has a process group of its own, and its children are in that one.
  pkill -KILL -s "$runner"
  wait "$runner" 2>/dev/null
  return 124
}

run "$@"
rc=$?
if [ "$rc" -eq 124 ]; then
  if grep -qE '^✔ Test run with [0-9]+ tests? .*passed' "$log"; then
    echo "every test had passed, but the test process hung on its way out (stacks above): failing" >&2
  else
    echo "the test run hung (stacks above): failing" >&2
  fi
fi
exit "$rc"
