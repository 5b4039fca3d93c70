#!/usr/bin/env python3
"""The verdicts of the fault and attack harnesses, each shown failing on a planted defect: a check that cannot fail
proves nothing. Runs in a second (no servers); `make test` runs it first.

  chaos/run.py passed()          a duplicate, a missed start, a skipped scenario, a relay that crashed, exited or
                                 hung at its stop, a crash line in its log, relay-kill re-sending an answered push,
                                 events-blackhole delivering only once the silent socket was released
  tools/bad-input.py failed()    a 5xx, a dead relay, a non-JSON answer, a device the battery wrote, a request left
                                 without an answer, a relay that crashed or hung at stop
  tools/slow-connections.py failed()  a dead relay, a starved /health, a failed registration, a late alert, a crash
  bench/soak.py memory_verdict()  resident memory growing 1 KiB per pause (alone, or beside SQLite's filling
                                 cache), too few samples to tell
  tools/harness.py bad_ending()   a death by signal, an exit code the scenario did not cause, a hang at stop
"""
import importlib.util
import os
import signal
import sys
import tempfile
import types

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
soak = load("bench/soak.py", "soak")
harness = sys.modules["harness"]
problems = []


def expect(label: str, condition: bool) -> None:
    if not condition:
        problems.append(label)


def crash_lines(log: bytes) -> list[str]:
    """What chaos/run.py finds in a scenario whose relay log is `log`."""
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "relay.log"), "wb") as f:
            f.write(log)
        return chaos.sanitizer_reports(work)


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


def ended(returncode: int, stopped: bool = False, hung: bool = False, fault: tuple = ()) -> dict:
    """A scenario's result once one relay process that ended so was judged."""
    endings = chaos.Endings()
    relay = types.SimpleNamespace(pid=7, returncode=returncode, stopped_by_harness=stopped, hung_at_stop=hung)
    endings.judge("relay pid 7", relay, (0, *fault))
    return {**clean, "endings": endings.seen, **({"bad_endings": endings.problems} if endings.problems else {})}


expect("chaos: a relay that died of SIGSEGV fails", not chaos.passed("baseline", ended(-signal.SIGSEGV)))
expect("chaos: a relay that crashed before the harness's SIGTERM fails",
       not chaos.passed("baseline", ended(-signal.SIGSEGV, stopped=True)))
expect("chaos: a relay that needed SIGKILL at its stop fails",
       not chaos.passed("baseline", ended(-signal.SIGKILL, stopped=True, hung=True)))
expect("chaos: a relay that exited 1 by itself fails", not chaos.passed("baseline", ended(1)))
expect("chaos: a relay stopped by SIGTERM passes", chaos.passed("baseline", ended(0, stopped=True)))
expect("chaos: relay-kill's SIGKILL passes", chaos.passed("relay-kill", ended(-signal.SIGKILL, fault=(-9,))))
expect("chaos: a crash mark in a relay log is found", crash_lines(
    b"*** Signal 11: Backtracing from 0x55d0... done ***\n*** Program crashed: Bad pointer dereference at 0x8 ***\n"))
KILL, UP = 10_000_000_000, 11_000_000_000  # CLOCK_MONOTONIC ns of a kill and of the restart


def resent(answered_ms_before: float, message: str = "state-1") -> dict:
    """relay-kill's verdict when a push answered that long before the kill is sent again after the restart."""
    requests = [(KILL - int(answered_ms_before * 1e6), "alert", "a1" + "0" * 62, 200, "state-1"),
                (KILL - 1_000_000_000, "alert", "a1" + "1" * 62, 200, "state-1"),
                (UP + 5_000_000, "alert", "a1" + "0" * 62, 200, message)]
    return {**clean, **chaos.kills_target([chaos.resent_after_kill(requests, KILL, UP, {})])}


expect("chaos: relay-kill re-sending a push answered 100 ms before the kill fails",
       not chaos.passed("relay-kill", resent(100)))
expect("chaos: relay-kill re-sending a push answered 10 ms before the kill passes",
       chaos.passed("relay-kill", resent(10)))
expect("chaos: relay-kill sending the same token another pause's push passes",
       chaos.passed("relay-kill", resent(100, message="state-2")))
HEAL = 40_000_000_000  # CLOCK_MONOTONIC ns when the silent events socket is released, 40 s into the silence


def blackhole(firsts: list, hung_up_s: float | None) -> dict:
    """events-blackhole's result for these first alerts when the relay hung up on the silent socket `hung_up_s` into
    the silence (None: never)."""
    return {**clean, **chaos.blackhole_verdict(firsts, HEAL, HEAL - 38e9, hung_up_s, None, 40.0)}


expect("chaos: events-blackhole dropping the silent socket and delivering before the heal passes",
       chaos.passed("events-blackhole", blackhole([HEAL - 9e9, HEAL - 8e9], 25.4)))
expect("chaos: events-blackhole with an alert only after the heal fails",
       not chaos.passed("events-blackhole", blackhole([HEAL - 9e9, HEAL + 1e9], None)))
expect("chaos: events-blackhole delivering before the heal but keeping the silent socket fails",
       not chaos.passed("events-blackhole", blackhole([HEAL - 2e9, HEAL - 1e9], None)))
