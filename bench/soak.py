#!/usr/bin/env python3
"""`make soak`: thousands of pauses and resumes against the scripted Prefect (bench/peer.py) and the fake APNs, with
the relay's resident memory, open descriptors and store sampled as they go. It finds what grows per pause.

Each pause: the run's Running event, its Paused event, a wait until every device's alert reached the fake APNs,
then its Running event again (the resume). Samples every `--every` pauses: VmRSS and RssAnon (/proc/PID/status),
open descriptors (/proc/PID/fd), the store's files (db + -wal), and its outbox messages that have no rows left.

Passes (exit 0) when, after the warm-up (a quarter of the pauses, at least 2,500):
  - resident memory does not trend upwards: the least-squares slope of VmRSS net of SQLite's page cache (the relay's
    `prefect_push_store_cache_bytes`, which fills up to its bound as the store grows) over every sample
    from the warm-up on is at most --max-slope-kib KiB per pause (at least --min-samples samples, else it can't tell and fails);
  - open descriptors are back to what they were after the warm-up (+-2: a reconnect in flight);
  - the database file stays under --max-store-mib (8 MiB: it keeps a day of ended pauses, ~0.6 KB each) and its
    write-ahead log under 32 MiB, and no outbox message is left without rows (checked after a 3 s quiet period);
  - the relay ran to the end and exited 0 on SIGTERM (a crash or a hang at stop fails, naming the signal).
127.0.0.1 only, bounded: each wait has a deadline, and the run stops by itself.

  bench/soak.py --pauses 10000            (make soak)
  bench/soak.py --pauses 3000 --every 50  (the smoke `make test` runs)
  bench/soak.py ... --relay-preload .build/planted/leak-on-write.so   (a planted leak: must fail)
The relay and fake APNs are the release builds (SOAK_BIN_DIR for another build directory, SOAK_RELAY_BIN for another
relay). Writes the samples and the verdict, with the commit and date, to --out.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from harness import ending, http_call, log, stop_all  # noqa: E402
from peer import ScriptedPrefect  # noqa: E402
import run  # noqa: E402
from run import ROOT, Fake, RelayRun, register_devices, run_stamp  # noqa: E402

# SOAK_BIN_DIR: where the relay and fake-apns builds are (default: the release builds, as `make soak` makes them).
run.BIN = os.environ.get("SOAK_BIN_DIR") or run.BIN
# KiB per pause after the warm-up of the heap in use net of SQLite's page cache (see memory_verdict). A healthy
# relay's was 0.186-0.204 from 2,500 to 3,000 pauses in four runs, one with both cores busy (its whole RSS slope
# 0.14-0.31 in those runs, 0.54 in a fresh-clone run under load, which failed the old RSS bound). A relay leaking
# 1 KiB per write(2), about 9 writes per pause, shows 8.3. Half a KiB keeps a margin on both sides, and a leak of
# 1 KiB per pause fails too.
MAX_SLOPE_KIB = 0.5


def status_kb(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "RssAnon:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def store_numbers(path: str) -> dict:
    size = os.path.getsize(path)
    wal = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        orphans = db.execute("SELECT count(*) FROM outbox_messages m WHERE NOT EXISTS "
                             "(SELECT 1 FROM outbox o WHERE o.message_id = m.id)").fetchone()[0]
        messages = db.execute("SELECT count(*) FROM outbox_messages").fetchone()[0]
        pauses = db.execute("SELECT count(*) FROM pauses").fetchone()[0]
    finally:
        db.close()
    return {"store_bytes": size, "wal_bytes": wal, "messages": messages, "messages_without_rows": orphans, "pauses": pauses}


def gauges_kib(port: int, names: tuple[str, ...]) -> dict[str, int | None]:
    """The relay's /metrics gauges `names`, in KiB; None for one the relay doesn't export (an older build)."""
    status, body = http_call(port, "GET", "/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    found: dict[str, int | None] = dict.fromkeys(names)
    for line in body.decode().splitlines():
        name, _, value = line.partition(" ")
        if name in found:
            found[name] = int(float(value)) // 1024
    return found


def sample(relay: RelayRun, done: int) -> dict:
    pid = relay.process.pid
    kb = status_kb(pid)
    gauges = gauges_kib(relay.port, ("prefect_push_heap_in_use_bytes", "prefect_push_store_cache_bytes"))
    heap, cache = gauges["prefect_push_heap_in_use_bytes"], gauges["prefect_push_store_cache_bytes"]
    return {"pauses": done, "rss_kib": kb.get("VmRSS", 0), "anon_kib": kb.get("RssAnon", 0), "heap_kib": heap,
            "sqlite_cache_kib": cache, "heap_net_kib": heap - cache if heap is not None and cache is not None else None,
            "fds": len(os.listdir(f"/proc/{pid}/fd")), **store_numbers(os.path.join(relay.directory, "relay.db"))}


# MARK: - the memory verdict

def trend(samples: list[dict], key: str = "rss_kib") -> tuple[float, float]:
    """The least-squares line through (pauses, `key`): its slope in KiB per pause, and the standard deviation of
    the samples around it in KiB (the noise a slope has to stand out of)."""
    xs, ys = [s["pauses"] for s in samples], [s[key] for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    residuals = [y - my - slope * (x - mx) for x, y in zip(xs, ys)]
    noise = math.sqrt(sum(r * r for r in residuals) / (len(xs) - 2)) if len(xs) > 2 else 0.0
    return slope, noise


def memory_verdict(samples: list[dict], warmup: int, max_slope_kib: float, min_samples: int) -> dict:
    """Resident memory judged by its trend over every sample from the warm-up on. Two points (or the median of the
    last few against one) can't see steady growth: for memory that grows with every pause the median of the last
    three samples is the one before the last, and a spike on either point decides alone. A leak per pause is a
    slope; page-sized steps and the allocator's own movement are the noise around it.

    The slope judged is of the heap in use net of SQLite's page cache (the relay's `prefect_push_heap_in_use_bytes`
    less `prefect_push_store_cache_bytes`). The resident set also holds freed memory the allocator keeps for reuse,
    which creeps as its arenas fill and jumps with load, and SQLite's page cache, which fills as the store grows up
    to its bound (a short run never reaches it); neither is a leak, and both were the noise that failed a healthy
    run. Memory malloc handed out and never had back is what a leak grows. A relay without the gauges is judged on
    its whole RSS."""
    after = [s for s in samples if s["pauses"] >= warmup]
    if len(after) < min_samples:
        return {"ok": False, "samples": len(after),
                "why": f"{len(after)} samples after the warm-up, {min_samples} needed to tell a trend"}
    slope, noise = trend(after)
    anon_slope, anon_noise = trend(after, "anon_kib")
    net = all(s.get("heap_net_kib") is not None for s in after)
    judged, judged_noise = trend(after, "heap_net_kib") if net else (slope, noise)
    cache_slope = trend(after, "sqlite_cache_kib")[0] if net else None
    what = "heap in use net of SQLite's page cache" if net else "RSS"
    return {"ok": judged <= max_slope_kib, "samples": len(after), "judged": what,
            "judged_slope_kib_per_pause": round(judged, 4), "judged_noise_kib": round(judged_noise, 1),
            "slope_kib_per_pause": round(slope, 4), "noise_kib": round(noise, 1),
            "sqlite_cache_slope_kib_per_pause": round(cache_slope, 4) if cache_slope is not None else None,
            "anon_slope_kib_per_pause": round(anon_slope, 4),
            "anon_noise_kib": round(anon_noise, 1), "max_slope_kib_per_pause": max_slope_kib,
            "why": f"{what}: slope {judged:+.3f} KiB/pause over {len(after)} samples (bound {max_slope_kib}, "
                   f"noise {judged_noise:.0f} KiB); whole RSS {slope:+.3f}"}


# MARK: - the run

async def drive(peer: ScriptedPrefect, fake: Fake, relay: RelayRun, args, warmup: int, samples: list[dict]) -> float:
    """The pauses, one after another, sampled as they go; returns the seconds they took."""
    recent: list[str] = []
    started = time.monotonic()
    for n in range(1, args.pauses + 1):
        flow_run = peer.new_run(f"soak-{n}")
        peer.emit(flow_run.start_frame)
        await asyncio.sleep(0.002)
        arrivals = asyncio.ensure_future(fake.wait(flow_run.state_id, args.devices, timeout=30))
        await asyncio.sleep(0)
        peer.emit(flow_run.frame)
        await arrivals
        peer.emit(flow_run.resume_frame)
        # The peer keeps the last few runs to answer reads about them; older ones go, so it stays flat itself.
        recent.append(flow_run.id)
        if len(recent) > 50:
            peer.runs.pop(recent.pop(0), None)
        if n == warmup or n % args.every == 0 or n == args.pauses:
            samples.append(sample(relay, n))
            if n == warmup or n % 500 == 0 or n == args.pauses:  # the log stays short at any --every
                show(samples[-1])
    return time.monotonic() - started


def show(s: dict) -> None:
    log(f"  {s['pauses']:>6} pauses  rss {s['rss_kib'] / 1024:6.2f} MiB  anon {s['anon_kib'] / 1024:6.2f} MiB  "
        f"heap {(s['heap_kib'] or 0) / 1024:5.2f} MiB  sqlite {(s['sqlite_cache_kib'] or 0) / 1024:5.2f} MiB  fds {s['fds']:>3}  store {s['store_bytes'] / 1024:6.0f} KiB  log {s['wal_bytes'] / 1024:6.0f} KiB  "
        f"messages {s['messages']:>5} ({s['messages_without_rows']} without rows)  pauses {s['pauses']}")


def relay_binary() -> str:
    return os.environ.get("SOAK_RELAY_BIN") or os.path.join(run.BIN, "prefect-push")


def relay_version(binary: str) -> str | None:
    """What the binary says it was built from (`--version`): the checkout's HEAD may have moved on since."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


