#!/usr/bin/env python3
"""A battery of bad HTTP input against the relay's API (issue 11): random bytes, bad request lines, huge and many
headers, invalid UTF-8, NULs, deep nesting, path tricks, malformed credentials and bodies at the 64 KiB boundary.

Starts a local Prefect server (basic auth) and the relay, registers one device, sends --requests requests from
--threads threads, then checks: the relay is alive, no answer is a 5xx, every answer is the relay's JSON, and the
device table holds exactly the device registered (plus none of the battery's), every request was answered (a close
is an answer only for the attacks in MAY_CLOSE), and the relay exited 0 on SIGTERM. Prints one JSON object.

    .venv/bin/python tools/bad-input.py --relay .build/debug/prefect-push [--requests 20000] [--threads 16]
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time

from harness import bad_ending, ending, free_port, start_prefect, stop_processes  # tools/harness.py, beside this file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUTH = "demo:demo"
GOOD = "Basic ZGVtbzpkZW1v"
TOKEN = "ab" * 32
KEEP = "keep-me"


def exchange(port, data, timeout=8.0):
    """Sends data; returns the raw answer and how the exchange ended: "answered" (bytes came), "closed" (the relay
    closed without a byte), "reset" (the kernel reset the connection: the relay closed with bytes of ours unread) or
    "timeout" (nothing within `timeout`: a request left hanging)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
    except OSError:
        pass  # the relay may answer (431, 413) and close before taking it all
    out, how = b"", "closed"
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
            m = re.search(rb"\r\n\r\n", out)
            if m:
                length = re.search(rb"(?i)content-length: *(\d+)", out[:m.start()])
                if length and len(out) - m.end() >= int(length.group(1)):
                    break
                if out.startswith(b"HTTP/1.1 204"):
                    break
    except socket.timeout:
        how = "timeout"
    except OSError:
        how = "reset"
    s.close()
    return out, ("answered" if out else how)


# Attacks the relay may answer by closing the connection: past a limit (a 16 KiB head, 100 headers, a 64 KiB body) it
# stops reading, answers 431 or 413 and closes, and the bytes of ours it never read make the kernel reset the
# connection, which can take the answer with it. Every other attack fits in one read and must be answered; a request
# left hanging (no answer within 8 s) fails the run whatever the attack.
MAY_CLOSE = {"huge-header", "many-headers", "64KiB-boundary"}


def left_unanswered(kind: str, how: str) -> bool:
    """Whether an exchange that ended `how` ("answered", "closed", "reset", "timeout", "connect-failed") left attack
    `kind` without the answer it is owed."""
    if how == "answered":
        return False
    return not (kind in MAY_CLOSE and how in ("closed", "reset"))


def request(method, path, headers=None, body=b"", auth=True):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".encode("latin-1", "replace")
    if auth:
        head += f"Authorization: {GOOD}\r\n".encode()
    for name, value in (headers or {}).items():
        head += name + b": " + value + b"\r\n"
    if body:
        if b"Content-Length" not in (headers or {}):
            head += b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        if b"Content-Type" not in (headers or {}):
            head += b"Content-Type: application/json\r\n"
    return head + b"\r\n" + body


