#!/usr/bin/env python3
"""A Prefect Cloud stand-in for tests: a reverse proxy in front of a real local Prefect server that talks to its
clients the way Prefect Cloud does, as far as the `prefect` client library shows (prefect/events/clients.py,
prefect/client/base.py; README "Prefect Cloud"). Standard library only.

    cloud_standin.py --upstream http://127.0.0.1:4200/api --key KEY [--upstream-auth user:pass]
                     [--host 127.0.0.1] [--port 0] [--account UUID] [--workspace UUID] [--url-file PATH]
                     [--tls-cert PEM --tls-key PEM]

What it serves, on http://HOST:PORT (https with --tls-cert/--tls-key, as Cloud itself, control paths included):
* `/api/accounts/<account>/workspaces/<workspace>/<rest>` is `<upstream>/<rest>`. Every HTTP request needs
  `Authorization: Bearer <key>` (401 otherwise); upstream it carries `--upstream-auth` as Basic instead.
* `.../events/out` (WebSocket upgrade, subprotocol `prefect`): the upgrade goes upstream as it is (Cloud's subscriber
  sends no Authorization header); the client's first message must be `{"type":"auth","token":"<key>"}`. A wrong or
  missing token gets close 1008 "Invalid token", as a self-hosted server does; the right one is replaced by the
  upstream's own token and the connection is then piped both ways untouched.
* Any other path: 404.
* Control (no auth, outside the workspace prefix):
  `POST /_standin/throttle {"count": N, "retry_after": S, "method"?: M, "path"?: P, "path_prefix"?: Q}` makes the
  next N workspace requests (those with method M and path P, or a path starting with Q, after the workspace prefix,
  when given) answer 429 with `Retry-After: S`;
  `GET /_standin/stats` answers what was served so far (each request with its time and status, socket auths);
  `POST /_standin/key {"key": K}` changes the accepted key.

It prints `CLOUD_STANDIN_URL=<workspace API root>` once listening, and writes the same root to --url-file if given.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import struct
import sys
import time
import urllib.parse
import uuid

MAX_HEAD = 64 * 1024


class StandIn:
    def __init__(self, args: argparse.Namespace) -> None:
        upstream = urllib.parse.urlsplit(args.upstream)
        if upstream.scheme != "http":
            raise SystemExit("--upstream must be an http:// API root, e.g. http://127.0.0.1:4200/api")
        self.up_host = upstream.hostname or "127.0.0.1"
        self.up_port = upstream.port or 80
        self.up_path = upstream.path.rstrip("/")
        self.up_auth = args.upstream_auth
        self.key = args.key
        self.account = args.account or str(uuid.uuid4())
        self.workspace = args.workspace or str(uuid.uuid4())
        self.prefix = f"/api/accounts/{self.account}/workspaces/{self.workspace}"
        self.throttles: list[dict] = []
        self.requests: list[dict] = []
        self.socket_auths: list[dict] = []

    # MARK: - HTTP

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _version = (lines[0].split(" ", 2) + ["", ""])[:3]
            headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if ":" in line]
            path, _, query = target.partition("?")
            if path.startswith("/_standin/"):
                body = await read_body(reader, headers)
                await self.control(writer, method, path, body)
            elif path == self.prefix or path.startswith(self.prefix + "/"):
                rest = path[len(self.prefix):]
                if header(headers, "upgrade").lower() == "websocket":
                    await self.socket(reader, writer, lines[0], headers, rest, query)
                else:
                    await self.rest(reader, writer, method, headers, rest, query)
            else:
                await read_body(reader, headers)
                await respond(writer, 404, {"detail": "Not Found"})
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def rest(self, reader, writer, method, headers, rest, query) -> None:
        body = await read_body(reader, headers)
        entry = {"t": time.time(), "method": method, "path": rest, "status": 0}
        self.requests.append(entry)
        if not self.authorized(header(headers, "authorization")):
            entry["status"] = 401
            return await respond(writer, 401, {"detail": "Invalid authentication credentials"})
        for throttle in self.throttles:
            if (throttle["count"] > 0 and throttle.get("method", method) == method
                    and throttle.get("path", rest) == rest and rest.startswith(throttle.get("path_prefix", ""))):
                throttle["count"] -= 1
                entry["status"] = 429
                return await respond(writer, 429, {"detail": "Too many requests"},
                                     extra=[("Retry-After", str(throttle["retry_after"]))])
        up_reader, up_writer = await asyncio.open_connection(self.up_host, self.up_port)
        try:
            forwarded = [(k, v) for k, v in headers if k.lower() not in ("host", "authorization", "connection",
                                                                         "content-length", "transfer-encoding")]
            forwarded.append(("Host", f"{self.up_host}:{self.up_port}"))
            if self.up_auth:
                forwarded.append(("Authorization", "Basic " + base64.b64encode(self.up_auth.encode()).decode()))
            forwarded.append(("Content-Length", str(len(body))))
            forwarded.append(("Connection", "close"))
            target = self.up_path + rest + ("?" + query if query else "")
            up_writer.write(request_head(method, target, forwarded) + body)
            await up_writer.drain()
            answer = await up_reader.read()  # upstream closes after one answer (Connection: close)
            status = answer.split(b" ", 2)[1:2]
            entry["status"] = int(status[0]) if status and status[0].isdigit() else 502
            writer.write(answer)
            await writer.drain()
        finally:
            up_writer.close()

    def authorized(self, value: str) -> bool:
        scheme, _, token = value.partition(" ")
        return scheme.lower() == "bearer" and token.strip() == self.key

    # MARK: - WebSocket

    async def socket(self, reader, writer, request_line, headers, rest, query) -> None:
        entry = {"t": time.time(), "path": rest, "upgrade_authorization": bool(header(headers, "authorization")),
                 "accepted": None}
        self.socket_auths.append(entry)
        up_reader, up_writer = await asyncio.open_connection(self.up_host, self.up_port)
        try:
            # No permessage-deflate: the auth frame is read here, and it must be plain text.
            forwarded = [(k, v) for k, v in headers
                         if k.lower() not in ("host", "authorization", "sec-websocket-extensions")]
            forwarded.append(("Host", f"{self.up_host}:{self.up_port}"))
            method = request_line.split(" ", 1)[0]
            up_writer.write(request_head(method, self.up_path + rest + ("?" + query if query else ""), forwarded))
            await up_writer.drain()
            answer = await up_reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            if not answer.startswith(b"HTTP/1.1 101"):
                writer.write(await up_reader.read())
                return
            # The client's first data frame must be the auth message with the key.
            while True:
                opcode, payload = await read_frame(reader)
                if opcode == 0x9:  # Prefect's client pings before it authenticates: answer here
                    writer.write(frame(0xA, payload))
                    await writer.drain()
                    continue
                if opcode == 0xA:
                    continue
                break
            token = None
            if opcode == 0x1:
                try:
                    message = json.loads(payload)
                    token = message.get("token") if message.get("type") == "auth" else None
                except (ValueError, AttributeError):
                    token = None
            if token != self.key:
                entry["accepted"] = False
                writer.write(frame(0x8, struct.pack("!H", 1008) + b"Invalid token"))
                await writer.drain()
                try:
                    await asyncio.wait_for(read_frame(reader), 2)  # the client's close, if it answers
                except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    pass
                return
            entry["accepted"] = True
            auth = json.dumps({"type": "auth", "token": self.up_auth}).encode()
            up_writer.write(frame(0x1, auth, masked=True))
            await up_writer.drain()
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            up_writer.close()

    # MARK: - Control

    async def control(self, writer, method, path, body) -> None:
        if method == "POST" and path == "/_standin/throttle":
            spec = json.loads(body or b"{}")
            throttle = {"count": int(spec.get("count", 1)), "retry_after": int(spec.get("retry_after", 1))}
            for optional in ("method", "path", "path_prefix"):
                if optional in spec:
                    throttle[optional] = spec[optional]
            self.throttles.append(throttle)
            return await respond(writer, 200, throttle)
        if method == "POST" and path == "/_standin/key":
            self.key = json.loads(body or b"{}")["key"]
            return await respond(writer, 200, {})
        if method == "GET" and path == "/_standin/stats":
            return await respond(writer, 200, {"requests": self.requests, "sockets": self.socket_auths,
                                               "root": self.prefix})
        await respond(writer, 404, {"detail": "no such control endpoint"})


# MARK: - Wire helpers


def header(headers, name: str) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


async def read_body(reader: asyncio.StreamReader, headers) -> bytes:
    length = header(headers, "content-length")
    if length.isdigit() and int(length) > 0:
        return await reader.readexactly(int(length))
    if header(headers, "transfer-encoding").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                return body
            body += chunk[:-2]
    return b""


def request_head(method: str, target: str, headers) -> bytes:
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def respond(writer: asyncio.StreamWriter, status: int, value, extra=()) -> None:
    reasons = {200: "OK", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests"}
    body = json.dumps(value).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")]
    head = [f"HTTP/1.1 {status} {reasons.get(status, 'Status')}"] + [f"{k}: {v}" for k, v in [*headers, *extra]]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One whole WebSocket frame (RFC 6455 §5.2), unmasked. Fragmented messages are not expected here."""
    b0, b1 = await reader.readexactly(2)
    length = b1 & 0x7F
    if length == 126:
        length = struct.unpack("!H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack("!Q", await reader.readexactly(8))[0]
    if length > 1 << 20:
        raise ConnectionError("frame too large")
    mask = await reader.readexactly(4) if b1 & 0x80 else b"\0\0\0\0"
    data = await reader.readexactly(length)
    return b0 & 0x0F, bytes(c ^ mask[i % 4] for i, c in enumerate(data))


def frame(opcode: int, payload: bytes, masked: bool = False) -> bytes:
    head = bytes([0x80 | opcode])
    mask_bit = 0x80 if masked else 0
    if len(payload) < 126:
        head += bytes([mask_bit | len(payload)])
    elif len(payload) < 1 << 16:
        head += bytes([mask_bit | 126]) + struct.pack("!H", len(payload))
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", len(payload))
    if not masked:
        return head + payload
    mask = os.urandom(4)
    return head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except ConnectionError:
        pass
    finally:
        sink.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the real server's API root, http://host:port/api")
    parser.add_argument("--upstream-auth", default=os.environ.get("STANDIN_UPSTREAM_AUTH"),
                        help="the real server's user:pass (PREFECT_SERVER_API_AUTH_STRING), if it has one")
    parser.add_argument("--key", default=os.environ.get("STANDIN_API_KEY"), help="the API key clients must send")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--account")
    parser.add_argument("--workspace")
    parser.add_argument("--url-file")
    parser.add_argument("--tls-cert", help="serve https with this certificate chain (PEM); needs --tls-key")
    parser.add_argument("--tls-key")
    args = parser.parse_args()
    if not args.key:
        raise SystemExit("--key (or STANDIN_API_KEY) is required")
    for name in ("account", "workspace"):
        value = getattr(args, name)
        if value and not re.fullmatch(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", value):
            raise SystemExit(f"--{name} must be a UUID")
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise SystemExit("--tls-cert and --tls-key go together")
        import ssl
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    standin = StandIn(args)
    server = await asyncio.start_server(standin.serve, args.host, args.port, limit=MAX_HEAD, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    root = f"{'https' if tls else 'http'}://{args.host}:{port}{standin.prefix}"
    if args.url_file:
        with open(args.url_file + ".tmp", "w") as f:
            f.write(root)
        os.replace(args.url_file + ".tmp", args.url_file)
    print(f"CLOUD_STANDIN_URL={root}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
