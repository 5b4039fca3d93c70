#!/usr/bin/env python3
"""Flows that pause, for `make demo` and the end-to-end tests (run with the project's .venv).

    flows.py run input   [--timeout S]   RunInput(comment: str) with a markdown description (waiting-reply)
    flows.py run plain   [--timeout S]   pause_flow_run(timeout=S), no input (waiting)
    flows.py run str     [--timeout S]   pause_flow_run(wait_for_input=str)
    flows.py run artifact                a markdown "approval-request" artifact, then a plain pause
    flows.py run event                   a custom event on the run with payload.body, then a plain pause
    flows.py run waiting                 a work.waiting event (title and markdown body) right before a plain pause
    flows.py run late                    a plain pause, then a work.waiting event for it 2 s later (EVENT_LAG)
    flows.py serve                       serve the "suspend" deployment (suspend_flow_run needs one)

`run` prints FLOW_RUN_ID=<id> as soon as the run exists and writes it to $FLOW_RUN_ID_FILE if set, then blocks
in the pause until the run is resumed, cancelled or times out. Every wait is Prefect's own pause timeout.
PREFECT_API_URL (and PREFECT_API_AUTH_STRING) say which server.
"""
from __future__ import annotations

import os
import sys
import time

from prefect import flow
from prefect.flow_runs import pause_flow_run, suspend_flow_run
from prefect.input import RunInput

DESCRIPTION = (
    "## Approve the nightly deploy?\n\n"
    "* **service**: `billing-api`\n"
    "* **version**: `1.4.2`\n\n"
    "Reply with a comment."
)
TIMEOUT = int(os.environ.get("PAUSE_TIMEOUT", "600"))


class Approval(RunInput):
    comment: str


def report() -> None:
    from prefect.runtime import flow_run

    fid = str(flow_run.id)
    if os.environ.get("FLOW_RUN_ID_FILE"):
        with open(os.environ["FLOW_RUN_ID_FILE"], "w") as f:
            f.write(fid)
    print(f"FLOW_RUN_ID={fid}", flush=True)


@flow(name="nightly-deploy")
def nightly_deploy():
    report()
    got = pause_flow_run(wait_for_input=Approval.with_initial_data(description=DESCRIPTION), timeout=TIMEOUT)
    print(f"approved: {got.comment!r}", flush=True)


@flow(name="plain-pause")
def plain_pause():
    report()
    pause_flow_run(timeout=TIMEOUT)


@flow(name="ask-for-text")
def ask_for_text():
    report()
    value = pause_flow_run(wait_for_input=str, timeout=TIMEOUT)
    print(f"got {value!r}", flush=True)


@flow(name="artifact-pause")
def artifact_pause():
    from prefect.artifacts import create_markdown_artifact

    report()
    create_markdown_artifact(markdown=DESCRIPTION, key="approval-request",
                             description="Approval request for the nightly deploy")
    pause_flow_run(timeout=TIMEOUT)


@flow(name="event-pause")
def event_pause():
    from prefect.events import emit_event
    from prefect.runtime import flow_run

    report()
    emit_event(event="relay.approval.requested",
               resource={"prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
                         "prefect.resource.name": "approval request"},
               payload={"body": "Deploy billing-api 1.4.2 to production?"})
    time.sleep(float(os.environ.get("EVENT_LEAD", "0.5")))  # the work a flow does between asking and pausing
    pause_flow_run(timeout=TIMEOUT)


@flow(name="work-waiting-pause")
def waiting_pause():
    from prefect.events import emit_event
    from prefect.runtime import flow_run

    report()
    # Emitted right before the pause: it reaches the socket after the Paused event as often as not.
    emit_event(event="work.waiting", resource={"prefect.resource.id": f"prefect.flow-run.{flow_run.id}"},
               payload={"title": "Ship billing-api 1.4.2?", "body": "* **change**: faster invoices\n* **risk**: low"})
    pause_flow_run(timeout=TIMEOUT)


@flow(name="late-context-pause")
def late_context_pause():
    import threading

    from prefect.events import emit_event
    from prefect.runtime import flow_run

    report()
    run_id = str(flow_run.id)

    def later() -> None:
        # Another thread of the flow's process (or another process) telling what the pause waits for, after it began.
        time.sleep(float(os.environ.get("EVENT_LAG", "2")))
        emit_event(event="work.waiting", resource={"prefect.resource.id": f"prefect.flow-run.{run_id}"},
                   payload={"title": "Ship billing-api 1.4.3?", "body": "* **change**: retries on timeouts"})

    threading.Thread(target=later, daemon=True).start()
    pause_flow_run(timeout=TIMEOUT)


@flow(name="suspended-release")
def suspended_release():
    value = suspend_flow_run(wait_for_input=str, timeout=None)
    print(f"got {value!r}", flush=True)


FLOWS = {"input": nightly_deploy, "plain": plain_pause, "str": ask_for_text, "artifact": artifact_pause,
         "event": event_pause, "waiting": waiting_pause, "late": late_context_pause}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["serve"]:
        suspended_release.serve(name="suspend", limit=2)
        return
    if len(args) >= 2 and args[0] == "run" and args[1] in FLOWS:
        if "--timeout" in args:
            global TIMEOUT
            TIMEOUT = int(args[args.index("--timeout") + 1])
        FLOWS[args[1]]()
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