def battery(rng):
    """One bad request, as bytes, and its kind."""
    kind = rng.randrange(14)
    junk = lambda n: bytes(rng.randrange(256) for _ in range(n))
    if kind == 0:
        return "random-bytes", junk(rng.randrange(1, 2000)) + b"\r\n\r\n"
    if kind == 1:
        method = rng.choice([b"GET", b"get", b"BREW", b"G\x00T", b"", b"POST /x", b"\xff\xfe", b"PRI"])
        version = rng.choice([b"HTTP/1.1", b"HTTP/9.9", b"HTTP/2.0", b"HTTP/1", b"HTTP/1.1x", b"", b"\x00"])
        return "request-line", method + b" /push/health " + version + b"\r\n\r\n"
    if kind == 2:
        return "huge-header", request("GET", "/push/health", {b"X-Big": b"a" * rng.choice([8000, 16000, 65536, 100000])})
    if kind == 3:
        return "many-headers", request("GET", "/push/health", {b"X-%d" % i: b"v" for i in range(rng.choice([101, 500, 2000]))})
    if kind == 4:
        path = "/push/devices/" + rng.choice([f"{KEEP}/", f"x/../{KEEP}", f"%2e/{KEEP}", f"{KEEP}%2F", f"./{KEEP}",
                                              f"/{KEEP}", f"{KEEP}//", f"%2E%2E/{KEEP}", f"{KEEP}%00", f"{KEEP}%"])
        return "path-trick", request(rng.choice(["DELETE", "POST"]), path)
    if kind == 5:
        return "invalid-utf8-path", b"DELETE /push/devices/" + junk(20).replace(b" ", b"x").replace(b"\r", b"x").replace(b"\n", b"x") + b" HTTP/1.1\r\n\r\n"
    if kind == 6:
        return "nul-header", request("GET", "/push/health", {b"X-Nul": b"a\x00b"})
    if kind == 7:
        depth = rng.choice([100, 5000, 60000])
        return "deep-nesting", request("POST", "/push/devices", body=b"[" * depth)
    if kind == 8:
        body = json.dumps({"id": "x" + "\u202e", "token": TOKEN, "environment": "production", "server_id": "s"}).encode()
        body = rng.choice([body, body.replace(b"x", b"\xff"), b'{"id":"a\\u0000b","token":"' + TOKEN.encode() + b'"}',
                           b'{"id":"\xed\xa0\x80"}', b"\x00" * 100, b'{"id":' + b'"' + b"a" * 300 + b'"}'])
        return "bad-body", request("POST", "/push/devices", body=body)
    if kind == 9:
        size = rng.choice([65535, 65536, 65537, 70000])
        body = (b'{"pad":"' + b"a" * size)[:size - 2] + b'"}'
        return "64KiB-boundary", request("POST", "/push/devices", body=body)
    if kind == 10:
        value = rng.choice([b"Basic a\x01b", b"Basic \xc3\xa9", b"A" * 9000, b"", b" Basic x", b"Basic \x7f"])
        return "bad-authorization", request("DELETE", f"/push/devices/{KEEP}", {b"Authorization": value}, auth=False)
    if kind == 11:
        return "lying-length", request("POST", "/push/devices", {b"Content-Length": rng.choice([b"-1", b"abc", b"99999999999999999999", b"10, 12"])}, body=b"{}")
    if kind == 12:
        return "upgrade", request("GET", "/push/health", {b"Upgrade": b"websocket", b"Connection": b"Upgrade",
                                                          b"Sec-WebSocket-Key": b"dGhlIHNhbXBsZSBub25jZQ==",
                                                          b"Sec-WebSocket-Version": b"13"})
    return "wrong-credential", request("DELETE", f"/push/devices/{KEEP}", {b"Authorization": b"Basic " + junk(12).hex().encode()}, auth=False)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--relay", default=os.path.join(ROOT, ".build/debug/prefect-push"))
    parser.add_argument("--prefect", default=os.path.join(ROOT, ".venv/bin/prefect"))
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bad-input-")
    procs = []
    try:
        prefect_port, relay_port = free_port(), free_port()
        api = f"http://127.0.0.1:{prefect_port}/api"
        procs.append(start_prefect(args.prefect, work, prefect_port, AUTH))
        relay = subprocess.Popen([args.relay], env=dict(os.environ, PREFECT_API_URL=api, PREFECT_API_AUTH_STRING=AUTH,
                                                       PORT=str(relay_port), DB_PATH=work + "/relay.db",
                                                       BASE_PATH="/push", LOG_LEVEL="warn"),
                                 stdout=open(work + "/relay.log", "w"), stderr=subprocess.STDOUT)
        procs.append(relay)
        time.sleep(1)
        first, _ = exchange(relay_port, request("POST", "/push/devices", body=json.dumps(
            {"id": KEEP, "token": TOKEN, "environment": "production", "server_id": "s"}).encode()))
        assert first.startswith(b"HTTP/1.1 200"), first[:200]

        rng = random.Random(args.seed)
        cases = [battery(rng) for _ in range(args.requests)]
        results = {}

        def run(case):
            kind, data = case
            try:
                answer, how = exchange(relay_port, data)
            except OSError as error:
                return kind, "connect-failed:" + type(error).__name__, None, "connect-failed"
            m = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
            if not m:
                return kind, "no-answer:" + how if how != "answered" else "not-http", None, how
            status = int(m.group(1))
            body = answer.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in answer else b""
            is_json = True
            if status != 204:
                try:
                    json.loads(body)
                except ValueError:
                    is_json = False
            return kind, status, is_json, how

        started = time.time()
        with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
            for kind, status, is_json, how in pool.map(run, cases):
                entry = results.setdefault(kind, {"statuses": {}, "not_json": 0, "unanswered": 0})
                entry["statuses"][str(status)] = entry["statuses"].get(str(status), 0) + 1
                if is_json is False:
                    entry["not_json"] += 1
                # An answer that is not HTTP at all is no answer either.
                if left_unanswered(kind, how) or status == "not-http":
                    entry["unanswered"] += 1
        seconds = time.time() - started
        devices = [row[0] for row in sqlite3.connect(work + "/relay.db").execute("SELECT id FROM devices")]
        alive = relay.poll() is None
        ending_problem = stop_relay(relay)
        all_statuses = {}
        for entry in results.values():
            for status, n in entry["statuses"].items():
                all_statuses[status] = all_statuses.get(status, 0) + n
        summary = {
            "relay": args.relay, "requests": args.requests, "seconds": round(seconds, 1),
            "relay_alive": alive, "relay_ending": ending(relay.returncode), "relay_ending_problem": ending_problem,
            # 505 is the answer chosen for an HTTP version other than 1.x; any other 5xx would be the relay's fault.
            "server_errors_5xx_not_505": sum(n for s, n in all_statuses.items()
                                             if s.isdigit() and int(s) >= 500 and s != "505"),
            "no_answer": sum(n for s, n in all_statuses.items() if not s.isdigit()),
            # Of those, the requests owed an answer (MAY_CLOSE says which attacks may be answered by a close).
            "unanswered": sum(e["unanswered"] for e in results.values()),
            "not_json": sum(e["not_json"] for e in results.values()),
            "statuses": dict(sorted(all_statuses.items())),
            "devices": devices,
            "by_kind": results,
        }
        print(json.dumps(summary, indent=1))
        failures = failed(summary)
        print("bad-input: " + ("FAILED: " + "; ".join(failures) if failures else "passed"))
        return 1 if failures else 0
    finally:
        stop_processes(procs)
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


def failed(summary: dict) -> list[str]:
    """What the battery found wrong: each is a failure (exit 1), not a figure to read."""
    out = []
    if not summary["relay_alive"]:
        out.append("the relay died")
    if summary["server_errors_5xx_not_505"]:
        out.append(f"{summary['server_errors_5xx_not_505']} answers were 5xx")
    if summary["unanswered"]:
        kinds = sorted(kind for kind, e in summary.get("by_kind", {}).items() if e["unanswered"])
        out.append(f"{summary['unanswered']} requests were left without an answer ({', '.join(kinds)})")
    if summary.get("relay_ending_problem"):
        out.append(summary["relay_ending_problem"])
    if summary["not_json"]:
        out.append(f"{summary['not_json']} answers were not JSON")
    if summary["devices"] != [KEEP]:
        out.append(f"the device table holds {summary['devices'][:5]} instead of only {KEEP}")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
