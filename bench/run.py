#!/usr/bin/env python3
"""`make bench`: push latency, APNs throughput, footprint, and a real Prefect server next to a Prefect Automation.

Everything runs on 127.0.0.1 with release builds, is bounded (every wait has a deadline) and stops what it started.
Prints a table and writes bench/results.json.

  1. Event -> APNs latency: a scripted Prefect (bench/peer.py) emits pause events; the fake APNs stamps each request's
     arrival. Both stamps are CLOCK_MONOTONIC on this machine. For 1, 100 and 1,000 registered devices.
  2. Throughput on one APNs connection: the relay's client (prefect-push-bench), h2load and aioapns, 10,000 alerts
     each, against the same fake in the same run.
  3. Footprint: RSS idle / with 10,000 devices / after fan-outs, binary size, start-up until subscribed.
  4. A real Prefect 3 server: pause_flow_run -> alert at the fake APNs, next to an Automation calling a webhook;
     for the pause with input, also when Prefect stored the description (its row's `created`), which an alert that
     quotes it can't beat.

Options: --quick (fewer events, for a smoke run), --skip-real (no Prefect server), --only latency,throughput,...
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from harness import AUTH, free_port, http_call, judge, log, register, spawn, stop, stop_all  # noqa: E402
from peer import ScriptedPrefect  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.join(ROOT, ".build", "release")
FIX = os.path.join(ROOT, "Tests", "RelayTests", "Fixtures", "apns")
PYTHON = sys.executable
KEY_ID, TEAM_ID = "TESTKEY123", "TEAM123456"
#: What was wrong with how each relay this process stopped ended (a crash, a hang at stop, an exit code other than 0):
#: each one fails the run, since a relay that dies on its way out passed every measurement before it.
RELAY_ENDINGS: list[str] = []


# MARK: - helpers

def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summary_ms(values_ns: list[int]) -> dict:
    ms = [v / 1e6 for v in values_ns]
    return {"n": len(ms), "p50": round(percentile(ms, 50), 3), "p90": round(percentile(ms, 90), 3),
            "p99": round(percentile(ms, 99), 3), "max": round(max(ms), 3)}


def rss_kb(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def source_commit() -> str | None:
    """`git rev-parse --short HEAD`, with "-dirty" when a tracked file differs from it (the binary may hold those
    changes); None outside a git checkout, so a results table says "commit unknown" rather than guessing."""
    git = ["git", "--no-optional-locks", "-C", ROOT]  # read-only: no index refresh under others' git commands
    try:
        head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        changed = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                 text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("-dirty" if changed.stdout.strip() else "")


def run_stamp() -> dict:
    """The "commit" and "date" (UTC) a results file is headed with in the docs (tools/latest-run.py)."""
    return {"commit": source_commit(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def register_devices(port: int, count: int, prefix: str) -> None:
    """`count` devices through the relay's own API (its own checks), over one keep-alive connection."""
    register(port, [{"id": f"{prefix}-{n}", "token": "cd" + format(n, "062x"), "environment": "production",
                     "server_id": "bench"} for n in range(count)])


# MARK: - fake APNs

