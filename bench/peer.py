"""A scripted Prefect server for `make bench`: the events socket and the REST reads the relay makes, answered at once.

One asyncio listener on 127.0.0.1 serves both, as Prefect does under one API root:

* `GET /api/events/out` with subprotocol `prefect`: auth -> auth_success -> filter, then the events the benchmark
  emits (src/prefect/server/api/events.py). The frame is encoded first; the send time is `time.monotonic_ns()` taken right
  before the write (CLOCK_MONOTONIC, the clock the fake APNs stamps arrivals with).
* Standalone (`python3 bench/peer.py PORT [LIFETIME_S]`, used by the metrics and credential-flood tests):
  `POST /control/pause` emits a new pause (answer: its run, state and the monotonic ns of the write),
  `POST /control/resume/{run}` its Running event. `POST /control/hold-credential-checks` makes every later
  `POST /flows/count` with a credential other than the configured one go unanswered, its connection held open (a
  Prefect whose database is locked); `POST /control/release-credential-checks` answers the held ones (401, as
  usual) and stops holding; `GET /control/credential-checks` tells how many are held now.
* REST, shapes from fixtures/prefect (Tests/RelayTests/Fixtures/prefect): `GET /flow_runs/{id}`, `GET /flows/{id}`,
  `POST /flow_runs/{id}/input/filter`, `POST /artifacts/filter`, `POST /events/filter`, `POST /flow_runs/filter`,
  `POST /flows/count`, each needing `Authorization: Basic admin:pass` (else 401, as Prefect with an auth string; `GET /health` is open).
  Every answer is pre-encoded and written at once (a held credential check aside); each request's service time
  (first byte -> answer written) is kept so the benchmark can tell the relay's share of a latency from the peer's.

Hand-rolled on asyncio.Protocol (HTTP/1.1 + RFC 6455 server framing, ~150 lines) rather than aiohttp or
websockets: `websockets` serves GET only, one listener must carry both, and a few microseconds per request matter
here. No dependency beyond the standard library.
"""
from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import hashlib
import json
import os
import struct
import time
import uuid

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "Tests", "RelayTests", "Fixtures", "prefect")
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def fixture(name: str):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


def iso(t: float, z: bool = True) -> str:
    text = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text + ("Z" if z else "+00:00")


def http_response(status: int, body: bytes, reason: str = "OK", close: bool = False) -> bytes:
    """HTTP/1.1 answers keep the connection open, as Prefect's server (uvicorn) does, unless `close`."""
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            + ("connection: close\r\n" if close else "") + "\r\n")
    return head.encode() + body


def ws_frame(payload: bytes, opcode: int = 1) -> bytes:
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


class Run:
    """One paused run: its event frame and the REST answers about it, all encoded up front."""

    def __init__(self, peer: "ScriptedPrefect", name: str):
        now = time.time()
        self.id = str(uuid.uuid4())
        self.state_id = str(uuid.uuid4())
        self.name = name
        event = copy.deepcopy(peer.event_template)
        event["occurred"] = iso(now)
        event["received"] = iso(now)
        event["id"] = self.state_id
        event["follows"] = str(uuid.uuid4())
        resource = event["resource"]
        resource["prefect.resource.id"] = "prefect.flow-run." + self.id
        resource["prefect.resource.name"] = name
        resource["prefect.state-timestamp"] = iso(now, z=False)
        event["related"][0]["prefect.resource.id"] = "prefect.flow." + peer.flow_id
        self.frame = ws_frame(json.dumps({"type": "event", "event": event}).encode())

        run = copy.deepcopy(peer.run_template)
        run.update(id=self.id, name=name, flow_id=peer.flow_id, state_id=self.state_id)
        state = run["state"]
        state.update(id=self.state_id, timestamp=iso(now))
        state["state_details"].update(flow_run_id=self.id, pause_timeout=iso(now + 15 * 60))
        self.run_answer = http_response(200, json.dumps(run).encode())
        rows = copy.deepcopy(peer.rows_template)
        for row in rows:
            row["flow_run_id"] = self.id
        self.rows_answer = http_response(200, json.dumps(rows).encode())

        # The run starting (before its pause, as every real run does) and moving on (a resume, which ends the
        # pause so waiting pauses don't pile up over a long benchmark).
        self.start_frame = self._running_frame(peer, now - 1, "PENDING", "Pending", str(uuid.uuid4()),
                                               event["follows"])
        self.resume_frame = self._running_frame(peer, now + 0.5, "PAUSED", "Paused", self.state_id,
                                                str(uuid.uuid4()))

    def _running_frame(self, peer: "ScriptedPrefect", at: float, from_type: str, from_name: str, follows: str,
                       state_id: str) -> bytes:
        running = copy.deepcopy(peer.event_template)
        running.update(occurred=iso(at), received=iso(at), id=state_id, follows=follows,
                       event="prefect.flow-run.Running")
        running["resource"].update({"prefect.resource.id": "prefect.flow-run." + self.id,
                                    "prefect.resource.name": self.name, "prefect.state-name": "Running",
                                    "prefect.state-type": "RUNNING", "prefect.state-timestamp": iso(at, z=False)})
        running["related"][0]["prefect.resource.id"] = "prefect.flow." + peer.flow_id
        running["payload"] = {"intended": {"from": from_type, "to": "RUNNING"},
                              "initial_state": {"type": from_type, "name": from_name},
                              "validated_state": {"type": "RUNNING", "name": "Running"}}
        return ws_frame(json.dumps({"type": "event", "event": running}).encode())


