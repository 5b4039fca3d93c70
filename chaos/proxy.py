"""A TCP proxy between the relay and Prefect for `make chaos`, with faults on demand.

Every connection the relay opens to PREFECT_API_URL goes through here. Requests from the relay are read as
HTTP/1.1 (request line, headers, Content-Length body) so that each connection can be told apart:

* `events`: a connection whose first request is the websocket upgrade to `/api/events/out`. The upgrade and
  everything after it pass through untouched.
* `rest`: any other connection.

Faults (all apply at once, from the harness's event loop):

* `cut(kind)`: close every open connection (of one kind, or all), as a restart or a network blip would.
* `blackhole(kind, reopened=False)` / `heal()`: the connections of that kind open now go silent: kept open, nothing
  forwarded either way (bytes are swallowed), as a connection that silently died; with `reopened`, so do those
  opened until `heal()`, else new ones work. A silent connection stays open on the relay's side until the relay hangs
  up or `heal()` closes it, as a middlebox finally resets it (whatever Prefect's side does meanwhile).
* `fail_run_reads(until)`: until that `time.monotonic()`, `GET /api/flow_runs/{id}` is answered by the proxy with
  the 500 Prefect gives when it is failing, and the connection is closed; other requests pass.
* `hold_runs(ids)` / `release()`: a REST request naming one of these run ids (in its path or body) is kept, not
  forwarded, until `release()`, as a slow query or a locked table holds it at the server; then it goes on. A held
  request stays held when the relay closes its connection meanwhile, as a server goes on with a request whose
  client left: `held_peak` is the most held at once, copies the relay gave up on included.

`silent_hung_up` has when the relay closed a silent connection itself. A handler that fails other than by a
connection ending, or a listener that stopped by itself, is kept in `problems` for the harness to judge.
Standard library only; 127.0.0.1 only.
"""
from __future__ import annotations

import asyncio
import re
import time

RUN_READ = re.compile(rb"GET /api/flow_runs/[0-9a-fA-F-]{36}(\?[^ ]*)? HTTP/1\.1")
EVENTS_UPGRADE = re.compile(rb"GET /api/events/out(\?[^ ]*)? HTTP/1\.1")
FAILURE = b'{"exception_message":"Internal Server Error"}'
MAX_HEAD = 64 * 1024


class Link:
    """One relay connection and its upstream connection."""

    def __init__(self, client: asyncio.StreamWriter):
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.kind = "rest"
        self.held = False  # blackholed: read and swallow, forward nothing
        self.released = False  # closed by `heal()`, not by the relay

    def close(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()  # an RST, not a polite FIN: the way a dying peer or middlebox goes


class Proxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.links: set[Link] = set()
        self.blackholed: str | None = None  # the kind whose new connections are blackholed too
        self.problems: list[str] = []
        self.failing_until = 0.0
        #: time.monotonic() of every websocket upgrade to /api/events/out seen (held or not).
        self.events_opened: list[float] = []
        #: time.monotonic() of every silent connection the relay closed itself (before `heal()`).
        self.silent_hung_up: list[float] = []
        self.injected = 0
        self.held_runs: set[bytes] = set()
        self.released = asyncio.Event()
        self.held_now = 0
        self.held_peak = 0
        self.held_total = 0
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self.server and not self.server.is_serving():
            self.problems.append("proxy: its listener had stopped")
        if self.server:
            self.server.close()
        self.release()  # a held request's handler must end for wait_closed() to return
        self.cut()
        if self.server:
            await self.server.wait_closed()

    # MARK: - faults

    def cut(self, kind: str | None = None) -> int:
        """Closes the open connections of `kind` (all if None); how many."""
        doomed = [link for link in self.links if kind is None or link.kind == kind]
        for link in doomed:
            link.close()
        return len(doomed)

    def blackhole(self, kind: str, reopened: bool = False) -> int:
        """The open connections of `kind` go silent (and with `reopened`, new ones too); how many went silent."""
        self.blackholed = kind if reopened else None
        silenced = [link for link in self.links if link.kind == kind]
        for link in silenced:
            link.held = True
        return len(silenced)

    def heal(self) -> None:
        self.blackholed = None
        for link in [link for link in self.links if link.held]:
            link.released = True
            link.close()

    def fail_run_reads(self, until: float) -> None:
        self.failing_until = until

    def hold_runs(self, run_ids: list[str]) -> None:
        self.held_runs = {run_id.encode() for run_id in run_ids}
        self.released = asyncio.Event()

    def release(self) -> None:
        self.held_runs = set()
        self.released.set()

    def _holds(self, request: bytes) -> bool:
        return any(run_id in request for run_id in self.held_runs)

    async def _hold(self) -> None:
        self.held_now += 1
        self.held_total += 1
        self.held_peak = max(self.held_peak, self.held_now)
        try:
            await self.released.wait()
        finally:
            self.held_now -= 1

    # MARK: - forwarding

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = Link(writer)
        self.links.add(link)
        try:
            up_reader, link.upstream = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.upstream_port), 10)
            back = asyncio.create_task(self._pump(up_reader, writer, link))
            try:
                await self._requests(reader, link)
            finally:
                back.cancel()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except Exception as error:  # a bug here, not a connection that ended: the harness judges it
            self.problems.append(f"proxy: a connection handler failed: {type(error).__name__}: {error}")
        finally:
            if link.held and not link.released:
                self.silent_hung_up.append(time.monotonic())
            self.links.discard(link)
            link.close()

    async def _requests(self, reader: asyncio.StreamReader, link: Link) -> None:
        """Relay -> Prefect, request by request, until the connection becomes a websocket (then raw)."""
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_HEAD:
                return
            line = head.split(b"\r\n", 1)[0]
            if EVENTS_UPGRADE.fullmatch(line):
                link.kind = "events"
                self.events_opened.append(time.monotonic())
                link.held = self.blackholed == "events"
                self._forward(link, head)
                await self._pump(reader, link.upstream, link)
                return
            if RUN_READ.fullmatch(line) and time.monotonic() < self.failing_until:
                self.injected += 1
                link.client.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n"
                                  b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(FAILURE), FAILURE))
                await link.client.drain()
                return
            headers = head.lower()
            if b"transfer-encoding:" in headers:
                self._forward(link, head)
                await self._pump(reader, link.upstream, link)  # the relay sends no chunked bodies; stay correct anyway
                return
            match = re.search(rb"\r\ncontent-length:\s*(\d+)", headers)
            body = await reader.readexactly(int(match.group(1))) if match and int(match.group(1)) else b""
            if self.held_runs and self._holds(head + body):
                await self._hold()
            self._forward(link, head + body)

    def _forward(self, link: Link, data: bytes) -> None:
        if not link.held:
            link.upstream.write(data)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Link) -> None:
        """Copies bytes one way until EOF, swallowing them while the link is held. A held link whose upstream ends
        (Prefect gives up on a peer that stopped answering its pings) stays open on the relay's side: only the relay
        hanging up, or `heal()`, ends a silent connection."""
        try:
            while data := await reader.read(65536):
                if not link.held:
                    writer.write(data)
                    await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if not (link.held and writer is link.client):
                link.close()
