#!/usr/bin/env python3
"""Slow-connection attack on the relay's HTTP API, with a pause announced during it (issue 11's acceptance test).

Starts a local Prefect server (basic auth), two fake APNs hosts and the relay; registers a phone; then for
--duration seconds keeps --connections connections open that send a request head one byte at a time, re-opening
each as soon as the relay closes it. Meanwhile it probes GET /health (a probe counts when it is answered within 1 s),
POST /devices (10 s budget), and runs a flow that pauses, timing the alert at the fake APNs from the pause's state
timestamp. Prints one JSON object with the numbers. 127.0.0.1 only; bounded (about --duration + 60 s).

    .venv/bin/python tools/slow-connections.py --relay .build/debug/prefect-push [--connections 500] [--duration 45]

Not part of `make test` (too slow); `make slow-connections` runs it.
"""
import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime

from harness import bad_ending, ending, free_port, start_prefect, stop_processes  # tools/harness.py, beside this file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "Tests/RelayTests/Fixtures/apns")
AUTH = "demo:demo"
AUTH_HEADER = "Basic ZGVtbzpkZW1v"
TOKEN = "ab" * 32


def wait_for(what, seconds, check):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def http(port, method, path, body=None, timeout=1.0, auth=True):
    """One request on its own connection; returns (status, seconds) or (None, seconds) on timeout/error."""
    started = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.settimeout(max(0.01, timeout - (time.monotonic() - started)))
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        if auth:
            head += f"Authorization: {AUTH_HEADER}\r\n"
        data = b""
        if body is not None:
            data = body.encode()
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        s.sendall(head.encode() + b"\r\n" + data)
        reply = b""
        while b"\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        s.close()
        m = re.match(rb"HTTP/1\.[01] (\d{3})", reply)
        return (int(m.group(1)) if m else None), time.monotonic() - started
    except Exception:
        return None, time.monotonic() - started


async def slow_client(port, source, stop, stats, byte_interval):
    head = b"GET /push/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100000
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        except Exception:
            stats["connect_failures"] += 1
            await asyncio.sleep(0.05)
            continue
        stats["opened"] += 1
        try:
            for byte in head:
                if stop.is_set():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                try:
                    data = await asyncio.wait_for(reader.read(1024), timeout=byte_interval)
                    if not data:
                        stats["closed_by_relay"] += 1
                        break
                    stats["answered"] += 1
                    break
                except asyncio.TimeoutError:
                    pass
        except Exception:
            stats["closed_by_relay"] += 1
        finally:
            writer.close()


