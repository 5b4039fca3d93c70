#!/usr/bin/env bash
# Runs `swift test --skip-build` with line-buffered output and a bound on its wall time. Every test waits with a
# timeout of its own, so a run past the bound is a hang: the stacks of every thread of the test process and the
# tail of each relay log the run left are printed, then the run is stopped and this fails. Without the bound a
# hang would sit until CI's own limit and say nothing about where it hung.
#   usage: tools/bounded-test.sh SECONDS [swift test arguments...]
set -uo pipefail
bound=$1; shift
swift=${SWIFT:-swift}

# Line-buffered, so what a hung run printed last is on screen, not in a buffer that dies with it.
buffering=()
command -v stdbuf >/dev/null && buffering=(stdbuf -oL -eL)

setsid "${buffering[@]}" "$swift" test --skip-build "$@" &
runner=$!
trap 'kill -TERM -- "-$runner" 2>/dev/null' INT TERM
deadline=$((SECONDS + bound))
while kill -0 "$runner" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 1; done

if kill -0 "$runner" 2>/dev/null; then
  echo "swift test still running after ${bound} s: a test hangs; the stacks of the test process follow" >&2
  for pid in $(pgrep -s "$runner" -f 'PackageTests'); do
    echo "--- threads of $pid" >&2
    if command -v gdb >/dev/null; then
      timeout 120 gdb -p "$pid" -batch -ex 'thread apply all bt 40' 2>&1 | grep -E '^(Thread|#)' >&2
    else
      cat /proc/"$pid"/task/*/stack 2>/dev/null >&2
    fi
  done
  for log in $(ls -dt /tmp/prefect-push-test-*/relay.log 2>/dev/null | head -3); do
    echo "--- last lines of $log" >&2
    tail -20 "$log" >&2
  done
  kill -KILL -- "-$runner" 2>/dev/null
  wait "$runner" 2>/dev/null
  exit 1
fi
wait "$runner"
