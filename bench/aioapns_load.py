"""aioapns (PyPI) pushing N alerts over one connection to a local APNs stand-in, timed (`make bench` part 2).

    aioapns_load.py PORT CA_FILE KEY_PATH KEY_ID TEAM_ID N

Prints `pushes=N delivered=D seconds=S per_second=R`. aioapns hard-codes Apple's hosts and port 443, so the
benchmark points its production protocol class at 127.0.0.1:PORT; everything else is the library as shipped, with
max_connections=1.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import sys
import time
import uuid

from aioapns import APNs, NotificationRequest, PushType
from aioapns import connection as apns_connection

PAYLOAD = {"aps": {"alert": {"title": "Approve the nightly deploy?", "subtitle": "nightly-deploy",
                             "body": "service: billing-api\nReply with a comment."},
                   "category": "waiting-reply", "sound": "default"},
           "body": {"runId": "95d737c2-8dd4-4a0b-b4d5-e6d147c8ff6e", "serverId": "bench"}}


def token(n: int) -> str:
    digits = format(n, "x")
    return "ab" + "0" * (62 - len(digits)) + digits


async def main() -> None:
    port, ca, key_path, key_id, team_id, count = sys.argv[1:7]
    count = int(count)
    apns_connection.APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
    apns_connection.APNsTLSClientProtocol.APNS_PORT = int(port)
    logging.getLogger("aioapns").setLevel(logging.CRITICAL)
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    with open(key_path) as f:
        key = f.read()
    client = APNs(key=key, key_id=key_id, team_id=team_id, topic="io.zzstoatzz.prefect", max_connections=1,
                  use_sandbox=False, ssl_context=context)

    def request(n: int) -> NotificationRequest:
        return NotificationRequest(device_token=token(n), message=PAYLOAD, notification_id=str(uuid.uuid4()),
                                   push_type=PushType.ALERT)

    warm = await client.send_notification(request(0))
    if not warm.is_successful:
        print(f"aioapns: warm-up push failed: {warm.status} {warm.description}")
        sys.exit(1)
    started = time.monotonic()
    results = await asyncio.gather(*(client.send_notification(request(n)) for n in range(1, count + 1)))
    seconds = time.monotonic() - started
    delivered = sum(1 for r in results if r.is_successful)
    print(f"pushes={count} delivered={delivered} seconds={seconds} per_second={int(delivered / seconds)}")


if __name__ == "__main__":
    asyncio.run(main())
