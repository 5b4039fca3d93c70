#!/usr/bin/env python3
"""The release build end to end, as `make build` ships it (static, trimmed OpenSSL, symbol order), in a few seconds.

The Swift tests run the debug build, which links Debian's shared libraries; this runs .build/release/prefect-push
against the scripted Prefect (bench/peer.py) and the release fake APNs (HTTP/2 over TLS 1.3, ES256 tokens checked):
  - it starts and subscribes;
  - 3 devices register, a pause reaches all 3 as alerts, and its end is seen;
  - `prefect-push check` verifies TLS to the fake with the CA file and signs a token with the key;
  - the relay exits 0 on SIGTERM, and `check` ends by its exit code, not a signal.
Exits 1 with what failed. 127.0.0.1 only; every wait is bounded; stops what it started.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import run as bench  # noqa: E402
from harness import ending  # noqa: E402  (tools/harness.py, beside this file)
from peer import ScriptedPrefect  # noqa: E402


async def main() -> int:
    work = tempfile.mkdtemp(prefix="prefect-push-release-smoke-")
    peer = ScriptedPrefect()
    await peer.start()
    fake = await bench.Fake.start()
    relay = await bench.RelayRun.start(f"http://127.0.0.1:{peer.port}/api", fake, os.path.join(work, "relay"))
    code = 1
    try:
        await relay.wait_subscribed(timeout=20)
        await relay.register(3)
        run = peer.new_run()
        peer.emit(run.frame)
        stamps = await fake.wait(run.state_id, 3, timeout=20)
        peer.emit(run.resume_frame)
        env = {"PREFECT_API_URL": f"http://127.0.0.1:{peer.port}/api", "PREFECT_API_AUTH_STRING": bench.AUTH,
               "APNS_KEY_PATH": f"{bench.FIX}/AuthKey_TESTKEY123.p8", "APNS_KEY_ID": bench.KEY_ID,
               "APNS_TEAM_ID": bench.TEAM_ID, "APNS_CA_FILE": f"{bench.FIX}/ca.pem",
               "APNS_PRODUCTION_URL": f"https://127.0.0.1:{fake.port}",
               "APNS_DEVELOPMENT_URL": f"https://127.0.0.1:{fake.port}", "DB_PATH": os.path.join(work, "check.db")}
        check = await asyncio.to_thread(subprocess.run, [os.path.join(bench.BIN, "prefect-push"), "check"],
                                        env=env, capture_output=True, text=True, timeout=30)
        tls = [line for line in check.stdout.splitlines() + check.stderr.splitlines() if line.startswith("ok")]
        if check.returncode != 0 or not any("certificate verified" in line for line in tls):
            print(f"release smoke: check failed ({ending(check.returncode)}):\n{check.stdout}{check.stderr}")
        else:
            print(f"release smoke: subscribed, {len(stamps)} alerts over TLS, check passed ({len(tls)} ok lines)")
            code = 0
    except (RuntimeError, asyncio.TimeoutError) as error:
        print(f"release smoke failed: {error!r}; relay log: {work}/relay/relay.log")
    finally:
        problem = await relay.stop()
        await fake.stop()
        await peer.stop()
    if problem:
        print(f"release smoke failed: {problem}; relay log: {work}/relay/relay.log")
        return 1
    return code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
