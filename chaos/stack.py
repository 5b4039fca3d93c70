"""The processes `make chaos` runs and what it reads from them: a real Prefect server, the fake APNs, the relay, and
flows that pause. 127.0.0.1 only; every wait has a deadline; `stop_all()` stops whatever is still running.
How every relay and fake APNs process ended is kept and judged (`Endings`).
"""
from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from harness import (AUTH, BASIC, ending, free_port, http_call, judge, log, register,  # noqa: E402,F401
                     signal_process, spawn, started, stop, stop_all)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
FIX = os.path.join(ROOT, "Tests", "RelayTests", "Fixtures", "apns")
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
KEY_ID, TEAM_ID = "TESTKEY123", "TEAM123456"


# MARK: - how the processes ended

class Endings:
    """How each relay and fake APNs process of a scenario ended, and what was wrong with that (`harness.judge`).
    A process the harness stopped may exit 0 or die of the SIGTERM it sent; any other ending must be one the
    scenario explains (`expected`: the fake's SIGKILL in relay-kill, db-deleted's exit, the fake's own `exit`).
    A death by any other signal, another exit code, or a process that needed SIGKILL at its stop is a problem."""

    def __init__(self):
        self.seen: list[str] = []  # "relay pid 123: signal SIGKILL (9)", one per process, in order
        self.problems: list[str] = []

    def judge(self, name: str, process, expected: tuple = (0,)) -> None:
        """Judges `process` (ended) once; later calls for the same process do nothing."""
        if getattr(process, "judged", False):
            return
        process.judged = True
        stopped = getattr(process, "stopped_by_harness", False)
        self.seen.append(f"{name}: {ending(process.returncode)}" + (" (stopped)" if stopped else ""))
        problem = judge(name, process, (*expected, 0, -signal.SIGTERM) if stopped else expected)
        if problem:
            self.problems.append(problem)


# MARK: - HTTP

async def call(port: int, method: str, path: str, body: dict | None = None, timeout: float = 10) -> tuple[int, bytes]:
    return await asyncio.to_thread(http_call, port, method, path, body, BASIC, timeout)


# MARK: - Prefect