async def soak(args) -> dict:
    work = tempfile.mkdtemp(prefix="prefect-push-soak-")
    log(f"soak: {args.pauses} pauses, {args.devices} devices; logs in {work}")
    os.environ["BENCH_RELAY_BIN"] = relay_binary()
    peer = ScriptedPrefect()
    await peer.start()
    fake = await Fake.start()
    # LD_PRELOAD for the relay alone (a planted defect); the harness and the fake APNs run as they are.
    preload = {"LD_PRELOAD": os.path.abspath(args.relay_preload)} if args.relay_preload else None
    relay = await RelayRun.start(f"http://127.0.0.1:{peer.port}/api", fake, os.path.join(work, "relay"), preload)
    # Every bounded table fills within the first ~2,000 pauses (the ids of the last 4,096 state events, the last
    # 1,024 runs' events, 512 ended pauses): growth is measured from there.
    warmup = min(args.pauses, max(2500, args.pauses // 4))
    samples: list[dict] = []
    elapsed, final, stopped_early = 0.0, None, None
    try:
        await relay.wait_subscribed()
        await asyncio.wait_for(peer.subscribed.wait(), 10)
        await asyncio.to_thread(register_devices, relay.port, args.devices, "soak")
        elapsed = await drive(peer, fake, relay, args, warmup, samples)
        await asyncio.sleep(3)  # the last answers settle and the relay's tick runs
        final = sample(relay, args.pauses)
    except (RuntimeError, OSError, asyncio.TimeoutError) as error:
        stopped_early = f"stopped after {samples[-1]['pauses'] if samples else 0} pauses: {error!r}"
        if relay.process.returncode is not None:
            stopped_early += f" (the relay had ended: {ending(relay.process.returncode)})"
    finally:
        ending_problem = await relay.stop()
        await stop_all()
    return verdict(args, samples, warmup, elapsed, final, stopped_early, ending_problem, relay.process.returncode)


def verdict(args, samples, warmup, elapsed, final, stopped_early, ending_problem, returncode) -> dict:
    result = {**run_stamp(), "relay": os.path.relpath(relay_binary(), ROOT), "relay_version": relay_version(relay_binary()),
              "relay_preload": os.path.basename(args.relay_preload) if args.relay_preload else None,
              "pauses": args.pauses, "devices": args.devices, "every": args.every, "warmup": warmup,
              "relay_ending": ending(returncode), "relay_ending_problem": ending_problem, "stopped_early": stopped_early}
    checks = {"ran_to_the_end": stopped_early is None, "relay_ending": ending_problem is None}
    if final is not None:
        at_warmup = next(s for s in samples if s["pauses"] == warmup)
        memory = memory_verdict(samples, warmup, args.max_slope_kib, args.min_samples)
        checks.update({
            "rss_slope": memory["ok"],
            "fds": abs(final["fds"] - at_warmup["fds"]) <= 2,
            "store_size": final["store_bytes"] <= args.max_store_mib * 1024 * 1024,
            "log_size": max(s["wal_bytes"] for s in samples + [final]) <= 32 * 1024 * 1024,
            "no_message_without_rows": final["messages_without_rows"] == 0,
        })
        result.update({"seconds": round(elapsed, 1), "pauses_per_s": round(args.pauses / elapsed, 1),
                       "memory": memory, "rss_growth_kib": final["rss_kib"] - at_warmup["rss_kib"],
                       "at_warmup": at_warmup, "final": final})
    return {**result, "checks": checks, "passed": all(checks.values()), "samples": samples}


def report(result: dict) -> None:
    if "final" in result:
        w, e, m = result["at_warmup"], result["final"], result["memory"]
        print(f"soak: {result['pauses']} pauses in {result['seconds']} s ({result['pauses_per_s']}/s); "
              f"rss {w['rss_kib'] / 1024:.2f} -> {e['rss_kib'] / 1024:.2f} MiB after warm-up "
              f"({result['rss_growth_kib']:+d} KiB); {m['why']}; fds {w['fds']} -> {e['fds']}; "
              f"store {e['store_bytes'] / 1024:.0f} KiB, {e['messages']} messages ({e['messages_without_rows']} "
              f"without rows); the relay ended with {result['relay_ending']}")
    for problem in (result["stopped_early"], result["relay_ending_problem"]):
        if problem:
            print(f"soak: {problem}")
    failed = [name for name, ok in result["checks"].items() if not ok]
    print("soak: " + (f"FAILED: {', '.join(failed)}" if failed else "passed"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pauses", type=int, default=10_000)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--max-slope-kib", type=float, default=MAX_SLOPE_KIB, help="KiB of heap in use (net of SQLite's page cache) per pause after the warm-up")
    parser.add_argument("--min-samples", type=int, default=8)
    parser.add_argument("--max-store-mib", type=float, default=8.0)
    parser.add_argument("--relay-preload", help="a shared object for the relay's LD_PRELOAD (a planted defect)")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "soak-results.json"))
    args = parser.parse_args()
    result = asyncio.run(soak(args))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    report(result)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