class ScriptedPrefect:
    def __init__(self, auth: str = "admin:pass"):
        self.authorization = "Basic " + base64.b64encode(auth.encode()).decode()
        self.event_template = fixture("ws-event-paused.json")["event"]
        self.run_template = fixture("rest-flow-run-paused-with-input.json")["response"]
        self.rows_template = fixture("rest-input-filter-one-field.json")["response"]
        flow = fixture("rest-flow.json")["response"]
        self.flow_id = flow["id"]
        self.flow_answer = http_response(200, json.dumps(flow).encode())
        self.runs: dict[str, Run] = {}
        self.socket: Connection | None = None
        self.subscribed = asyncio.Event()
        #: (accept ns, answered ns, path) for every REST request.
        self.service: list[tuple[int, int, str]] = []
        self.requests: dict[str, int] = {}
        #: While set, `POST /flows/count` with a foreign credential is held: its connection, unanswered, waits here.
        self.holding_checks = False
        self.held: list[Connection] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, port: int = 0) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: Connection(self), "127.0.0.1", port, backlog=512)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self):
        if self.socket:
            self.socket.transport.close()
        for connection in list(self.held):
            connection.transport.close()
        if self.server:
            self.server.close()
            await self.server.wait_closed()

    def new_run(self, name: str = "bench-run") -> Run:
        run = Run(self, name)
        self.runs[run.id] = run
        return run

    def emit(self, frame: bytes) -> int:
        """Writes one event frame on the subscribed socket; returns the monotonic ns taken just before the write."""
        assert self.socket is not None
        t = time.monotonic_ns()
        self.socket.transport.write(frame)
        return t

    # MARK: REST

    def answer(self, method: str, path: str) -> bytes:
        if not path.startswith("/api/"):
            return http_response(404, b'{"detail":"Not Found"}', "Not Found")
        parts = path[5:].split("?")[0].strip("/").split("/")
        key = method + " " + "/".join(p if i == 0 or not _is_id(p) else "{id}" for i, p in enumerate(parts))
        self.requests[key] = self.requests.get(key, 0) + 1
        if method == "GET" and parts[0] == "flow_runs" and len(parts) == 2:
            run = self.runs.get(parts[1])
            return run.run_answer if run else http_response(404, b'{"detail":"Flow run not found"}', "Not Found")
        if method == "GET" and parts[0] == "flows" and len(parts) == 2:
            return self.flow_answer
        if method == "POST" and parts[0] == "flow_runs" and parts[-2:] == ["input", "filter"]:
            run = self.runs.get(parts[1])
            return run.rows_answer if run else http_response(200, b"[]")
        if method == "POST" and parts == ["artifacts", "filter"]:
            return http_response(200, b"[]")
        if method == "POST" and parts == ["events", "filter"]:
            return http_response(200, b'{"events":[],"total":0,"next_page":null}')
        if method == "POST" and parts == ["flow_runs", "filter"]:
            return http_response(200, b"[]")
        if method == "POST" and parts == ["flows", "count"]:
            return http_response(200, b"1")
        if method == "GET" and parts == ["health"]:
            return http_response(200, b"true")
        return http_response(404, b'{"detail":"Not Found"}', "Not Found")


    # MARK: control (the standalone peer, for tests)

    def control(self, method: str, path: str) -> bytes:
        """`POST /control/pause`: emit a new pause, answer `{"run","state","sent_ns"}`; `POST /control/resume/{run}`:
        emit that run's Running event (both 409 while no relay is subscribed). `POST /control/hold-credential-checks`,
        `POST /control/release-credential-checks` (answer `{"released"}`), `GET /control/credential-checks` (answer
        `{"holding","held"}`)."""
        parts = path.strip("/").split("/")
        if parts == ["control", "credential-checks"]:
            if method != "GET":
                return http_response(405, b'{"detail":"GET only"}', "Method Not Allowed")
            return http_response(200, json.dumps({"holding": self.holding_checks, "held": len(self.held)}).encode())
        if method != "POST":
            return http_response(405, b'{"detail":"POST only"}', "Method Not Allowed")
        if parts == ["control", "hold-credential-checks"]:
            self.holding_checks = True
            return http_response(200, b'{}')
        if parts == ["control", "release-credential-checks"]:
            held, self.held = self.held, []
            self.holding_checks = False
            for connection in held:
                connection.release()
            return http_response(200, json.dumps({"released": len(held)}).encode())
        if self.socket is None:
            return http_response(409, b'{"detail":"no subscriber"}', "Conflict")
        if parts == ["control", "pause"]:
            run = self.new_run()
            sent = self.emit(run.frame)
            return http_response(200, json.dumps({"run": run.id, "state": run.state_id, "sent_ns": sent}).encode())
        if len(parts) == 3 and parts[:2] == ["control", "resume"] and parts[2] in self.runs:
            self.emit(self.runs[parts[2]].resume_frame)
            return http_response(200, b'{}')
        return http_response(404, b'{"detail":"Not Found"}', "Not Found")

    def holds(self, method: str, path: str, authorization: str | None) -> bool:
        """Whether this request is a credential check to hold: `POST /flows/count` with a credential other than the
        configured one, while holding. Checks of the configured credential are still answered, so a caller can be
        admitted with it meanwhile."""
        return (self.holding_checks and method == "POST" and path.split("?")[0].rstrip("/") == "/api/flows/count"
                and authorization != self.authorization)


