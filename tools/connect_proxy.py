#!/usr/bin/env python3
"""A small HTTP CONNECT proxy for the proxy end-to-end tests.

    connect_proxy.py --port-file F --map NAME:PORT=127.0.0.1:PORT ... [--auth USER:PASS]

It answers CONNECT only, and only for the targets in --map, which it connects to the address given there: the
names (e.g. prefect.proxy.test) resolve nowhere else, so a relay that reaches them went through this proxy. With
--auth, a CONNECT without that Basic Proxy-Authorization gets 407. Every request is one line on stdout:
`CONNECT <target> <status>`; the credentials are never printed. Listens on 127.0.0.1, on a free port written to
--port-file.
"""
from __future__ import annotations

import argparse
import base64
import select
import socket
import sys
import threading


def log(line: str) -> None:
    print(line, flush=True)


def pump(a: socket.socket, b: socket.socket) -> None:
    sockets = [a, b]
    try:
        while True:
            readable, _, _ = select.select(sockets, [], [], 600)
            if not readable:
                return
            for s in readable:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return


def handle(client: socket.socket, targets: dict[str, tuple[str, int]], auth: str | None) -> None:
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk or len(head) > 16384:
                return
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(parts) != 3 or parts[0] != "CONNECT":
            log(f"{parts[0]} {parts[1] if len(parts) > 1 else '?'} 405")
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        target = parts[1]
        if auth is not None:
            expected = "basic " + base64.b64encode(auth.encode()).decode()
            if headers.get("proxy-authorization", "").lower() != expected.lower():
                log(f"CONNECT {target} 407")
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                               b"Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n")
                return
        if target not in targets:
            log(f"CONNECT {target} 403")
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        try:
            upstream = socket.create_connection(targets[target], timeout=5)
        except OSError as error:
            log(f"CONNECT {target} 502 ({error})")
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        upstream.settimeout(None)
        log(f"CONNECT {target} 200")
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        pump(client, upstream)
        upstream.close()
    except OSError:
        pass
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--map", action="append", default=[], help="NAME:PORT=ADDRESS:PORT")
    parser.add_argument("--auth", help="USER:PASS the proxy requires")
    args = parser.parse_args()
    targets = {}
    for entry in args.map:
        name, _, address = entry.partition("=")
        host, _, port = address.rpartition(":")
        targets[name] = (host, int(port))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=handle, args=(client, targets, args.auth), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