async def attack(port, connections, sources, duration, stats, byte_interval):
    stop = asyncio.Event()
    addresses = [f"127.0.0.{2 + i % 250}" if sources > 1 else "127.0.0.1" for i in range(sources)]
    tasks = [asyncio.create_task(slow_client(port, addresses[i % len(addresses)], stop, stats, byte_interval))
             for i in range(connections)]
    await asyncio.sleep(duration)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--relay", default=os.path.join(ROOT, ".build/debug/prefect-push"))
    parser.add_argument("--fake-apns", default=os.path.join(ROOT, ".build/debug/fake-apns"))
    parser.add_argument("--prefect", default=os.path.join(ROOT, ".venv/bin/prefect"))
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument("--duration", type=float, default=45)
    parser.add_argument("--sources", type=int, default=1, help="spread attackers over 127.0.0.2.. (1: all 127.0.0.1)")
    parser.add_argument("--byte-interval", type=float, default=0.5)
    parser.add_argument("--no-pause", action="store_true", help="skip the paused flow (no fake APNs)")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="slow-connections-")
    procs = []
    try:
        prefect_port, relay_port, prod_port, dev_port = free_port(), free_port(), free_port(), free_port()
        api = f"http://127.0.0.1:{prefect_port}/api"
        procs.append(start_prefect(args.prefect, work, prefect_port, AUTH))

        phone = open(work + "/phone.log", "w")
        relay_env = dict(os.environ, PREFECT_API_URL=api, PREFECT_API_AUTH_STRING=AUTH, PORT=str(relay_port),
                         DB_PATH=work + "/relay.db", BASE_PATH="/push", LOG_LEVEL="info")
        if not args.no_pause:
            for name, port in (("production", prod_port), ("development", dev_port)):
                procs.append(subprocess.Popen([args.fake_apns, "--name", name, "--port", str(port), "--cert",
                                               FIX + "/server.pem", "--key", FIX + "/server.key", "--jwt-public-key",
                                               FIX + "/AuthKey_TESTKEY123.pub.pem", "--key-id", "TESTKEY123",
                                               "--team-id", "TEAM123456"], stdout=phone, stderr=subprocess.STDOUT))
            relay_env.update(APNS_KEY_PATH=FIX + "/AuthKey_TESTKEY123.p8", APNS_KEY_ID="TESTKEY123",
                             APNS_TEAM_ID="TEAM123456", APNS_PRODUCTION_URL=f"https://127.0.0.1:{prod_port}",
                             APNS_DEVELOPMENT_URL=f"https://127.0.0.1:{dev_port}", APNS_CA_FILE=FIX + "/ca.pem")
        relay = subprocess.Popen([args.relay], env=relay_env, stdout=open(work + "/relay.log", "w"),
                                 stderr=subprocess.STDOUT)
        procs.append(relay)
        wait_for("the relay to subscribe", 30,
                 lambda: b'"subscribed":true' in urllib.request.urlopen(
                     f"http://127.0.0.1:{relay_port}/push/health", timeout=2).read())
        status, _ = http(relay_port, "POST", "/push/devices", json.dumps(
            {"id": "bench-phone", "token": TOKEN, "environment": "development", "server_id": "local"}), timeout=10)
        assert status == 200, f"registration answered {status}"

        stats = {"opened": 0, "closed_by_relay": 0, "answered": 0, "connect_failures": 0}
        health, devices = [], []
        done = threading.Event()

        def probe_health():
            time.sleep(2)  # let the attack build up
            while not done.is_set():
                status, seconds = http(relay_port, "GET", "/push/health", timeout=1.0, auth=False)
                health.append((status, seconds))
                time.sleep(max(0, 0.5 - seconds))

        def probe_devices():
            time.sleep(3)
            n = 0
            while not done.is_set():
                n += 1
                status, seconds = http(relay_port, "POST", "/push/devices", json.dumps(
                    {"id": f"probe-{n}", "token": TOKEN, "environment": "development", "server_id": "p"}), timeout=10)
                devices.append((status, seconds))
                time.sleep(max(0, 5 - seconds))

        pause = {}

        def run_paused_flow():
            time.sleep(5)
            flow_env = dict(os.environ, PREFECT_API_URL=api, PREFECT_API_AUTH_STRING=AUTH,
                            FLOW_RUN_ID_FILE=work + "/run.id")
            flow = subprocess.Popen([os.path.join(os.path.dirname(args.prefect), "python"),
                                     os.path.join(ROOT, "tools/flows.py"), "run", "input"], env=flow_env,
                                    stdout=open(work + "/flow.log", "w"), stderr=subprocess.STDOUT)
            procs.append(flow)
            deadline = time.time() + args.duration + 20
            seen_at = None
            while time.time() < deadline:
                if seen_at is None and "alert to" in open(work + "/phone.log").read():
                    seen_at = time.time()
                    break
                time.sleep(0.05)
            pause["alert_seen"] = seen_at is not None
            try:
                run_id = open(work + "/run.id").read().strip()
                req = urllib.request.Request(f"{api}/flow_runs/{run_id}",
                                             headers={"Authorization": AUTH_HEADER})
                run = json.load(urllib.request.urlopen(req, timeout=5))
                paused = datetime.fromisoformat(run["state"]["timestamp"].replace("Z", "+00:00")).timestamp()
                if run["state"]["type"] == "PAUSED" and seen_at is not None:
                    pause["alert_after_pause_s"] = round(seen_at - paused, 2)
                pause["state"] = run["state"]["type"]
            except Exception as error:  # noqa: BLE001
                pause["error"] = str(error)[:200]

        threads = [threading.Thread(target=probe_health), threading.Thread(target=probe_devices)]
        if not args.no_pause:
            threads.append(threading.Thread(target=run_paused_flow))
        for t in threads:
            t.start()
        started = time.time()
        asyncio.run(attack(relay_port, args.connections, args.sources, args.duration, stats, args.byte_interval))
        done.set()
        for t in threads:
            t.join(timeout=args.duration + 30)
        alive = relay.poll() is None
        ending_problem = stop_relay(relay)
        relay_log = open(work + "/relay.log").read()
        ok = [s for s in health if s[0] == 200 and s[1] <= 1.0]
        latencies = sorted(s[1] for s in health if s[0] == 200)
        result = {
            "relay": args.relay, "connections": args.connections, "sources": args.sources,
            "duration_s": round(time.time() - started, 1),
            "health_probes": len(health), "health_ok_within_1s": len(ok),
            "health_ok_pct": round(100 * len(ok) / max(1, len(health)), 1),
            "health_p50_ms": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
            "health_p95_ms": round(1000 * latencies[int(len(latencies) * 0.95)], 1) if latencies else None,
            "devices_probes": len(devices), "devices_ok": sum(1 for s in devices if s[0] == 200),
            "devices_max_s": round(max((s[1] for s in devices), default=0), 2),
            "pause": pause,
            "attack": stats,
            "relay_listing_failed": relay_log.count("listing_failed"),
            "relay_alive": alive, "relay_ending": ending(relay.returncode), "relay_ending_problem": ending_problem,
        }
        print(json.dumps(result, indent=1))
        failures = failed(result, args.no_pause)
        print("slow-connections: " + ("FAILED: " + "; ".join(failures) if failures else "passed"))
        return 1 if failures else 0
    finally:
        stop_processes(procs)
        if os.environ.get("KEEP_WORK"):
            print("work directory:", work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def stop_relay(relay: subprocess.Popen) -> str | None:
    """SIGTERM, SIGKILL after 10 s; what was wrong with how the relay ended (a crash, a hang, an exit other than 0)."""
    hung = False
    if relay.poll() is None:
        relay.terminate()
        try:
            relay.wait(timeout=10)
        except subprocess.TimeoutExpired:
            hung = True
            relay.kill()
            relay.wait()
    return bad_ending("the relay", relay.returncode, hung=hung)


def failed(result: dict, no_pause: bool) -> list[str]:
    """What the attack may not do (each a failure, exit 1): kill the relay, starve /health (95 % of probes answered
    within 1 s), starve registrations (every one answered 200 within its 10 s budget), delay the pause's alert past
    5 s, or leave the relay unable to stop cleanly (a crash or a hang at SIGTERM, an exit other than 0)."""
    out = []
    if not result["relay_alive"]:
        out.append("the relay died")
    if result.get("relay_ending_problem"):
        out.append(result["relay_ending_problem"])
    if result["health_ok_pct"] < 95:
        out.append(f"only {result['health_ok_pct']} % of /health probes answered within 1 s")
    if result["devices_ok"] < result["devices_probes"]:
        out.append(f"{result['devices_probes'] - result['devices_ok']} registrations failed")
    if not no_pause:
        alert = result["pause"].get("alert_after_pause_s")
        if alert is None or alert > 5:
            out.append(f"the pause's alert came after {alert} s (or never): {result['pause']}")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