class Prefect:
    """`prefect server start` with its own PREFECT_HOME and basic auth; REST calls go to it directly."""

    def __init__(self, work: str):
        self.home = os.path.join(work, "prefect-home")
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}/api"
        self.client_env = {"PREFECT_API_URL": self.api, "PREFECT_API_AUTH_STRING": AUTH, "PREFECT_HOME": self.home,
                           "PREFECT_LOGGING_LEVEL": "WARNING"}
        self.log_path = os.path.join(work, "prefect-server.log")

    async def start(self) -> None:
        env = {"PREFECT_HOME": self.home, "PREFECT_SERVER_API_AUTH_STRING": AUTH,
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_UI_ENABLED": "false",
               "PREFECT_SERVER_UI_ENABLED": "false", "PREFECT_SERVER_LOGGING_LEVEL": "WARNING"}
        self.process = await spawn(os.path.join(ROOT, ".venv", "bin", "prefect"), "server", "start", "--host",
                                   "127.0.0.1", "--port", str(self.port), env=env, log_path=self.log_path, group=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.returncode is None:
            try:
                if (await asyncio.to_thread(http_call, self.port, "GET", "/api/health", None, None, 2))[0] == 200:
                    return
            except OSError:
                pass
            await asyncio.sleep(0.3)
        raise RuntimeError(f"Prefect did not start in 120 s; see {self.log_path}")

    async def paused_state(self, run_id: str, timeout: float = 30) -> str:
        """The id of the run's PAUSED state, once the run is in it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body = await call(self.port, "GET", f"/api/flow_runs/{run_id}")
            state = (json.loads(body).get("state") or {}) if status == 200 else {}
            if state.get("type") == "PAUSED":
                return state["id"]
            await asyncio.sleep(0.05)
        raise RuntimeError(f"run {run_id} did not pause in {timeout} s")

    async def resume(self, run_id: str) -> None:
        """Retried: Prefect's SQLite answers 503 "database is locked" under load."""
        for attempt in range(20):
            status, answer = await call(self.port, "POST", f"/api/flow_runs/{run_id}/resume", {})
            if status in (200, 201) and b'"ACCEPT"' in answer:
                return
            await asyncio.sleep(0.1 * (attempt + 1))
        raise RuntimeError(f"could not resume {run_id}: {status} {answer[:200]!r}")

    async def cancel(self, run_id: str) -> None:
        """Forces the run into Cancelled (best effort: the pause times out on its own anyway)."""
        for attempt in range(10):
            status, _ = await call(self.port, "POST", f"/api/flow_runs/{run_id}/set_state",
                                   {"state": {"type": "CANCELLED", "name": "Cancelled"}, "force": True})
            if status in (200, 201):
                return
            await asyncio.sleep(0.1 * (attempt + 1))


@dataclass
class Pause:
    run_id: str
    state_id: str
    called_ns: int  # CLOCK_MONOTONIC just before pause_flow_run
    next_called_ns: float = float("inf")  # the same run's next pause, once there is one


class Pauser:
    """One flow run (chaos/pauser.py) that pauses again each time it is resumed."""

    def __init__(self, prefect: Prefect, work: str, name: str):
        self.prefect = prefect
        self.log_path = os.path.join(work, f"{name}.log")
        self.run_id: str | None = None
        self.paused = False
        self.last: Pause | None = None

    async def start(self, count: int) -> None:
        """Starts the flow and waits until it is ready to pause; its run id is known from then on."""
        self.process = await spawn(PYTHON, os.path.join(ROOT, "chaos", "pauser.py"), str(count),
                                   env=self.prefect.client_env, log_path=self.log_path, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE)
        self.run_id = (await self._read_until(b"WAITING", 90)).decode().split()[1]

    async def pause(self) -> Pause:
        """Makes the flow pause now and reads the pause (its PAUSED state id from Prefect)."""
        self.process.stdin.write(b"\n")
        await self.process.stdin.drain()
        line = await self._read_until(b"PAUSING ", 30)
        _, run_id, called = line.decode().split()
        self.run_id, self.paused = run_id, True
        if self.last:
            self.last.next_called_ns = int(called)
        self.last = Pause(run_id, await self.prefect.paused_state(run_id), int(called))
        return self.last

    async def _read_until(self, prefix: bytes, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), max(0.1, deadline - time.monotonic()))
            if not line:
                raise RuntimeError(f"the pausing flow ended early; see {self.log_path}")
            if line.startswith(prefix):
                return line

    async def resume(self) -> None:
        self.paused = False
        await self.prefect.resume(self.run_id)

    async def finish(self) -> None:
        """Cancels a pause still open and stops the flow, so nothing lingers on the server."""
        if self.paused and self.run_id:
            await self.prefect.cancel(self.run_id)
        await stop(self.process, timeout=5)


# MARK: - fake APNs

class Arrivals:
    """What the fake APNs answered, from its `arrival` lines: the stamps of accepted pushes."""

    def __init__(self):
        self.accepted: dict[tuple[str, str, str], list[int]] = {}  # (collapse id, push type, token)
        self.without_collapse: dict[tuple[str, str, str], list[int]] = {}  # (run id, push type, token)
        self.total = 0  # every request, answered or not
        # Every request: (stamp, push type, token, status, message), the message being its collapse id, or for a push
        # without one (a Live Activity start) "run <run id>".
        self.requests: list[tuple[int, str, str, int, str]] = []

    def add(self, stamp: int, token: str, collapse: str, push_type: str, status: int, run_id: str) -> None:
        self.total += 1
        message = collapse if collapse != "-" else f"run {run_id}"
        self.requests.append((stamp, push_type, token.lower(), status, message))
        if status != 200:
            return
        if collapse != "-":
            self.accepted.setdefault((collapse, push_type, token.lower()), []).append(stamp)
        else:
            self.without_collapse.setdefault((run_id, push_type, token.lower()), []).append(stamp)

    def stamps(self, pause: "Pause", push_type: str, token: str) -> list[int]:
        """Accepted pushes of this type to `token` for `pause`: by collapse id (= the pause's state id) or, for a
        relay that sends them without one (Live Activity starts), by run id while this was the run's open pause."""
        found = self.accepted.get((pause.state_id, push_type, token))
        if found:
            return found
        return [s for s in self.without_collapse.get((pause.run_id, push_type, token), [])
                if pause.called_ns <= s < pause.next_called_ns]