expect("chaos: events-blackhole with an alert missing fails",
       not chaos.passed("events-blackhole", blackhole([None], 25.4)))

good = {"relay_alive": True, "server_errors_5xx_not_505": 0, "no_answer": 3, "unanswered": 0, "not_json": 0,
        "devices": [bad_input.KEEP], "relay_ending_problem": None}
expect("bad-input: a clean run passes", bad_input.failed(good) == [])
expect("bad-input: a 5xx fails", bad_input.failed({**good, "server_errors_5xx_not_505": 1}) != [])
expect("bad-input: a dead relay fails", bad_input.failed({**good, "relay_alive": False}) != [])
expect("bad-input: a non-JSON answer fails", bad_input.failed({**good, "not_json": 1}) != [])
expect("bad-input: a written device fails", bad_input.failed({**good, "devices": [bad_input.KEEP, "x"]}) != [])
expect("bad-input: a request left without an answer fails", bad_input.failed({**good, "unanswered": 1}) != [])
expect("bad-input: a relay that crashed at stop fails",
       bad_input.failed({**good, "relay_ending_problem": harness.bad_ending("the relay", -11)}) != [])
expect("bad-input: a close is no answer to a bad request line", bad_input.left_unanswered("request-line", "closed"))
expect("bad-input: a hanging request is no answer, even to a huge head", bad_input.left_unanswered("huge-header", "timeout"))
expect("bad-input: a refused connection is no answer", bad_input.left_unanswered("huge-header", "connect-failed"))
expect("bad-input: a reset may answer a huge head", not bad_input.left_unanswered("huge-header", "reset"))

fine = {"relay_alive": True, "health_ok_pct": 99.0, "devices_probes": 5, "devices_ok": 5,
        "pause": {"alert_after_pause_s": 1.2}}
expect("slow-connections: a clean run passes", slow.failed(fine, False) == [])
expect("slow-connections: a dead relay fails", slow.failed({**fine, "relay_alive": False}, False) != [])
expect("slow-connections: a starved /health fails", slow.failed({**fine, "health_ok_pct": 50.0}, False) != [])
expect("slow-connections: a failed registration fails", slow.failed({**fine, "devices_ok": 4}, False) != [])
expect("slow-connections: a late alert fails", slow.failed({**fine, "pause": {"alert_after_pause_s": 9}}, False) != [])
expect("slow-connections: a missing alert fails", slow.failed({**fine, "pause": {}}, False) != [])
expect("slow-connections: a relay that crashed at stop fails",
       slow.failed({**fine, "relay_ending_problem": harness.bad_ending("the relay", -6)}, False) != [])


def samples(per_pause_kib: float, wobble_kib: int = 0, heap_per_pause_kib: float | None = None) -> list[dict]:
    """RSS every 50 pauses from 2,500 to 3,000 (the smoke's samples after its warm-up), from 30 MiB; with
    `heap_per_pause_kib`, the relay's gauges too: the heap in use net of SQLite's page cache grows from 3 MiB at
    that rate, steadily (it is not paged)."""
    out = []
    for i, n in enumerate(range(2500, 3001, 50)):
        rss = 30_720 + int(per_pause_kib * (n - 2500)) + (wobble_kib if i % 2 else -wobble_kib)
        net = 3072 + int(heap_per_pause_kib * (n - 2500)) if heap_per_pause_kib is not None else None
        out.append({"pauses": n, "rss_kib": rss, "anon_kib": 0, "sqlite_cache_kib": 256 if net is not None else None,
                    "heap_net_kib": net})
    return out


bound = soak.MAX_SLOPE_KIB
expect("soak: flat memory with page-sized noise passes", soak.memory_verdict(samples(0, 300), 2500, bound, 8)["ok"])
expect("soak: memory growing 1 KiB per pause fails", not soak.memory_verdict(samples(1.0), 2500, bound, 8)["ok"])
expect("soak: 1 KiB per pause under noise fails", not soak.memory_verdict(samples(1.0, 300), 2500, bound, 8)["ok"])
expect("soak: RSS creeping as the arenas and page cache fill, with a flat heap, passes",
       soak.memory_verdict(samples(1.0, 300, heap_per_pause_kib=0.2), 2500, bound, 8)["ok"])
expect("soak: a heap growing 1 KiB per pause fails, whatever the RSS does",
       not soak.memory_verdict(samples(0, 300, heap_per_pause_kib=1.0), 2500, bound, 8)["ok"])
expect("soak: too few samples to tell a trend fails", not soak.memory_verdict(samples(0)[:3], 2500, bound, 8)["ok"])

expect("endings: exit 0 passes", harness.bad_ending("relay", 0) is None)
expect("endings: a SIGSEGV fails, named", "SIGSEGV" in (harness.bad_ending("relay", -11) or ""))
expect("endings: a SIGABRT through a shell fails, named", "SIGABRT" in (harness.bad_ending("relay", 134) or ""))
expect("endings: a hang at stop fails", harness.bad_ending("relay", -9, hung=True) is not None)
expect("endings: an exit the scenario did not cause fails", harness.bad_ending("relay", 1) is not None)

print("verdict self-test: " + (f"FAILED: {'; '.join(problems)}" if problems else "every planted defect was caught"))
sys.exit(1 if problems else 0)
