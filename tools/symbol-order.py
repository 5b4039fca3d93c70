#!/usr/bin/env python3
"""`make symbol-order`: writes deploy/symbol-order.txt, the order lld lays out the release binary's functions in.

Most of the relay's idle memory is the binary's code pages, and the kernel maps a file's pages 64 kB at a time around
each fault: a few functions touched in each 64 kB window keep the whole window resident. Placing the functions that
run together next to each other keeps fewer windows resident (docs/benchmarks.md "Footprint").

It runs an unstripped release build (argument 1) under valgrind's callgrind twice, against the scripted Prefect
(bench/peer.py) and the release fake APNs, on 127.0.0.1:
  1. start-up: start, subscribe, idle 3 s, stop;
  2. work: the same, then devices register (one with a push-to-start token), two pauses are announced (alert and
     Live Activity start), /health and /metrics are read, the pauses end (Live Activity end), stop.
The file lists the functions of run 1, then those only run 2 ran: the start-up and idle code ends up together at
the front, the pause path right after it, everything never run behind both. callgrind counts instructions, so
the lists don't depend on timing. A function the file names that is gone is skipped by the linker; a new one not in
the file goes behind the listed ones, which costs memory but never correctness. Rerun after large changes.
"""
from __future__ import annotations

import asyncio
import os
import re
import shutil
import stat
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import run as bench  # noqa: E402
from peer import ScriptedPrefect  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def functions(profile: str, binary: str) -> list[str]:
    """Function symbols of `binary` that ran, in the order callgrind first lists them."""
    names: dict[str, None] = {}
    in_binary = False
    objects: dict[str, str] = {}
    with open(profile, errors="replace") as f:
        for line in f:
            if line.startswith("ob="):
                # ob=(id) path, or ob=(id) alone once the id has been named.
                match = re.match(r"ob=(\(\d+\))?\s*(.*)", line.rstrip("\n"))
                ident, path = match.group(1), match.group(2)
                if ident and path:
                    objects[ident] = path
                in_binary = os.path.basename(objects.get(ident, path) if ident else path) == os.path.basename(binary)
            elif line.startswith("fn=") and in_binary:
                name = re.sub(r"^\(\d+\)\s*", "", line[3:].strip())
                name = re.sub(r"'\d+$", "", name)
                if name and not name.startswith("0x"):
                    names.setdefault(name, None)
    return list(names)


async def trace(binary: str, work: str, phase: str, peer: ScriptedPrefect) -> list[str]:
    profile = os.path.join(work, f"callgrind.{phase}")
    wrapper = os.path.join(work, f"relay-{phase}.sh")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={profile} --demangle=no "
                f"--compress-strings=no --compress-pos=no {binary} \"$@\"\n")
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
    os.environ["BENCH_RELAY_BIN"] = wrapper
    fake = await bench.Fake.start()
    relay = await bench.RelayRun.start(f"http://127.0.0.1:{peer.port}/api", fake, os.path.join(work, phase))
    try:
        await relay.wait_subscribed(timeout=120)
        await asyncio.sleep(3)
        if phase == "work":
            await work_phase(relay, fake, peer)
    finally:
        await relay.stop()
        await fake.stop()
    if not os.path.exists(profile):
        raise RuntimeError(f"callgrind wrote no profile for {phase}; see {work}/{phase}/relay.log")
    return functions(profile, binary)


async def work_phase(relay: bench.RelayRun, fake: bench.Fake, peer: ScriptedPrefect) -> None:
    await relay.register(2)
    status, body = await asyncio.to_thread(bench.http_call, relay.port, "POST", "/devices", {
        "id": "phone-start", "token": "ab" * 32, "start_token": "ef" * 32, "environment": "production",
        "server_id": "bench"})
    if status != 200:
        raise RuntimeError(f"POST /devices answered {status}: {body[:200]!r}")
    runs = [peer.new_run() for _ in range(2)]
    for run in runs:
        peer.emit(run.frame)
        await fake.wait(run.state_id, 3, timeout=60)
    for path in ("/health", "/metrics"):
        await asyncio.to_thread(bench.http_call, relay.port, "GET", path)
    for run in runs:
        peer.emit(run.resume_frame)
    await asyncio.sleep(3)


async def main() -> int:
    if len(sys.argv) < 2 or not os.path.exists(sys.argv[1]):
        print("usage: symbol-order.py UNSTRIPPED_RELEASE_BINARY [OUT]", file=sys.stderr)
        return 2
    if not shutil.which("valgrind"):
        print("symbol-order.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "deploy", "symbol-order.txt")
    work = tempfile.mkdtemp(prefix="prefect-push-symbol-order-")
    peer = ScriptedPrefect()
    await peer.start()
    try:
        startup = await trace(binary, work, "startup", peer)
        worked = await trace(binary, work, "work", peer)
    finally:
        await peer.stop()
    seen = set(startup)
    ordered = startup + [name for name in worked if name not in seen]
    if len(startup) < 1000:
        print(f"only {len(startup)} functions ran at start-up: is {binary} unstripped?", file=sys.stderr)
        return 1
    with open(out, "w") as f:
        f.write("\n".join(ordered) + "\n")
    print(f"{out}: {len(startup)} start-up and idle functions, then {len(ordered) - len(startup)} more of the work")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
