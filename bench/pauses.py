"""A flow that pauses COUNT times in a row, for `make bench` part 4 (a real Prefect server).

    pauses.py COUNT plain|input|waiting

Before each pause it prints `PAUSING <run id> <CLOCK_MONOTONIC ns> <unix s>`, then calls pause_flow_run (600 s
timeout, polling for the resume every 0.2 s): `plain` waits for nothing, `input` waits for a RunInput with a
markdown description (the relay reads the input rows, which Prefect writes just after the Paused state), `waiting`
emits a `work.waiting` event (title and markdown body) right before pausing, as a flow that says what it waits
for does: that event reaches the socket about when the Paused event does, sometimes after it. The
benchmark resumes each pause once the alert and the webhook have both arrived. PREFECT_API_URL (and
PREFECT_API_AUTH_STRING) say which server.
"""
from __future__ import annotations

import sys
import time

from prefect import flow
from prefect.events import emit_event
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.runtime import flow_run

DESCRIPTION = "## Approve the nightly deploy?\n\n* **service**: `billing-api`\n* **version**: `1.4.2`\n\nReply with a comment."


WAITING_TITLE = "Ship billing-api 1.4.2?"


class Approval(RunInput):
    comment: str


@flow(name="bench-pauses")
def bench_pauses(count: int, mode: str) -> None:
    for n in range(count):
        print(f"PAUSING {flow_run.id} {time.monotonic_ns()} {time.time()}", flush=True)
        if mode == "waiting":
            emit_event(event="work.waiting", resource={"prefect.resource.id": f"prefect.flow-run.{flow_run.id}"},
                       payload={"title": WAITING_TITLE, "body": DESCRIPTION})
        if mode == "input":
            pause_flow_run(wait_for_input=Approval.with_initial_data(description=DESCRIPTION), timeout=600,
                           poll_interval=0.2, key=f"bench-{n}")
        else:
            pause_flow_run(timeout=600, poll_interval=0.2, key=f"bench-{n}")


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "plain"
    # One flow per mode, as different flows would be: the relay learns per flow whether it sends context events.
    bench_pauses.with_options(name=f"bench-pauses-{mode}")(int(sys.argv[1]), mode)
