"""What every harness here shares (`make bench`, `make chaos`, the API attacks, the release smoke and the symbol
order): a free port on 127.0.0.1, a log line, one HTTP call to the relay's API, and child processes that are always
stopped (SIGTERM, then SIGKILL after a deadline, whole process groups included). 127.0.0.1 only.
"""
from __future__ import annotations

import asyncio
import base64
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

AUTH = "admin:pass"
BASIC = "Basic " + base64.b64encode(AUTH.encode()).decode()

#: Every process `spawn` started that `stop` has not stopped yet; `stop_all` stops them, newest first.
started: list[asyncio.subprocess.Process] = []


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_call(port: int, method: str, path: str, body: dict | None = None, auth: str | None = BASIC,
              timeout: float = 10) -> tuple[int, bytes]:
    """One request to 127.0.0.1:`port` on its own connection; (status, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"content-type": "application/json"} if body is not None else {}
        if auth:
            headers["authorization"] = auth
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        reply = connection.getresponse()
        return reply.status, reply.read()
    finally:
        connection.close()


def register(port: int, bodies: list[dict]) -> None:
    """POST /devices with each body, over one keep-alive connection (reopened when the relay closes it); raises when
    one isn't answered 200."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for body in bodies:
            for attempt in range(3):
                try:
                    connection.request("POST", "/devices", body=json.dumps(body),
                                       headers={"content-type": "application/json", "authorization": BASIC})
                    reply = connection.getresponse()
                    reply.read()
                    break
                except (http.client.HTTPException, ConnectionError):
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    if attempt == 2:
                        raise
            if reply.status != 200:
                raise RuntimeError(f"POST /devices answered {reply.status}")
            if reply.getheader("connection", "").lower() == "close":
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    finally:
        connection.close()


# MARK: - asyncio children (bench, chaos)

async def spawn(*argv: str, env: dict | None = None, log_path: str | None = None, stdin=subprocess.DEVNULL,
                stdout=None, stderr=None, group: bool = False, unset: tuple = ()) -> asyncio.subprocess.Process:
    """Starts a child with this process's environment, less the variables in `unset`, plus `env`. stdout and stderr
    go where given; what isn't given goes into `log_path` when there is one, else nowhere. With `group`, in a session
    of its own, so its children are stopped with it."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    inherited = {name: value for name, value in os.environ.items() if name not in unset}
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, env={**inherited, **(env or {})}, stdin=stdin, stdout=stdout or out, stderr=stderr or out,
            start_new_session=group)
    finally:
        if log_path:
            out.close()
    process.own_group = group
    started.append(process)
    return process


def signal_process(process: asyncio.subprocess.Process, sig: int) -> None:
    try:
        if process.own_group:
            os.killpg(process.pid, sig)  # the session `spawn` created for it, nothing else
        else:
            process.send_signal(sig)
    except ProcessLookupError:
        pass


async def stop(process: asyncio.subprocess.Process, timeout: float = 10) -> int:
    """SIGTERM, then SIGKILL after `timeout`; a group's stragglers are killed too. Returns how it ended
    (`returncode`: negative for a signal) and marks a process that needed the SIGKILL (`process.hung_at_stop`)."""
    process.hung_at_stop = getattr(process, "hung_at_stop", False)
    if process.returncode is None:
        process.stopped_by_harness = True
        signal_process(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except asyncio.TimeoutError:
            process.hung_at_stop = True
            signal_process(process, signal.SIGKILL)
            await process.wait()
    if process.own_group:
        signal_process(process, signal.SIGKILL)
    if process in started:
        started.remove(process)
    return process.returncode


async def stop_all() -> None:
    for process in list(reversed(started)):
        await stop(process, timeout=5)


# MARK: - how a child ended

def ending(returncode: int | None) -> str:
    """"exit N", "signal SIGSEGV (11)" or "still running", for a returncode as subprocess and asyncio give it
    (negative: killed by that signal) or as a shell gives it (128 + the signal)."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name} ({-returncode})"
        except ValueError:
            return f"signal {-returncode}"
    if 128 < returncode < 128 + 65:
        try:
            return f"exit {returncode} (signal {signal.Signals(returncode - 128).name} through a shell)"
        except ValueError:
            pass
    return f"exit {returncode}"


def bad_ending(name: str, returncode: int | None, expected: tuple = (0,), hung: bool = False) -> str | None:
    """What was wrong with how process `name` ended, or None: a death by a signal the harness did not send to end
    it, an exit code the scenario did not cause (`expected`), or a process that ignored SIGTERM (`hung`)."""
    if hung:
        return f"{name} did not stop on SIGTERM within its bound and was killed ({ending(returncode)})"
    if returncode is None or returncode in expected:
        return None
    return f"{name} ended with {ending(returncode)}" + (" (a crash)" if returncode < 0 or returncode > 128 else "")


def judge(name: str, process, expected: tuple = (0,)) -> str | None:
    """`bad_ending` for a process `stop` has stopped (or that ended by itself)."""
    return bad_ending(name, process.returncode, expected, getattr(process, "hung_at_stop", False))


# MARK: - plain children (the API attacks)

def start_prefect(prefect: str, work: str, port: int, auth: str) -> subprocess.Popen:
    """`prefect server start` on 127.0.0.1:`port` (its home and log in `work`), once its /api/health answers."""
    env = dict(os.environ, PREFECT_HOME=work + "/prefect", PREFECT_SERVER_API_AUTH_STRING=auth,
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_ENABLED="false")
    process = subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)], env=env,
                               stdout=open(work + "/prefect.log", "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2).status == 200:
                return process
        except OSError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.3)
    process.kill()
    raise SystemExit(f"Prefect did not answer on port {port}; see {work}/prefect.log")


def stop_processes(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to each, newest first; SIGKILL to any still running 10 s later."""
    for process in reversed(processes):
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