class FakeAPNs:
    """`fake-apns --arrivals --control`; killed and started again on the same port, its arrivals kept."""

    def __init__(self, binary: str, work: str, endings: Endings | None = None):
        self.binary = binary
        self.endings = endings or Endings()
        self.process = None
        self.log_path = os.path.join(work, "fake-apns.log")
        self.port = 0
        self.arrivals = Arrivals()
        self.acks: asyncio.Queue = asyncio.Queue()
        self.kills: asyncio.Queue = asyncio.Queue()  # CLOCK_MONOTONIC ns of each `kill ... after` done

    async def start(self) -> None:
        argv = [self.binary, "--name", "production", "--port", str(self.port), "--cert", f"{FIX}/server.pem",
                "--key", f"{FIX}/server.key", "--jwt-public-key", f"{FIX}/AuthKey_TESTKEY123.pub.pem",
                "--key-id", KEY_ID, "--team-id", TEAM_ID, "--arrivals", "--control"]
        self.process = await spawn(*argv, log_path=self.log_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = await asyncio.wait_for(self.process.stdout.readline(), 10)
        found = re.search(rb"listening on https://127\.0\.0\.1:(\d+)", line)
        if not found:
            raise RuntimeError(f"fake-apns did not start: {line!r}")
        self.port = int(found.group(1))
        self.reader = asyncio.create_task(self._read(self.process))

    async def _read(self, process) -> None:
        async for raw in process.stdout:
            parts = raw.split()
            if len(parts) == 7 and parts[0] == b"arrival":
                self.arrivals.add(int(parts[1]), parts[2].decode(), parts[3].decode(), parts[4].decode(),
                                  int(parts[5]), parts[6].decode())
            elif len(parts) == 3 and parts[0] == b"killed":
                self.kills.put_nowait(int(parts[2]))
            elif parts[:1] in ([b"ok"], [b"error"]):
                self.acks.put_nowait(raw.decode().strip())

    async def command(self, text: str) -> None:
        """Sends one --control command and waits until the fake says it is in effect."""
        self.process.stdin.write(text.encode() + b"\n")
        await self.process.stdin.drain()
        ack = await asyncio.wait_for(self.acks.get(), 5)
        if ack != f"ok {text}":
            raise RuntimeError(f"fake-apns refused {text!r}: {ack}")

    async def kill_after(self, process: asyncio.subprocess.Process, requests: int, wait_ms: int = 0) -> None:
        """Has the fake SIGKILL `process` as the `requests`-th request from now arrives, or `wait_ms` after (see
        `killed`)."""
        await self.command(f"kill {process.pid} after {requests}" + (f" wait {wait_ms}" if wait_ms else ""))

    async def killed(self, timeout: float = 60) -> int:
        """When the kill `kill_after` planned was done (CLOCK_MONOTONIC ns, the clock of the arrival stamps)."""
        return await asyncio.wait_for(self.kills.get(), timeout)

    async def die(self) -> None:
        """Ends the fake the way kill -9 does, but with every request it answered reported (`exit`)."""
        self.process.stdin.write(b"exit\n")
        await self.process.stdin.drain()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except asyncio.TimeoutError:
            signal_process(self.process, signal.SIGKILL)
            await self.process.wait()
            self.process.judged = True
            self.endings.problems.append(f"fake-apns pid {self.process.pid} did not end on its exit command in 5 s")
        await self.reader
        started.remove(self.process)
        self.endings.judge(f"fake-apns pid {self.process.pid}", self.process, expected=(137,))  # its exit's code

    async def stop(self) -> None:
        if self.process is None:
            return
        await stop(self.process)
        if getattr(self, "reader", None):
            self.reader.cancel()
        self.endings.judge(f"fake-apns pid {self.process.pid}", self.process)


# MARK: - the relay

@dataclass
class Device:
    id: str
    token: str
    start_token: str


def devices(count: int) -> list[Device]:
    """Distinct lowercase hex tokens; every device has a push-to-start token."""
    return [Device(f"phone-{n}", "a1" + format(n, "062x"), "b1" + format(n, "062x")) for n in range(count)]


def register_phones(port: int, phones: list[Device]) -> None:
    register(port, [{"id": phone.id, "token": phone.token, "start_token": phone.start_token,
                     "environment": "production", "server_id": "chaos"} for phone in phones])


class Relay:
    """The relay under test (CHAOS_RELAY_BIN): Prefect through the proxy, APNs at the fake, its own DB and port.
    Started again with the same environment after a kill, as a supervisor would. Every process it started is judged
    as it is replaced or stopped (`endings`): one that ended by itself may only exit with `expected_exits`."""

    def __init__(self, binary: str, work: str, prefect_url: str, apns_port: int, db_path: str,
                 prefix: tuple = (), endings: Endings | None = None):
        self.binary = binary
        self.endings = endings or Endings()
        self.expected_exits: tuple = (0,)  # db-deleted: the exit its fault causes
        self.prefix = prefix  # a command the relay runs under, e.g. prlimit for a low descriptor limit
        self.port = free_port()
        self.log_path = os.path.join(work, "relay.log")
        self.db_path = db_path
        self.env = {"PREFECT_API_URL": prefect_url, "PREFECT_API_AUTH_STRING": AUTH, "PORT": str(self.port),
                    "DB_PATH": db_path, "APNS_KEY_PATH": f"{FIX}/AuthKey_TESTKEY123.p8", "APNS_KEY_ID": KEY_ID,
                    "APNS_TEAM_ID": TEAM_ID, "APNS_CA_FILE": f"{FIX}/ca.pem",
                    "APNS_PRODUCTION_URL": f"https://127.0.0.1:{apns_port}",
                    "APNS_DEVELOPMENT_URL": f"https://127.0.0.1:{apns_port}"}
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float = 30) -> None:
        """Starts it and waits until /health says it is subscribed to the events socket."""
        if self.process:
            await self.stop()  # one that exited or was killed: judged, then forgotten
        self.process = await spawn(*self.prefix, self.binary, env=self.env, log_path=self.log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise RuntimeError(f"the relay exited ({self.process.returncode}); see {self.log_path}")
            health = await self.health()
            if health and health.get("subscribed"):
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the relay did not subscribe in {timeout} s; see {self.log_path}")

    async def health(self) -> dict | None:
        try:
            status, body = await asyncio.to_thread(http_call, self.port, "GET", "/health", None, None, 2)
            return json.loads(body) if status == 200 else None
        except (OSError, ValueError, http.client.HTTPException):
            return None

    async def outbox_pending(self) -> int | None:
        """Pushes stored and not yet answered (`prefect_push_outbox_pending`), or None if it can't be read."""
        try:
            status, body = await asyncio.to_thread(http_call, self.port, "GET", "/metrics", None, BASIC, 2)
        except (OSError, http.client.HTTPException):
            return None
        found = re.search(rb"^prefect_push_outbox_pending (\d+)$", body, re.MULTILINE) if status == 200 else None
        return int(found.group(1)) if found else None

    def unconfirmed_pushes(self) -> int:
        """Pushes the relay sent, got no answer for, and did not send again (`prefect_push_pushes_unconfirmed_total`,
        since its last start); 0 if it can't be read (a relay that is down has confirmed nothing)."""
        try:
            status, body = http_call(self.port, "GET", "/metrics", None, BASIC, 2)
        except (OSError, http.client.HTTPException):
            return 0
        found = re.search(rb"^prefect_push_pushes_unconfirmed_total (\d+)$", body, re.MULTILINE) if status == 200 else None
        return int(found.group(1)) if found else 0

    async def register(self, phones: list[Device]) -> None:
        await asyncio.to_thread(register_phones, self.port, phones)

    def expect_kill(self) -> None:
        """The running process is about to be killed by the scenario's fault (SIGKILL): that ending is expected."""
        self.process.fault_endings = (-signal.SIGKILL,)

    async def kill(self) -> None:
        self.expect_kill()
        signal_process(self.process, signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> None:
        """Stops the process (if still running) and judges how it ended."""
        if self.process:
            await stop(self.process)
            self.endings.judge(f"relay pid {self.process.pid}", self.process,
                               self.expected_exits + getattr(self.process, "fault_endings", ()))
