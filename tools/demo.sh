#!/usr/bin/env bash
# `make demo`: a local Prefect server, the relay, and a fake APNs that prints each push as a phone would show it.
# Registers a demo phone, runs a flow that pauses with an input and a markdown description, shows the alert and the
# Live Activity start, resumes the run, shows the end push, and stops everything. 127.0.0.1 only; bounded waits.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
BIN=.build/debug
FIX=Tests/RelayTests/Fixtures/apns
AUTH=demo:demo
TOKEN=$(printf 'ab%.0s' {1..32})
START=$(printf 'cd%.0s' {1..32})
ACTIVITY=$(printf 'ef%.0s' {1..32})

work=$(mktemp -d)
pids=()
relay=
cleanup() {
  # A relay that ended before its stop (a crash mid-demo) says how, whatever else failed.
  if [ -n "$relay" ] && ! kill -0 "$relay" 2>/dev/null; then
    rc=0; wait "$relay" 2>/dev/null || rc=$?; relay_ending "$rc" || true
  fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# How the relay ended, from `wait`'s status (128+N: killed by signal N); fails unless it exited 0.
relay_ending() {
  if [ "$1" -gt 128 ]; then echo "the relay was killed by signal $(($1 - 128)) (SIG$(kill -l $(($1 - 128))))" >&2; return 1; fi
  if [ "$1" -ne 0 ]; then echo "the relay exited $1" >&2; return 1; fi
}
# SIGTERM, then up to 10 s for the relay's orderly stop; a relay that outlives it is killed and fails the demo.
stop_relay() {
  local pid=$relay rc=0; relay=
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"; wait "$pid" 2>/dev/null || true
    echo "the relay did not stop within 10 s of SIGTERM and was killed" >&2; return 1
  fi
  wait "$pid" || rc=$?
  relay_ending "$rc"
}

free_port() { "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() {  # wait_for <seconds> <description> <command...>
  local limit=$1 what=$2; shift 2
  for _ in $(seq 1 $((limit * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "timed out waiting for $what" >&2; return 1
}
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

prefect_port=$(free_port); relay_port=$(free_port); prod_port=$(free_port); dev_port=$(free_port)
api=http://127.0.0.1:$prefect_port/api

say "starting Prefect (127.0.0.1:$prefect_port, basic auth $AUTH)"
PREFECT_HOME=$work/prefect PREFECT_SERVER_API_AUTH_STRING=$AUTH PREFECT_SERVER_ANALYTICS_ENABLED=false \
  PREFECT_UI_ENABLED=false "$VENV/bin/prefect" server start --host 127.0.0.1 --port "$prefect_port" \
  >"$work/prefect.log" 2>&1 & pids+=($!)
wait_for 120 "Prefect" curl -fs "$api/health"

say "starting the fake APNs hosts (production :$prod_port, development :$dev_port)"
for host in production:$prod_port development:$dev_port; do
  "$BIN/fake-apns" --name "${host%%:*}" --port "${host##*:}" --cert $FIX/server.pem --key $FIX/server.key \
    --jwt-public-key $FIX/AuthKey_TESTKEY123.pub.pem --key-id TESTKEY123 --team-id TEAM123456 \
    >>"$work/phone.log" 2>&1 & pids+=($!)
done
wait_for 10 "fake APNs" grep -q "development listening" "$work/phone.log"

say "starting the relay (127.0.0.1:$relay_port)"
PREFECT_API_URL=$api PREFECT_API_AUTH_STRING=$AUTH PORT=$relay_port DB_PATH=$work/relay.db \
  APNS_KEY_PATH=$FIX/AuthKey_TESTKEY123.p8 APNS_KEY_ID=TESTKEY123 APNS_TEAM_ID=TEAM123456 \
  APNS_PRODUCTION_URL=https://127.0.0.1:$prod_port APNS_DEVELOPMENT_URL=https://127.0.0.1:$dev_port \
  APNS_CA_FILE=$FIX/ca.pem "$BIN/prefect-push" 2>"$work/relay.log" & relay=$!; pids+=($relay)
wait_for 20 "the relay to subscribe" sh -c "curl -fs 127.0.0.1:$relay_port/health | grep -q '\"subscribed\":true'"
curl -s "127.0.0.1:$relay_port/health"; echo

say "registering a demo phone (development token, with a push-to-start token)"
curl -s -u "$AUTH" -H 'content-type: application/json' "127.0.0.1:$relay_port/devices" \
  -d "{\"id\":\"demo-phone\",\"token\":\"$TOKEN\",\"start_token\":\"$START\",\"environment\":\"development\",\"server_id\":\"local\"}"
echo

say "running a flow that pauses with an input and a markdown description"
PREFECT_API_URL=$api PREFECT_API_AUTH_STRING=$AUTH FLOW_RUN_ID_FILE=$work/run.id \
  "$VENV/bin/python" tools/flows.py run input >"$work/flow.log" 2>&1 & flow=$!; pids+=($flow)
wait_for 90 "the alert" grep -q "alert to" "$work/phone.log"
wait_for 10 "the Live Activity start" grep -q "Live Activity start" "$work/phone.log"
run=$(cat "$work/run.id")
cat "$work/phone.log"; : >"$work/phone.log"

say "the phone reports its Live Activity's push token; resuming run $run"
curl -s -u "$AUTH" -X PUT -H 'content-type: application/json' \
  "127.0.0.1:$relay_port/devices/demo-phone/activities/$run" -d "{\"token\":\"$ACTIVITY\"}" -o /dev/null -w 'activity token: %{http_code}\n'
curl -s -u "$AUTH" -H 'content-type: application/json' "$api/flow_runs/$run/resume" \
  -d '{"run_input":{"comment":"ship it"}}' -o /dev/null -w 'resume: %{http_code}\n'
wait_for 30 "the end push" grep -q "Live Activity end" "$work/phone.log"
cat "$work/phone.log"
wait_for 30 "the flow to finish" sh -c "! kill -0 $flow"
grep -h "approved" "$work/flow.log" || true

say "relay log"
grep -E "pause\.|apns\.(sent|fanout)|device\." "$work/relay.log" | cut -c1-200
say "done; stopping everything"
stop_relay
echo "the relay stopped cleanly (exit 0)"