def _is_id(part: str) -> bool:
    return len(part) == 36 and part.count("-") == 4


class Connection(asyncio.Protocol):
    """One accepted connection: HTTP/1.1 requests (kept alive, one after another), or (after the upgrade) the events
    socket. A request's service time runs from its first byte to its answer. A held request (`ScriptedPrefect.holds`)
    parks the connection: nothing more is read from its buffer until `release` answers it."""

    def __init__(self, peer: ScriptedPrefect):
        self.peer = peer
        self.buffer = bytearray()
        self.websocket = False
        self.authenticated = False
        self.fragments = bytearray()
        self.opened = 0
        #: The held request's (method, path, headers), while it waits for `release`.
        self.parked: tuple[str, str, dict] | None = None

    def connection_made(self, transport):
        self.opened = time.monotonic_ns()
        self.transport = transport

    def data_received(self, data: bytes):
        if not self.buffer and self.parked is None:
            self.opened = time.monotonic_ns()
        self.buffer += data
        if self.websocket:
            self._frames()
            return
        self._requests()

    def _requests(self):
        while self.buffer and not self.websocket and self.parked is None and not self.transport.is_closing():
            if not self._request():
                return
            if self.parked is None:
                self.opened = time.monotonic_ns()

    def release(self):
        """Answers the held request as it would have been answered at once, then reads on."""
        if self.parked is None or self.transport.is_closing():
            return
        (method, path, headers), self.parked = self.parked, None
        self._answer(method, path, headers)
        self.opened = time.monotonic_ns()
        self._requests()

    def _request(self) -> bool:
        """Answers one complete request from the buffer; False when it isn't all there yet."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        if len(self.buffer) < end + 4 + length:
            return False
        del self.buffer[:end + 4 + length]
        if headers.get("upgrade", "").lower() == "websocket":
            self._upgrade(path, headers)
            return True
        if path.startswith("/control/"):
            self.transport.write(self.peer.control(method, path))
            self.transport.close()
            return True
        if self.peer.holds(method, path, headers.get("authorization")):
            self.parked = (method, path, headers)
            self.peer.held.append(self)
            return True
        self._answer(method, path, headers)
        return True

    def _answer(self, method: str, path: str, headers: dict):
        if headers.get("authorization") != self.peer.authorization and path != "/api/health":
            # Like Prefect behind PREFECT_SERVER_API_AUTH_STRING: every REST call needs the credential.
            self.transport.write(http_response(401, b'{"exception_message":"Unauthorized"}', "Unauthorized"))
        else:
            self.transport.write(self.peer.answer(method, path))
        self.peer.service.append((self.opened, time.monotonic_ns(), path))
        if headers.get("connection", "").lower() == "close":
            self.transport.close()

    def _upgrade(self, path: str, headers: dict):
        offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
        if path.split("?")[0] != "/api/events/out" or "prefect" not in offered:
            self.transport.write(http_response(403, b'{"detail":"Forbidden"}', "Forbidden"))
            self.transport.close()
            return
        accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].encode() + WS_GUID).digest()).decode()
        self.transport.write(("HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                              f"sec-websocket-accept: {accept}\r\nsec-websocket-protocol: prefect\r\n\r\n").encode())
        self.websocket = True
        if self.buffer:
            self._frames()

    def _frames(self):
        while len(self.buffer) >= 2:
            b0, b1 = self.buffer[0], self.buffer[1]
            length, offset = b1 & 0x7F, 2
            if length == 126:
                if len(self.buffer) < 4:
                    return
                length, offset = struct.unpack("!H", self.buffer[2:4])[0], 4
            elif length == 127:
                if len(self.buffer) < 10:
                    return
                length, offset = struct.unpack("!Q", self.buffer[2:10])[0], 10
            masked = b1 & 0x80
            total = offset + (4 if masked else 0) + length
            if len(self.buffer) < total:
                return
            payload = bytes(self.buffer[offset + (4 if masked else 0):total])
            if masked:
                mask = self.buffer[offset:offset + 4]
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            del self.buffer[:total]
            opcode = b0 & 0x0F
            if opcode == 9:
                self.transport.write(ws_frame(payload, opcode=10))
            elif opcode == 8:
                self.transport.write(ws_frame(payload[:2], opcode=8))
                self.transport.close()
                return
            elif opcode in (0, 1, 2):
                self.fragments += payload
                if b0 & 0x80:
                    message = bytes(self.fragments)
                    self.fragments.clear()
                    self._message(json.loads(message))

    def _message(self, message: dict):
        if not self.authenticated:
            if message.get("type") != "auth":
                self.transport.write(ws_frame(struct.pack("!H", 1008) + b"Expected 'auth' message", opcode=8))
                self.transport.close()
                return
            self.authenticated = True
            self.transport.write(ws_frame(b'{"type":"auth_success"}'))
        elif message.get("type") == "filter":
            self.peer.socket = self
            self.peer.subscribed.set()

    def connection_lost(self, exc):
        if self in self.peer.held:
            self.peer.held.remove(self)
        if self.peer.socket is self:
            self.peer.socket = None
            self.peer.subscribed.clear()


async def _serve(port: int, lifetime: float) -> None:
    peer = ScriptedPrefect()
    print(f"scripted prefect listening on http://127.0.0.1:{await peer.start(port)}/api", flush=True)
    await asyncio.sleep(lifetime)  # bounded: whoever started it normally stops it much sooner
    await peer.stop()


if __name__ == "__main__":
    # Standalone, for tests: `peer.py PORT [LIFETIME_S]`; drive it with the /control/ routes (ScriptedPrefect.control).
    import sys

    asyncio.run(_serve(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 300))
