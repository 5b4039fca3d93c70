"""A flow that pauses COUNT times in a row, for `make chaos` (run with the project's .venv).

    pauser.py COUNT

Before each pause it prints `WAITING <run id>` and waits for a line on stdin (so the harness decides when, without paying
the flow's start-up inside a fault), then prints `PAUSING <run id> <CLOCK_MONOTONIC ns>`, calls pause_flow_run and
waits for the harness to resume it. stdin closed ends the flow. The timeout (300 s) is under ten minutes, so the
relay never sends a reminder (which would reuse the alert's collapse id and look like a duplicate), and a pause the
harness could not end expires on its own.
PREFECT_API_URL (and PREFECT_API_AUTH_STRING) say which server; the flow talks to it directly, not through the proxy.
"""
from __future__ import annotations

import sys
import time

from prefect import flow
from prefect.flow_runs import pause_flow_run
from prefect.runtime import flow_run


@flow(name="chaos-pauses")
def chaos_pauses(count: int) -> None:
    for n in range(count):
        print(f"WAITING {flow_run.id}", flush=True)
        if not sys.stdin.readline():
            return
        print(f"PAUSING {flow_run.id} {time.monotonic_ns()}", flush=True)
        pause_flow_run(timeout=300, poll_interval=0.2, key=f"chaos-{n}")


if __name__ == "__main__":
    chaos_pauses(int(sys.argv[1]))
