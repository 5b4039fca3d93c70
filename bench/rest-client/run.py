"""The REST client comparison's latency runs (docs/rest-client.md): the relay's HTTPPool against the libcurl-multi
prototype, in one run, alternating.

    python3 bench/rest-client/run.py [--requests 2000] [--reps 3] [--skip-prefect] [--out FILE]

Builds `rest-client-bench` (release, `-enable-testing`, the relay's modules from this checkout), then for each
server, repetition and concurrency (1, then 6 callers) runs both clients one after the other, each in a fresh
process, the order swapped every repetition. Servers, all on 127.0.0.1:

  * stand-in, http: bench/rest-client/server.py, one pre-encoded 2.9 KB flow run (a few tens of µs a request);
  * stand-in, https: the same over TLS (the tests' CA and certificate, ALPN http/1.1);
  * Prefect 3.9.1 (this checkout's .venv), http: `GET /api/flow_runs/{id}` of a run it stores (SQLite);
  * nghttpd (Debian's nghttp2-server), https with ALPN h2 only, the same 2.9 KB file: libcurl only (HTTPPool
    speaks HTTP/1.1), to see what HTTP/2 changes for 6 concurrent reads: one connection instead of six.

Prints one row per client and load with every repetition's p50, p99 and total, and writes them all to FILE
(default bench/rest-client/results.json).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
BENCH = os.path.join(HERE, ".build", "release", "rest-client-bench")
CA = os.path.join(ROOT, "Tests", "RelayTests", "Fixtures", "apns", "ca.pem")
PREFECT = os.path.join(ROOT, ".venv", "bin", "prefect")


def build() -> None:
    subprocess.run(["swift", "build", "-c", "release", "-j", "1", "-Xswiftc", "-enable-testing",
                    "--product", "rest-client-bench"], cwd=HERE, check=True, stdout=subprocess.DEVNULL)


def one(client: str, url: str, requests: int, concurrency: int, ca: str | None) -> dict:
    args = [BENCH, client, url, str(requests), str(concurrency)] + ([ca] if ca else [])
    # As in the image (and bench/run.py): no SSL_CERT_FILE, which would make the relay parse the whole bundle.
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    out = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not line.startswith("client="):
        raise RuntimeError(f"{' '.join(args)} failed: {out.stdout[-500:]} {out.stderr[-500:]}")
    fields = dict(item.split("=", 1) for item in line.split())
    return {k: (v if k == "client" else float(v)) for k, v in fields.items()}


def series(name: str, url: str, ca: str | None, requests: int, reps: int, clients=("pool", "curl")) -> list[dict]:
    rows = []
    for rep in range(reps):
        for concurrency in (1, 6):
            order = clients if rep % 2 == 0 else clients[::-1]
            for client in order:
                result = one(client, url, requests, concurrency, ca)
                result.update(server=name, rep=rep + 1)
                rows.append(result)
                print(f"{name:18} rep {rep + 1} c={concurrency} {client:4}  p50 {result['p50_us']:6.0f} µs  "
                      f"p99 {result['p99_us']:6.0f} µs  total {result['total_ms']:7.1f} ms  "
                      f"cpu/req {result['cpu_us_per_request']:6.1f} µs  cold {result['cold_us']:6.0f} µs  "
                      f"connections {result['connections']:.0f}",
                      flush=True)
    return rows


class StandIn:
    def __init__(self, tls: bool):
        self.process = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py")] + (["--tls"] if tls else []),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline())

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def prefect_series(requests: int, reps: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as home:
        port = free_port()
        env = dict(os.environ, PREFECT_HOME=home, PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_ENABLED="false",
                   PREFECT_SERVER_UI_ENABLED="false", PREFECT_SERVER_LOGGING_LEVEL="WARNING")
        log = open(os.path.join(home, "server.log"), "wb")
        server = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                  env=env, stdout=log, stderr=log, start_new_session=True)
        api = f"http://127.0.0.1:{port}/api"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(api + "/health", timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("Prefect did not start")
                time.sleep(0.3)
            flow = post(api + "/flows/", {"name": "rest-client-bench"})
            run = post(api + "/flow_runs/", {"flow_id": flow["id"], "name": "bench-run",
                                             "parameters": {"rows": 3, "label": "x" * 200},
                                             "state": {"type": "PAUSED", "name": "Paused"}})
            with urllib.request.urlopen(f"{api}/flow_runs/{run['id']}", timeout=10) as answer:
                size = len(answer.read())
            print(f"Prefect is up; GET /flow_runs/{{id}} answers {size} bytes", flush=True)
            return series("Prefect 3.9.1", f"{api}/flow_runs/{run['id']}", None, requests, reps)
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)


def h2_series(requests: int, reps: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "api", "flow_runs"))
        fixtures = os.path.join(ROOT, "Tests", "RelayTests", "Fixtures")
        with open(os.path.join(fixtures, "prefect", "rest-flow-run-paused-with-input.json"), "rb") as f:
            body = f.read()
        with open(os.path.join(root, "api", "flow_runs", "abc"), "wb") as f:
            f.write(body)
        port = free_port()
        server = subprocess.Popen(["nghttpd", "-d", root, str(port), os.path.join(fixtures, "apns", "server.key"),
                                   os.path.join(fixtures, "apns", "server.pem")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            return series("nghttpd, https h2", f"https://127.0.0.1:{port}/api/flow_runs/abc", CA, requests, reps,
                          clients=("curl",))
        finally:
            server.terminate()
            server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-prefect", action="store_true")
    parser.add_argument("--out", default=os.path.join(HERE, "results.json"))
    options = parser.parse_args()
    build()
    rows = []
    for tls in (False, True):
        stand_in = StandIn(tls)
        try:
            scheme = "https" if tls else "http"
            rows += series(f"stand-in, {scheme}", f"{scheme}://127.0.0.1:{stand_in.port}/api/flow_runs/abc",
                           CA if tls else None, options.requests, options.reps)
        finally:
            stand_in.stop()
    if not options.skip_prefect:
        rows += prefect_series(options.requests, options.reps)
    if shutil.which("nghttpd"):
        rows += h2_series(options.requests, options.reps)
    with open(options.out, "w") as f:
        json.dump({"measured": time.strftime("%Y-%m-%d %H:%M"), "requests": options.requests, "rows": rows}, f,
                  indent=1)
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
