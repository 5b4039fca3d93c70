#!/usr/bin/env python3
"""The verdicts of the fault and attack harnesses, each shown failing on a planted defect: a check that cannot fail
proves nothing. Runs in a second (no servers); `make test` runs it first.

  chaos/run.py passed()          a duplicate, a missed start, a skipped scenario, a sanitizer report
  tools/bad-input.py failed()    a 5xx, a dead relay, a non-JSON answer, a device the battery wrote
  tools/slow-connections.py failed()  a dead relay, a starved /health, a failed registration, a late alert
"""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "chaos"))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


chaos = load("chaos/run.py", "chaos_run")
bad_input = load("tools/bad-input.py", "bad_input")
slow = load("tools/slow-connections.py", "slow_connections")
problems = []


def expect(label: str, condition: bool) -> None:
    if not condition:
        problems.append(label)


clean = {"pauses": 1, "devices": 3, "missed": 0, "duplicates": 0, "starts_missed": 0, "start_duplicates": 0}
expect("chaos: a clean result passes", chaos.passed("baseline", clean))
expect("chaos: a duplicate alert fails", not chaos.passed("baseline", {**clean, "duplicates": 1}))
expect("chaos: a duplicate start fails", not chaos.passed("socket-cuts", {**clean, "start_duplicates": 2}))
expect("chaos: relay-kill's duplicates are its own target's", chaos.passed("relay-kill", {**clean, "duplicates": 5}))
expect("chaos: relay-kill over its target fails", not chaos.passed("relay-kill", {**clean, "target_met": False}))
expect("chaos: a missed start fails", not chaos.passed("baseline", {**clean, "starts_missed": 1}))
expect("chaos: a missed alert fails", not chaos.passed("baseline", {**clean, "missed": 1}))
expect("chaos: a skipped scenario fails", not chaos.passed("disk-full", {"skipped": "needs root"}))
expect("chaos: a scenario that could not run fails", not chaos.passed("baseline", {"error": "RuntimeError"}))

good = {"relay_alive": True, "server_errors_5xx_not_505": 0, "no_answer": 3, "not_json": 0,
        "devices": [bad_input.KEEP]}
expect("bad-input: a clean run passes", bad_input.failed(good) == [])
expect("bad-input: a 5xx fails", bad_input.failed({**good, "server_errors_5xx_not_505": 1}) != [])
expect("bad-input: a dead relay fails", bad_input.failed({**good, "relay_alive": False}) != [])
expect("bad-input: a non-JSON answer fails", bad_input.failed({**good, "not_json": 1}) != [])
expect("bad-input: a written device fails", bad_input.failed({**good, "devices": [bad_input.KEEP, "x"]}) != [])

fine = {"relay_alive": True, "health_ok_pct": 99.0, "devices_probes": 5, "devices_ok": 5,
        "pause": {"alert_after_pause_s": 1.2}}
expect("slow-connections: a clean run passes", slow.failed(fine, False) == [])
expect("slow-connections: a dead relay fails", slow.failed({**fine, "relay_alive": False}, False) != [])
expect("slow-connections: a starved /health fails", slow.failed({**fine, "health_ok_pct": 50.0}, False) != [])
expect("slow-connections: a failed registration fails", slow.failed({**fine, "devices_ok": 4}, False) != [])
expect("slow-connections: a late alert fails", slow.failed({**fine, "pause": {"alert_after_pause_s": 9}}, False) != [])
expect("slow-connections: a missing alert fails", slow.failed({**fine, "pause": {}}, False) != [])

print("verdict self-test: " + (f"FAILED: {'; '.join(problems)}" if problems else "every planted defect was caught"))
sys.exit(1 if problems else 0)