class Fake:
    """The fake APNs (`fake-apns --arrivals`): arrival stamps by apns-collapse-id (= the pause's state id)."""

    def __init__(self, process: asyncio.subprocess.Process, port: int):
        self.process = process
        self.port = port
        self.arrivals: dict[str, list[int]] = {}
        self.expected: dict[str, tuple[int, asyncio.Event]] = {}
        #: (collapse id, stamp) of each request's first arrival per collapse id, in order; see next_arrival().
        self.order: asyncio.Queue = asyncio.Queue()
        self.total = 0
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, name: str = "production", arrivals: bool = True) -> "Fake":
        port = free_port()
        argv = [os.path.join(BIN, "fake-apns"), "--name", name, "--port", str(port), "--cert", f"{FIX}/server.pem",
                "--key", f"{FIX}/server.key", "--jwt-public-key", f"{FIX}/AuthKey_TESTKEY123.pub.pem",
                "--key-id", KEY_ID, "--team-id", TEAM_ID, "--arrivals" if arrivals else "--quiet"]
        process = await spawn(*argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        line = await asyncio.wait_for(process.stdout.readline(), 10)
        if b"listening" not in line:
            raise RuntimeError(f"fake-apns did not start: {line!r}")
        return cls(process, port)

    async def _read(self):
        # Whole chunks rather than a readline per arrival: a 1,000-device fan-out's lines come in a few reads, and
        # what this process spends on them is CPU the relay under test doesn't get on a 2-core machine.
        rest = b""
        while chunk := await self.process.stdout.read(1 << 16):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            touched = set()
            for raw in lines:
                parts = raw.split(b" ", 4)
                if len(parts) < 5 or parts[0] != b"arrival":
                    continue
                collapse, stamp = parts[3].decode(), int(parts[1])
                stamps = self.arrivals.get(collapse)
                if stamps is None:
                    stamps = self.arrivals[collapse] = []
                    self.order.put_nowait((collapse, stamp))
                stamps.append(stamp)
                self.total += 1
                touched.add(collapse)
            for collapse in touched:
                waiter = self.expected.get(collapse)
                if waiter and len(self.arrivals.get(collapse, ())) >= waiter[0]:
                    waiter[1].set()

    async def wait(self, collapse: str, count: int, timeout: float) -> list[int]:
        event = asyncio.Event()
        self.expected[collapse] = (count, event)
        if len(self.arrivals.get(collapse, [])) >= count:
            event.set()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        finally:
            self.expected.pop(collapse, None)
        return self.arrivals.pop(collapse)

    async def next_arrival(self, timeout: float) -> tuple[str, int]:
        """The next collapse id seen for the first time, with its stamp (for pauses that come one at a time)."""
        collapse, stamp = await asyncio.wait_for(self.order.get(), timeout)
        self.arrivals.pop(collapse, None)
        return collapse, stamp

    async def stop(self):
        await stop(self.process)
        self.reader.cancel()


# MARK: - the relay

class RelayRun:
    def __init__(self, process, port: int, spawned_ns: int, directory: str):
        self.process, self.port, self.spawned_ns, self.directory = process, port, spawned_ns, directory

    @classmethod
    async def start(cls, prefect_api: str, fake: Fake, directory: str, extra: dict | None = None) -> "RelayRun":
        os.makedirs(directory, exist_ok=True)
        port = free_port()
        env = {"PREFECT_API_URL": prefect_api, "PREFECT_API_AUTH_STRING": AUTH, "PORT": str(port),
               "DB_PATH": os.path.join(directory, "relay.db"), "APNS_KEY_PATH": f"{FIX}/AuthKey_TESTKEY123.p8",
               "APNS_KEY_ID": KEY_ID, "APNS_TEAM_ID": TEAM_ID, "APNS_CA_FILE": f"{FIX}/ca.pem",
               "APNS_PRODUCTION_URL": f"https://127.0.0.1:{fake.port}",
               "APNS_DEVELOPMENT_URL": f"https://127.0.0.1:{fake.port}", **(extra or {})}
        err = open(os.path.join(directory, "relay.log"), "ab")
        spawned = time.monotonic_ns()
        # BENCH_RELAY_BIN: another relay build to compare (A/B), else the release build.
        binary = os.environ.get("BENCH_RELAY_BIN") or os.path.join(BIN, "prefect-push")
        # The system roots as the image has them (it sets neither variable): some machines point SSL_CERT_FILE at
        # the bundle for their own tools, which would have the relay parse it whole at start-up (docs/benchmarks.md "Footprint").
        process = await spawn(binary, env=env, stdout=err, stderr=err, unset=("SSL_CERT_FILE", "SSL_CERT_DIR"))
        err.close()
        return cls(process, port, spawned, directory)

    async def wait_subscribed(self, timeout: float = 30) -> float:
        """Milliseconds from spawn until /health says subscribed (polled every 2 ms)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise RuntimeError(f"the relay exited ({self.process.returncode}); see {self.directory}/relay.log")
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
                data = await asyncio.wait_for(reader.read(), 2)
                writer.close()
                if b'"subscribed":true' in data:
                    return (time.monotonic_ns() - self.spawned_ns) / 1e6
            except (OSError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(0.002)
        raise RuntimeError(f"the relay did not subscribe in {timeout} s; see {self.directory}/relay.log")

    async def metrics(self) -> str:
        status, body = await asyncio.to_thread(http_call, self.port, "GET", "/metrics")
        return body.decode() if status == 200 else ""

    async def register(self, count: int, prefix: str = "phone") -> float:
        started = time.monotonic()
        await asyncio.to_thread(register_devices, self.port, count, prefix)
        return time.monotonic() - started

    def rss(self) -> dict:
        return rss_kb(self.process.pid)

    async def stop(self) -> str | None:
        """Stops the relay; returns what was wrong with how it ended (also kept in RELAY_ENDINGS), or None."""
        await stop(self.process)
        where = os.path.basename(self.directory)
        problem = judge("the relay" if where == "relay" else f"the relay in {where}", self.process)
        if problem:
            RELAY_ENDINGS.append(problem)
            log(problem)
        return problem


# MARK: - 1. latency

def busy_ns(service: list[tuple[int, int, str]], start: int, end: int) -> int:
    """How long, within [start, end], the peer had at least one REST request open (accept -> answer written)."""
    spans = sorted((max(o, start), min(d, end)) for o, d, _ in service if d > start and o < end)
    total, cursor = 0, start
    for lo, hi in spans:
        lo = max(lo, cursor)
        if hi > lo:
            total += hi - lo
            cursor = hi
    return total


async def latency_for(peer: ScriptedPrefect, fake: Fake, work: str, devices: int, events: int, warmup: int = 3,
                      started: bool = True) -> dict:
    """`started`: each run's Running event comes 5 ms before its Paused event, as on a real server, so the relay
    has followed the run; else the Paused event is the first the relay hears of it (as after a restart)."""
    name = f"latency-{devices}" + ("" if started else "-unseen")
    relay = await RelayRun.start(f"http://127.0.0.1:{peer.port}/api", fake, os.path.join(work, name))
    try:
        await relay.wait_subscribed()
        await asyncio.wait_for(peer.subscribed.wait(), 10)
        await relay.register(devices)
        first, last, peer_share = [], [], []
        # Where the relay's share goes: event sent -> first REST request seen by the peer, last answer -> first push.
        to_read, after_read = [], []
        gc.collect()
        gc.disable()
        gap = 0.05 + devices * 0.0003
        for n in range(warmup + events):
            run = peer.new_run()
            if started:
                peer.emit(run.start_frame)
                await asyncio.sleep(0.005)
            # The wait for the pushes is set up before the event goes: run after the write, its bookkeeping held the
            # core the kernel had just woken the relay's socket thread on (~0.1 ms of the relay's overhead).
            arrivals = asyncio.ensure_future(fake.wait(run.state_id, devices, timeout=30))
            await asyncio.sleep(0)
            mark = len(peer.service)
            sent = peer.emit(run.frame)
            stamps = await arrivals
            if n >= warmup:
                first.append(min(stamps) - sent)
                last.append(max(stamps) - sent)
                peer_share.append(busy_ns(peer.service[mark:], sent, max(stamps)))
                reads = [(o, d) for o, d, path in peer.service[mark:] if o >= sent]
                if reads:
                    to_read.append(min(o for o, _ in reads) - sent)
                    after_read.append(min(stamps) - max(d for _, d in reads))
            peer.emit(run.resume_frame)
            await asyncio.sleep(gap)
        gc.enable()
        overhead = [total - share for total, share in zip(last, peer_share)]
        result = {"devices": devices, "events": events, "started": started, "first": summary_ms(first), "last": summary_ms(last),
                  "peer_rest": summary_ms(peer_share), "relay_overhead": summary_ms(overhead),
                  "event_to_read": summary_ms(to_read), "answer_to_push": summary_ms(after_read), "rss_kb": relay.rss(),
                  "metrics": await relay.metrics()}
        log(f"latency devices={devices}{'' if started else ' unseen'}: last {result['last']} overhead {result['relay_overhead']}"
            f" event->read {result['event_to_read']} answer->push {result['answer_to_push']}")
        return result
    finally:
        gc.enable()
        await relay.stop()


# MARK: - 2. throughput

async def run_capture(*argv: str, env: dict | None = None, timeout: float = 180) -> str:
    process = await spawn(*argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        await stop(process)
    return out.decode(errors="replace")


def children_cpu_seconds() -> float:
    """User + system CPU of this process's reaped children so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def field(text: str, name: str) -> float | None:
    for token in text.split():
        if token.startswith(name + "="):
            return float(token.split("=", 1)[1])
    return None


def provider_token() -> str:
    import jwt  # PyJWT comes with prefect's dependencies (and aioapns')

    with open(f"{FIX}/AuthKey_TESTKEY123.p8") as f:
        return jwt.encode({"iss": TEAM_ID, "iat": int(time.time())}, f.read(), algorithm="ES256",
                          headers={"kid": KEY_ID})


async def throughput(work: str, pushes: int, rounds: int) -> dict:
    fake = await Fake.start(arrivals=False)
    body = os.path.join(work, "alert.json")
    with open(body, "w") as f:
        json.dump({"aps": {"alert": {"title": "Approve the nightly deploy?", "subtitle": "nightly-deploy",
                                     "body": "service: billing-api\nReply with a comment."},
                           "category": "waiting-reply", "sound": "default"},
                   "body": {"runId": "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e", "serverId": "bench"}}, f)
    env = {"APNS_KEY_PATH": f"{FIX}/AuthKey_TESTKEY123.p8", "APNS_KEY_ID": KEY_ID, "APNS_TEAM_ID": TEAM_ID,
           "APNS_CA_FILE": f"{FIX}/ca.pem", "APNS_PRODUCTION_URL": f"https://127.0.0.1:{fake.port}",
           "APNS_DEVELOPMENT_URL": f"https://127.0.0.1:{fake.port}", "LOG_LEVEL": "warn"}
    token = provider_token()
    # h2load two ways: one path over and over (its classic load: the server decodes the same indexed headers each
    # time), and the relay's own requests (`prefect-push-bench`'s): a distinct device token per push and the same
    # apns-expiration and apns-collapse-id headers, which cost the fake more per request to read.
    uris = os.path.join(work, "uris.txt")
    with open(uris, "w") as f:
        f.writelines(f"https://127.0.0.1:{fake.port}/3/device/ab{n:062x}\n" for n in range(1, pushes + 1))
    variants = {"h2load -m 100": (100, False), "h2load -m 1000": (1000, False),
                "h2load -m 100, the relay's requests": (100, True), "h2load -m 1000, the relay's requests": (1000, True)}
    samples: dict[str, list[float]] = {"prefect-push": [], **{name: [] for name in variants}, "aioapns": []}
    # The client's own CPU per push (µs): the relay's as prefect-push-bench counts it while the pushes go out, h2load's
    # from its rusage as a child of this process (its whole run, start-up and TLS handshake included).
    cpu: dict[str, list[float]] = {"prefect-push": [], **{name: [] for name in variants}}
    try:
        for _ in range(rounds):
            # BENCH_CLIENT_BIN: another build's prefect-push-bench, for an A/B of the APNs client (with BENCH_RELAY_BIN).
            client = os.environ.get("BENCH_CLIENT_BIN") or os.path.join(BIN, "prefect-push-bench")
            out = await run_capture(client, str(pushes), env=env)
            if field(out, "delivered") != pushes:
                raise RuntimeError(f"prefect-push-bench: {out.strip()}")
            samples["prefect-push"].append(field(out, "per_second"))
            cpu["prefect-push"].append(field(out, "cpu_us_per_push"))
            for name, (streams, like_relay) in variants.items():
                target = (["-i", uris, "-H", "apns-expiration: 0", "-H", "apns-collapse-id: bench"] if like_relay
                          else [f"https://127.0.0.1:{fake.port}/3/device/" + "ab" * 32])
                before = children_cpu_seconds()
                out = await run_capture("h2load", "-n", str(pushes), "-c", "1", "-m", str(streams), "-d", body,
                                        "-H", f"authorization: bearer {token}", "-H", "apns-topic: io.zzstoatzz.prefect",
                                        "-H", "apns-push-type: alert", "-H", "apns-priority: 10", *target)
                line = next((l for l in out.splitlines() if l.startswith("finished in")), "")
                if f"{pushes} succeeded" not in out or not line:
                    raise RuntimeError(f"h2load: {out[-500:]}")
                samples[name].append(float(line.split(",")[1].split()[0]))
                cpu[name].append(round((children_cpu_seconds() - before) * 1e6 / pushes, 2))
        for _ in range(max(1, rounds // 3)):
            out = await run_capture(PYTHON, os.path.join(ROOT, "bench", "aioapns_load.py"), str(fake.port),
                                    f"{FIX}/ca.pem", f"{FIX}/AuthKey_TESTKEY123.p8", KEY_ID, TEAM_ID, str(pushes),
                                    timeout=300)
            if field(out, "delivered") != pushes:
                raise RuntimeError(f"aioapns: {out.strip()[-500:]}")
            samples["aioapns"].append(field(out, "per_second"))
    finally:
        await fake.stop()
    medians = {name: round(percentile(values, 50)) for name, values in samples.items()}
    best_h2load = max(medians[name] for name, (_, like_relay) in variants.items() if not like_relay)
    best_like_relay = max(medians[name] for name, (_, like_relay) in variants.items() if like_relay)
    cpu_medians = {name: round(percentile(values, 50), 2) for name, values in cpu.items()}
    result = {"pushes": pushes, "rounds": rounds, "samples": samples, "median_per_second": medians,
              "client_cpu_us_per_push": cpu_medians,
              "ratio_vs_h2load": round(medians["prefect-push"] / best_h2load, 3),
              "ratio_vs_h2load_same_requests": round(medians["prefect-push"] / best_like_relay, 3),
              "ratio_vs_aioapns": round(medians["prefect-push"] / medians["aioapns"], 1)}
    log(f"throughput: {medians}; client CPU per push (µs): {cpu_medians}")
    return result


# MARK: - 3. footprint

async def footprint(peer: ScriptedPrefect, work: str, starts: int) -> dict:
    fake = await Fake.start()
    api = f"http://127.0.0.1:{peer.port}/api"
    startup = []
    try:
        for n in range(starts):
            relay = await RelayRun.start(api, fake, os.path.join(work, f"start-{n}"))
            try:
                startup.append(await relay.wait_subscribed())
            finally:
                await relay.stop()
        relay = await RelayRun.start(api, fake, os.path.join(work, "footprint"))
        try:
            await relay.wait_subscribed()
            await asyncio.sleep(2)
            idle = relay.rss()
            seconds = await relay.register(10_000)
            registered = relay.rss()
            run = peer.new_run()
            arrivals = asyncio.ensure_future(fake.wait(run.state_id, 10_000, timeout=60))
            await asyncio.sleep(0)  # set up before the event goes, as in `latency_for`
            sent = peer.emit(run.frame)
            stamps = await arrivals
            peer.emit(run.resume_frame)
            await asyncio.sleep(1)
            after = relay.rss()
        finally:
            await relay.stop()
    finally:
        await fake.stop()
    # The relay that ran (BENCH_RELAY_BIN in an A/B), not the checkout's.
    binary = os.environ.get("BENCH_RELAY_BIN") or os.path.join(BIN, "prefect-push")
    stripped = os.path.join(work, "prefect-push.stripped")
    if shutil.which("strip"):
        subprocess.run(["strip", "-o", stripped, binary], check=True)
    else:
        stripped = binary
    result = {"idle_rss_kb": idle["VmRSS"], "idle_private_kb": idle["RssAnon"], "idle_file_kb": idle["RssFile"],
              "rss_10k_devices_kb": registered["VmRSS"],
              "rss_after_10k_fanout_kb": after["VmRSS"], "peak_rss_kb": after["VmHWM"],
              "fanout_10k_last_ms": round((max(stamps) - sent) / 1e6, 1),
              "register_10k_seconds": round(seconds, 2), "binary_bytes": os.path.getsize(binary),
              "binary_stripped_bytes": os.path.getsize(stripped), "startup_ms": summary_ms([int(s * 1e6) for s in startup])}
    log(f"footprint: {result}")
    return result


# MARK: - 4. a real Prefect server

class Sink:
    """A local HTTP sink for the Automation's webhook: arrival stamps by the state id in the payload."""

    def __init__(self):
        self.arrivals: dict[str, int] = {}
        self.events: dict[str, asyncio.Event] = {}

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            stamp = time.monotonic_ns()
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":")[1])
            body = await asyncio.wait_for(reader.readexactly(length), 10) if length else b""
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
            try:
                state = json.loads(body)["state"]
            except (ValueError, KeyError, TypeError):
                state = body.decode(errors="replace")
            self.arrivals.setdefault(state, stamp)
            self.events.setdefault(state, asyncio.Event()).set()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def wait(self, state: str, timeout: float) -> int | None:
        try:
            await asyncio.wait_for(self.events.setdefault(state, asyncio.Event()).wait(), timeout)
        except asyncio.TimeoutError:
            return None
        return self.arrivals[state]


async def real_prefect(work: str, pauses: int, input_pauses: int, waiting_pauses: int) -> dict:
    prefect = os.path.join(os.path.dirname(PYTHON), "prefect")
    home = os.path.join(work, "prefect-home")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {"PREFECT_HOME": home, "PREFECT_SERVER_API_AUTH_STRING": AUTH, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_ENABLED": "false", "PREFECT_SERVER_UI_ENABLED": "false", "PREFECT_SERVER_LOGGING_LEVEL": "WARNING"}
    client_env = {"PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": AUTH, "PREFECT_HOME": home,
                  "PREFECT_LOGGING_LEVEL": "WARNING"}
    server_log = open(os.path.join(work, "prefect-server.log"), "ab")
    server = await spawn(prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port), env=env,
                         stdout=server_log, stderr=server_log, group=True)
    fake = sink = relay = None
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if (await asyncio.to_thread(http_call, port, "GET", "/api/health", None, None, 2))[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.returncode is not None:
                raise RuntimeError(f"Prefect did not start; see {work}/prefect-server.log")
            await asyncio.sleep(0.3)
        log("real: Prefect is up")

        sink = Sink()
        sink_port = await sink.start()
        made = await run_capture(PYTHON, "-c", "from prefect.blocks.webhook import Webhook\n"
                                 f"print(Webhook(method='POST', url='http://127.0.0.1:{sink_port}/hook')"
                                 ".save('bench-sink', overwrite=True))", env=client_env)
        block_id = made.strip().splitlines()[-1]
        automation = {
            "name": "bench: paused -> webhook", "enabled": True,
            "trigger": {"type": "event", "posture": "Reactive", "match": {"prefect.resource.id": "prefect.flow-run.*"},
                        "expect": ["prefect.flow-run.Paused"], "for_each": ["prefect.resource.id"], "threshold": 1,
                        "within": 0},
            "actions": [{"type": "call-webhook", "block_document_id": block_id,
                         "payload": '{"state": "{{ event.id }}", "run": "{{ event.resource.id }}"}'}],
        }
        status, answer = await asyncio.to_thread(http_call, port, "POST", "/api/automations/", automation)
        if status not in (200, 201):
            raise RuntimeError(f"POST /automations/ answered {status}: {answer[:300]!r}")

        fake = await Fake.start()
        relay = await RelayRun.start(api, fake, os.path.join(work, "real-relay"),
                                     {"LOG_LEVEL": os.environ.get("BENCH_RELAY_LOG_LEVEL", "info")})
        startup_ms = await relay.wait_subscribed()
        await relay.register(1)

        series = {}
        for mode, count in (("plain", pauses), ("input", input_pauses), ("waiting", waiting_pauses)):
            if count:
                series[mode] = await pause_series(mode, count, port, client_env, fake, sink, work)
                if mode == "waiting":
                    # Quoted: the alert's text came from the work.waiting event (the relay logs where it read it).
                    with open(os.path.join(work, "real-relay", "relay.log"), errors="replace") as f:
                        series[mode]["quoted"] = sum("context=workWaiting" in line for line in f)
                log(f"real {mode}: relay {series[mode]['relay_from_call']} automation "
                    f"{series[mode]['automation_from_call']}")
        metrics = await relay.metrics()
    finally:
        if relay:
            await relay.stop()
        if fake:
            await fake.stop()
        await stop(server, timeout=20)
        server_log.close()
    result = {"plain": series.get("plain"), "input": series.get("input"), "waiting": series.get("waiting"),
              "relay_startup_ms": round(startup_ms, 1),
              "metrics": metrics}
    return result


async def pause_series(mode: str, count: int, port: int, client_env: dict, fake: Fake, sink: Sink, work: str,
                       warmup: int = 2) -> dict:
    """One flow run pausing `count` (+ warm-up) times; each pause is resumed once its alert and webhook arrived."""
    flow = await spawn(PYTHON, os.path.join(ROOT, "bench", "pauses.py"), str(count + warmup), mode, env=client_env,
                       stdout=subprocess.PIPE, stderr=open(os.path.join(work, f"flow-{mode}.log"), "ab"))
    relay_ms, hook_ms, relay_from_state, hook_from_state = [], [], [], []
    # A pause with input: when Prefect stored its rows, and the alert and the webhook counted from the description.
    input_timing: dict[str, list[int]] = {}
    try:
        for n in range(count + warmup):
            line = b""
            while not line.startswith(b"PAUSING"):
                line = await asyncio.wait_for(flow.stdout.readline(), 120)
                if not line:
                    raise RuntimeError(f"the flow ended early; see {work}/flow-{mode}.log")
            _, run_id, mono, _wall = line.decode().split()
            called = int(mono)
            # Pauses come one at a time, so the next alert is this pause's; its apns-collapse-id is the Paused
            # state's id, which the webhook payload carries too. Nothing polls the server while it works.
            state_id, alert = await fake.next_arrival(timeout=30)
            hook = await sink.wait(state_id, timeout=60 if n < warmup else 30)
            status, body = await asyncio.to_thread(http_call, port, "GET", f"/api/flow_runs/{run_id}")
            state = json.loads(body).get("state") or {}
            if state.get("id") != state_id or state.get("state_details", {}).get("pause_key") != f"bench-{n}":
                raise RuntimeError(f"alert for state {state_id}, but the run is in {state.get('id')}")
            state_time = state["timestamp"]
            if n >= warmup:
                # The state's wall-clock timestamp on the monotonic scale, via one paired reading now.
                offset = time.time_ns() - time.monotonic_ns()
                state_mono = _parse_ts(state_time) - offset
                relay_ms.append(alert - called)
                relay_from_state.append(alert - state_mono)
                if hook is not None:
                    hook_ms.append(hook - called)
                    hook_from_state.append(hook - state_mono)
                if mode == "input":
                    # When Prefect stored the flow's input rows (their `created`, on the monotonic scale): no alert
                    # that quotes the description can come before its row exists.
                    rows = await input_rows_created(port, run_id, f"paused-bench-{n}-")
                    stored = {key.rsplit("-", 1)[-1]: _parse_ts(created) - offset for key, created in rows.items()}
                    for row, at in stored.items():
                        input_timing.setdefault(f"{row}_stored_from_call", []).append(at - called)
                    if "description" in stored:
                        described = stored["description"]
                        input_timing.setdefault("relay_after_description", []).append(alert - described)
                        if hook is not None:
                            input_timing.setdefault("automation_after_description", []).append(hook - described)
            await resume(port, run_id, {"run_input": {"comment": "ok"}} if mode == "input" else {})
        await asyncio.wait_for(flow.wait(), 60)
    finally:
        await stop(flow)
    return {"pauses": count, "relay_from_call": summary_ms(relay_ms),
            "automation_from_call": summary_ms(hook_ms) if hook_ms else None,
            "relay_from_state": summary_ms(relay_from_state),
            "automation_from_state": summary_ms(hook_from_state) if hook_from_state else None,
            "webhooks_missing": count - len(hook_ms),
            **{name: summary_ms(values) for name, values in sorted(input_timing.items())}}


async def input_rows_created(port: int, run_id: str, prefix: str) -> dict[str, str]:
    """The `created` stamp of each of a run's input rows under `prefix`, by key."""
    status, body = await asyncio.to_thread(http_call, port, "POST", f"/api/flow_runs/{run_id}/input/filter",
                                           {"prefix": prefix, "limit": 10})
    return {row["key"]: row["created"] for row in json.loads(body)} if status == 200 else {}


async def resume(port: int, run_id: str, body: dict) -> None:
    """POST /flow_runs/{id}/resume, retried: Prefect's SQLite answers 503 "database is locked" under load."""
    for attempt in range(20):
        status, answer = await asyncio.to_thread(http_call, port, "POST", f"/api/flow_runs/{run_id}/resume", body)
        if status in (200, 201) and b'"ACCEPT"' in answer:
            return
        await asyncio.sleep(0.1 * (attempt + 1))
    raise RuntimeError(f"could not resume {run_id}: {status} {answer[:200]!r}")


def _parse_ts(text: str) -> int:
    """ISO-8601 UTC (Prefect's `Z` or `+00:00`) to unix ns."""
    import datetime as dt

    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000


# MARK: - report

def machine() -> dict:
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    swift = subprocess.run([shutil.which("swift") or "/opt/swift/usr/bin/swift", "--version"], capture_output=True,
                           text=True).stdout.splitlines()
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "swift": swift[0] if swift else "", "date": time.strftime("%Y-%m-%d", time.gmtime())}


def table(results: dict) -> str:
    rows = ["| measurement | p50 | p90 | p99 | max | n |", "|---|---|---|---|---|---|"]

    def row(name, s):
        if s:
            rows.append(f"| {name} | {s['p50']} | {s['p90']} | {s['p99']} | {s['max']} | {s['n']} |")

    for entry in results.get("latency", []):
        d = entry["devices"]
        label = "event → APNs, 1 device" if d == 1 else f"event → last of {d:,} devices"
        if not entry.get("started", True):
            label += ", a run first heard of at its pause"
        row(label + " (ms)", entry["last"])
        row(f"  relay overhead, {d:,} (ms)", entry["relay_overhead"])
        row(f"  scripted peer's REST time, {d:,} (ms)", entry["peer_rest"])
    real = results.get("real")
    for mode, label in (("plain", "plain pause"), ("input", "pause with RunInput + description"),
                        ("waiting", "work.waiting right before the pause")):
        entry = (real or {}).get(mode)
        if entry:
            quoted = f", text quoted {entry['quoted']} of {entry['pauses'] + 2}" if "quoted" in entry else ""
            row(f"real Prefect, {label}: pause_flow_run → alert (ms{quoted})", entry["relay_from_call"])
            row(f"real Prefect, {label}: pause_flow_run → Automation webhook (ms)", entry["automation_from_call"])
            if "description_stored_from_call" in entry:
                # The floor for an alert that quotes the description: Prefect has to have stored it.
                row(f"real Prefect, {label}: pause_flow_run → description stored (ms)",
                    entry["description_stored_from_call"])
                row(f"real Prefect, {label}: description stored → alert (ms)", entry.get("relay_after_description"))
                row(f"real Prefect, {label}: description stored → Automation webhook (ms)",
                    entry.get("automation_after_description"))
    out = "\n".join(rows)
    tp = results.get("throughput")
    if tp:
        m = tp["median_per_second"]
        cpu = tp.get("client_cpu_us_per_push", {})
        out += ("\n\n| one APNs connection, 10,000 alerts | pushes/s (median) | client CPU per push (µs, median) |\n"
                "|---|---|---|\n"
                + "\n".join(f"| {name} | {value:,} | {cpu.get(name, '')} |" for name, value in m.items())
                + f"\n\nprefect-push / best h2load = {tp['ratio_vs_h2load']} (one path), "
                f"{tp.get('ratio_vs_h2load_same_requests', '-')} (the relay's requests); prefect-push / aioapns = "
                f"{tp['ratio_vs_aioapns']}×")
    fp = results.get("footprint")
    if fp:
        out += ("\n\n| footprint | |\n|---|---|\n"
                f"| idle RSS (subscribed, no devices) | {fp['idle_rss_kb'] / 1024:.1f} MiB: {fp['idle_private_kb'] / 1024:.1f} "
                f"private, {fp['idle_file_kb'] / 1024:.1f} code and data pages of the binary and shared libraries |\n"
                f"| RSS with 10,000 devices registered | {fp['rss_10k_devices_kb'] / 1024:.1f} MiB |\n"
                f"| RSS after a 10,000-device fan-out ({fp['fanout_10k_last_ms']} ms to the last) | "
                f"{fp['rss_after_10k_fanout_kb'] / 1024:.1f} MiB (peak {fp['peak_rss_kb'] / 1024:.1f}) |\n")
        for entry in results.get("latency", []):
            if entry["devices"] == 1000 and entry.get("started", True):
                out += f"| RSS after the 1,000-device fan-outs | {entry['rss_kb']['VmRSS'] / 1024:.1f} MiB |\n"
        out += (f"| binary (.build/release/prefect-push) | {fp['binary_bytes'] / 1e6:.1f} MB "
                f"({fp['binary_stripped_bytes'] / 1e6:.1f} MB stripped) |\n"
                f"| start-up until subscribed (p50 / max of {fp['startup_ms']['n']}) | "
                f"{fp['startup_ms']['p50']} / {fp['startup_ms']['max']} ms |")
    m = results["machine"]
    out += f"\n\nMeasured {m['date']} on {m['nproc']} cores ({m['cpu']}), Linux {m['kernel']}, {m['swift']}."
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--only", default="latency,throughput,footprint,real")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results.json"))
    # For an A/B of one row: "--latency-plan 1:300" runs only that row (devices:pauses, comma-separated for more;
    # "unseen" after a row's pauses, as in 1:300:unseen, makes it the run first heard of at its pause).
    parser.add_argument("--latency-plan", default="")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    if args.skip_real:
        parts.discard("real")
    work = tempfile.mkdtemp(prefix="prefect-push-bench-")
    results: dict = {**run_stamp(), "machine": machine()}
    peer = ScriptedPrefect()
    await peer.start()
    try:
        if "latency" in parts:
            fake = await Fake.start()
            try:
                plan = [(1, 50, True), (100, 20, True), (1000, 10, True), (1, 50, False)] if args.quick \
                    else [(1, 300, True), (100, 100, True), (1000, 50, True), (1, 300, False)]
                if args.latency_plan:
                    rows = [row.split(":") for row in args.latency_plan.split(",")]
                    plan = [(int(fields[0]), int(fields[1]), fields[2:] != ["unseen"]) for fields in rows]
                results["latency"] = [await latency_for(peer, fake, work, d, n, started=s) for d, n, s in plan]
            finally:
                await fake.stop()
        if "throughput" in parts:
            results["throughput"] = await throughput(work, 10_000, 1 if args.quick else 5)
        if "footprint" in parts:
            results["footprint"] = await footprint(peer, work, 2 if args.quick else 5)
        if "real" in parts:
            results["real"] = await real_prefect(work, 5 if args.quick else 20, 3 if args.quick else 10,
                                                 3 if args.quick else 10)
    finally:
        await peer.stop()
        await stop_all()
    results["table"] = table(results)
    results["relay_endings"] = RELAY_ENDINGS
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(results["table"])
    print(f"\nwrote {os.path.relpath(args.out, ROOT)}; logs in {work}")
    if RELAY_ENDINGS:
        print("bench: FAILED: " + "; ".join(RELAY_ENDINGS))
    return 1 if RELAY_ENDINGS else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
