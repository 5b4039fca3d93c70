"""A Prefect stand-in for the REST client comparison: HTTP/1.1 with keep-alive on 127.0.0.1, answering every
`GET /api/flow_runs/{id}` with one pre-encoded flow run (the tests' paused run with input, 2.9 KB), as uvicorn
frames it (content-length, no chunking). Anything else is a 404. With --tls, over TLS with the tests' certificate
for 127.0.0.1 (ALPN http/1.1 only).

    python3 bench/rest-client/server.py [--tls]     -> prints the port, serves until stdin closes

One asyncio.Protocol and no parsing beyond the request line and the blank line: a few tens of microseconds per
request, the same for both clients.
"""
from __future__ import annotations

import asyncio
import os
import ssl
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "Tests", "RelayTests", "Fixtures")
with open(os.path.join(FIXTURES, "prefect", "rest-flow-run-paused-with-input.json"), "rb") as f:
    BODY = f.read()
RUN = (b"HTTP/1.1 200 OK\r\ndate: Thu, 04 Dec 2026 12:00:00 GMT\r\nserver: uvicorn\r\n"
       + b"content-length: %d\r\ncontent-type: application/json\r\n\r\n" % len(BODY) + BODY)
MISSING = (b'HTTP/1.1 404 Not Found\r\ncontent-length: 22\r\ncontent-type: application/json\r\n\r\n'
           + b'{"detail":"Not Found"}')


class Connection(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes):
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buffer = self.buffer[:end], self.buffer[end + 4:]
            line = head.split(b"\r\n", 1)[0]
            self.transport.write(RUN if line.startswith(b"GET /api/flow_runs/") else MISSING)


async def main() -> None:
    context = None
    if "--tls" in sys.argv:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        apns = os.path.join(FIXTURES, "apns")
        context.load_cert_chain(os.path.join(apns, "server.pem"), os.path.join(apns, "server.key"))
        context.set_alpn_protocols(["http/1.1"])
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Connection, "127.0.0.1", 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
