#!/usr/bin/env python3
"""`make soak`: thousands of pauses and resumes against the scripted Prefect (bench/peer.py) and the fake APNs, with
the relay's resident memory, open descriptors and store sampled as they go. It finds what grows per pause.

Each pause: the run's Running event, its Paused event, a wait until every device's alert reached the fake APNs,
then its Running event again (the resume). Samples every `--every` pauses: VmRSS and RssAnon (/proc/PID/status),
open descriptors (/proc/PID/fd), the store's files (db + -wal), and its outbox messages that have no rows left.

Passes (exit 0) when, after the warm-up (a quarter of the pauses, at least 2,500):
  - resident memory grew by at most --max-growth-mib (1 MiB) from the end of the warm-up to the end;
  - open descriptors are back to what they were after the warm-up (+-2: a reconnect in flight);
  - the database file stays under --max-store-mib (8 MiB: it keeps a day of ended pauses, ~0.6 KB each) and its
    write-ahead log under 32 MiB, and no outbox message is left without rows (checked after a 3 s quiet period).
127.0.0.1 only, bounded: each wait has a deadline, and the run stops by itself.

  bench/soak.py --pauses 10000          (make soak)
  bench/soak.py --pauses 3000 --every 500 (the smoke `make test` runs)
The relay and fake APNs are the release builds (SOAK_BIN_DIR for another build directory, SOAK_RELAY_BIN for another
relay).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from harness import log, stop_all  # noqa: E402
from peer import ScriptedPrefect  # noqa: E402
import run  # noqa: E402
from run import ROOT, Fake, RelayRun, register_devices  # noqa: E402

# SOAK_BIN_DIR: where the relay and fake-apns builds are (default: the release builds, as `make soak` makes them).
run.BIN = os.environ.get("SOAK_BIN_DIR") or run.BIN


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


def sample(relay: RelayRun, done: int) -> dict:
    pid = relay.process.pid
    kb = status_kb(pid)
    return {"pauses": done, "rss_kib": kb.get("VmRSS", 0), "anon_kib": kb.get("RssAnon", 0),
            "fds": len(os.listdir(f"/proc/{pid}/fd")), **store_numbers(os.path.join(relay.directory, "relay.db"))}


async def soak(args) -> dict:
    work = tempfile.mkdtemp(prefix="prefect-push-soak-")
    log(f"soak: {args.pauses} pauses, {args.devices} devices; logs in {work}")
    peer = ScriptedPrefect()
    await peer.start()
    fake = await Fake.start()
    if os.environ.get("SOAK_RELAY_BIN"):
        os.environ["BENCH_RELAY_BIN"] = os.environ["SOAK_RELAY_BIN"]
    relay = await RelayRun.start(f"http://127.0.0.1:{peer.port}/api", fake, os.path.join(work, "relay"))
    samples: list[dict] = []
    try:
        await relay.wait_subscribed()
        await asyncio.wait_for(peer.subscribed.wait(), 10)
        await asyncio.to_thread(register_devices, relay.port, args.devices, "soak")
        # Every bounded table fills within the first ~2,000 pauses (the ids of the last 4,096 state events, the last
        # 1,024 runs' events, 512 ended pauses): growth is measured from there.
        warmup = min(args.pauses, max(2500, args.pauses // 4))
        recent: list[str] = []
        started = time.monotonic()
        for n in range(1, args.pauses + 1):
            run = peer.new_run(f"soak-{n}")
            peer.emit(run.start_frame)
            await asyncio.sleep(0.002)
            arrivals = asyncio.ensure_future(fake.wait(run.state_id, args.devices, timeout=30))
            await asyncio.sleep(0)
            peer.emit(run.frame)
            await arrivals
            peer.emit(run.resume_frame)
            # The peer keeps the last few runs to answer reads about them; older ones go, so it stays flat itself.
            recent.append(run.id)
            if len(recent) > 50:
                peer.runs.pop(recent.pop(0), None)
            if n == warmup or n % args.every == 0 or n == args.pauses:
                samples.append(sample(relay, n))
                s = samples[-1]
                log(f"  {n:>6} pauses  rss {s['rss_kib'] / 1024:6.2f} MiB  anon {s['anon_kib'] / 1024:6.2f} MiB  "
                    f"fds {s['fds']:>3}  store {s['store_bytes'] / 1024:6.0f} KiB  log {s['wal_bytes'] / 1024:6.0f} KiB  messages {s['messages']:>5} "
                    f"({s['messages_without_rows']} without rows)  pauses {s['pauses']}")
        elapsed = time.monotonic() - started
        await asyncio.sleep(3)  # the last answers settle and the relay's tick runs
        final = sample(relay, args.pauses)
    finally:
        await stop_all()
    at_warmup = next(s for s in samples if s["pauses"] == warmup)
    tail = [s["rss_kib"] for s in samples[-3:]]
    growth_kib = sorted(tail)[len(tail) // 2] - at_warmup["rss_kib"]
    checks = {
        "rss_growth": growth_kib <= args.max_growth_mib * 1024,
        "fds": abs(final["fds"] - at_warmup["fds"]) <= 2,
        "store_size": final["store_bytes"] <= args.max_store_mib * 1024 * 1024,
        "log_size": max(s["wal_bytes"] for s in samples + [final]) <= 32 * 1024 * 1024,
        "no_message_without_rows": final["messages_without_rows"] == 0,
    }
    return {"pauses": args.pauses, "devices": args.devices, "seconds": round(elapsed, 1),
            "pauses_per_s": round(args.pauses / elapsed, 1), "warmup": warmup,
            "rss_growth_kib": growth_kib, "at_warmup": at_warmup, "final": final, "checks": checks,
            "passed": all(checks.values()), "samples": samples, "logs": work}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pauses", type=int, default=10_000)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--max-growth-mib", type=float, default=1.0)
    parser.add_argument("--max-store-mib", type=float, default=8.0)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "soak-results.json"))
    args = parser.parse_args()
    result = asyncio.run(soak(args))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    w, e = result["at_warmup"], result["final"]
    print(f"soak: {result['pauses']} pauses in {result['seconds']} s ({result['pauses_per_s']}/s); "
          f"rss {w['rss_kib'] / 1024:.2f} -> {e['rss_kib'] / 1024:.2f} MiB after warm-up "
          f"({result['rss_growth_kib']:+d} KiB); fds {w['fds']} -> {e['fds']}; store {e['store_bytes'] / 1024:.0f} KiB, "
          f"{e['messages']} messages ({e['messages_without_rows']} without rows)")
    failed = [name for name, ok in result["checks"].items() if not ok]
    print("soak: " + (f"FAILED: {', '.join(failed)}" if failed else "passed"))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
