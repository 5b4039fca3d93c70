"""A flow that pauses COUNT times in a row, for `make bench` part 4 (a real Prefect server).

    pauses.py COUNT

Before each pause it prints `PAUSING <run id> <CLOCK_MONOTONIC ns> <unix s>`, then calls pause_flow_run (no input,
600 s timeout) and polls for the resume every 0.2 s; the benchmark resumes each pause once the alert and the webhook
have both arrived. PREFECT_API_URL (and PREFECT_API_AUTH_STRING) say which server.
"""
from __future__ import annotations

import sys
import time

from prefect import flow
from prefect.flow_runs import pause_flow_run
from prefect.runtime import flow_run


@flow(name="bench-pauses")
def bench_pauses(count: int) -> None:
    for n in range(count):
        print(f"PAUSING {flow_run.id} {time.monotonic_ns()} {time.time()}", flush=True)
        pause_flow_run(timeout=600, poll_interval=0.2, key=f"bench-{n}")


if __name__ == "__main__":
    bench_pauses(int(sys.argv[1]))
