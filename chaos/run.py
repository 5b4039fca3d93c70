#!/usr/bin/env python3
"""`make chaos`: the relay under the faults a production relay meets, against a real Prefect 3.9.1 server.

The relay (CHAOS_RELAY_BIN, default .build/debug/prefect-push) talks to Prefect through a TCP proxy that can cut,
blackhole, or answer 500 (chaos/proxy.py), and to the fake APNs (CHAOS_FAKE_APNS_BIN, default
.build/debug/fake-apns), which is scripted over its --control stdin or killed. Pauses are real flow runs
(chaos/pauser.py). Each scenario has its own relay (fresh database, devices registered through POST /devices),
fake APNs and proxy; the Prefect server is shared. A relay that exits by itself while the harness waits for
alerts is started again a second later, as its supervisor would; but how it ended still counts (below).

Per scenario, one line and an entry in chaos/results.json (with the checkout's commit, "-dirty" if tracked files
were modified, and the date):
  missed      (pause, device) pairs without an accepted alert (apns-push-type alert, apns-collapse-id = the
              pause's state id, answered 200) by 60 s after the fault ended
  dup         accepted alerts for the same (device token, collapse id) beyond the first
  st-missed, st-dup   the same for Live Activity starts (every device has a push-to-start token)
  st-unknown  starts that did not arrive, up to the number the relay counts as sent with no answer and not sent
              again (`prefect_push_pushes_unconfirmed_total`): a start that may have arrived is not sent twice, by
              design; counted apart from st-missed
  p50, max    pause_flow_run called -> the last device's first accepted alert, over the pauses nobody missed
  endings     how every relay and fake APNs process the scenario started ended (each restart, each kill, the stop)

A scenario fails, and the exit code is 1, if it
- missed an alert or a Live Activity start (a start the relay gave up on with its fate unknown only counts as missed
  outside apns-kill and apns-silence, whose faults cut requests off after they went out);
- had a duplicate alert or start, except in relay-kill, apns-kill and apns-silence, whose fault explains one;
- had a process end in a way neither the harness nor the scenario's fault explains: a relay or fake APNs that died
  of a signal (the harness's SIGTERM at a stop and the fault's own kills excepted: relay-kill's SIGKILL, the fake's
  `exit`), exited non-zero (db-deleted's exit excepted), or did not stop within 10 s of SIGTERM; or the proxy's
  handler failed. The note names the process and how it ended ("relay pid 123 ended with signal SIGSEGV (11)");
- has a sanitizer report or a Swift crash report in a relay log ("*** Program crashed: ...", "*** Signal 11: ...",
  "...: Fatal error: ...");
- missed its own target:
    socket-cuts       p50 <= 3 s, max <= 15 s
    events-blackhole  the relay hangs up on the silent events socket and every phone has its alert while that
                      socket is still held (before the heal)
    rest-stall        the new pause's alerts within 2 s while other runs' reads are held
    relay-kill        per kill, push by push (type, token, message): nothing APNs had answered more than 50 ms
                      before the kill is sent again after the restart (--durable-within-ms; chaos-asan: 500)
    db-deleted        the relay exits non-zero
    fd-exhaustion     < 0.1 core, <= 40 log lines, no exit and the next pause in <= 5 s under RLIMIT_NOFILE 128
- was skipped, or failed to run.
All results are printed first.

Options: --quick (a smoke run: one kill round, 20 s of cuts, short scenarios only), --only name,name, --seed N.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import http.client
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(__file__))
from proxy import Proxy  # noqa: E402
from stack import (PYTHON, ROOT, Device, Endings, FakeAPNs, Pause, Pauser, Prefect, Relay, devices, log,  # noqa: E402
                   spawn, stop, stop_all)

WINDOW = 60  # seconds after a fault ends within which every device must have its alert
HOLD_LOCK = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
print("released", flush=True)
"""


@dataclass
class Context:
    relay_bin: str
    fake_bin: str
    prefect: Prefect
    work: str
    quick: bool
    rng: random.Random
    endings: Endings = field(default_factory=Endings)  # the running scenario's processes (run_one makes a new one)


@dataclass
class Stack:
    """One scenario's relay, fake APNs, proxy, registered phones and pausing flows."""
    ctx: Context
    work: str
    fake: FakeAPNs
    proxy: Proxy
    relay: Relay
    phones: list[Device]
    pausers: list[Pauser] = field(default_factory=list)
    relay_exits: list[int] = field(default_factory=list)  # exit codes of a relay that stopped by itself

    async def pauser(self, count: int = 100) -> Pauser:
        pauser = Pauser(self.ctx.prefect, self.work, f"flow-{len(self.pausers)}")
        self.pausers.append(pauser)
        await pauser.start(count)
        return pauser

    def delivered(self, pause: Pause) -> bool:
        arrivals = self.fake.arrivals
        return all(arrivals.stamps(pause, "alert", p.token) and arrivals.stamps(pause, "liveactivity", p.start_token)
                   for p in self.phones)

    async def settle(self, pauses: list[Pause], until: float) -> None:
        """Waits until every phone has its alert and start for every pause, or until `until` (monotonic s).
        A relay that exited is started again, as its supervisor (Kubernetes, systemd) would."""
        while time.monotonic() < until and not all(self.delivered(p) for p in pauses):
            if self.relay.process.returncode is not None:
                self.relay_exits.append(self.relay.process.returncode)
                await asyncio.sleep(1)
                await self.relay.start()
            await asyncio.sleep(0.2)

    async def settled(self, pause: Pause) -> dict:
        """Waits at most `WINDOW` from now for every phone's alert and start for `pause`, then tallies it."""
        deadline = time.monotonic() + WINDOW
        await self.settle([pause], deadline)
        return tally(self, [pause], [deadline])


@contextlib.asynccontextmanager
async def bring_up(ctx: Context, name: str, count: int, db_dir: str | None = None, prefix: tuple = ()):
    """Fake APNs, proxy, relay (subscribed) and `count` registered phones; everything stopped on the way out."""
    work = os.path.join(ctx.work, name)
    os.makedirs(work, exist_ok=True)
    fake = FakeAPNs(ctx.fake_bin, work, ctx.endings)
    proxy = Proxy(ctx.prefect.port)
    relay = None
    stack = None
    try:
        await fake.start()
        await proxy.start()
        relay = Relay(ctx.relay_bin, work, f"http://127.0.0.1:{proxy.port}/api", fake.port,
                      os.path.join(db_dir or work, "relay.db"), prefix, ctx.endings)
        await relay.start()
        phones = devices(count)
        await relay.register(phones)
        stack = Stack(ctx, work, fake, proxy, relay, phones)
        yield stack
    finally:
        for pauser in stack.pausers if stack else []:
            await pauser.finish()
        if relay:
            await relay.stop()
        await fake.stop()
        await proxy.stop()
        ctx.endings.problems.extend(proxy.problems)


def tally(stack: Stack, pauses: list[Pause], deadlines: list[float]) -> dict:
    """Missed and duplicate alerts and starts, and pause -> alert latency (see the module doc)."""
    arrivals = stack.fake.arrivals
    out = {"pauses": len(pauses), "devices": len(stack.phones), "missed": 0, "duplicates": 0, "starts_missed": 0,
           "start_duplicates": 0, "starts_unknown": 0, "relay_exits": stack.relay_exits}
    # Starts the relay sent, heard nothing of, and by design did not send again: the rest of the starts that did not
    # arrive were forgotten, and count as missed.
    unconfirmed = stack.relay.unconfirmed_pushes()
    not_arrived = 0
    latencies = []
    for pause, deadline in zip(pauses, deadlines):
        cutoff = int(deadline * 1e9)
        firsts = []  # each phone's first accepted alert in time
        for phone in stack.phones:
            alerts = arrivals.stamps(pause, "alert", phone.token)
            starts = arrivals.stamps(pause, "liveactivity", phone.start_token)
            in_time = [s for s in alerts if s <= cutoff]
            if in_time:
                firsts.append(min(in_time))
            out["missed"] += not in_time
            not_arrived += not any(s <= cutoff for s in starts)
            out["duplicates"] += max(0, len(alerts) - 1)
            out["start_duplicates"] += max(0, len(starts) - 1)
        if len(firsts) == len(stack.phones):
            latencies.append((max(firsts) - pause.called_ns) / 1e9)
    out["starts_unknown"] = min(not_arrived, unconfirmed)
    out["starts_missed"] = not_arrived - out["starts_unknown"]
    latencies.sort()
    out["latency_s"] = {"n": len(latencies), "p50": round(latencies[(len(latencies) - 1) // 2], 2),
                        "max": round(latencies[-1], 2)} if latencies else None
    return out


async def wait_for(predicate, timeout: float, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True


@dataclass
class FanOut:
    pausing: asyncio.Task  # the pause (its state read from Prefect once it is there)
    before: int  # requests the fake had seen before the pause


async def pause_and_wait_for_requests(stack: Stack, pauser: Pauser, rng: random.Random) -> FanOut:
    """A pause, then a wait until a random 10-70 % of its fan-out (an alert and a start per phone) reached APNs."""
    before = stack.fake.arrivals.total
    # Reading the pause's state from Prefect can take longer than the fan-out: the count is watched meanwhile.
    pausing = asyncio.create_task(pauser.pause())
    threshold = before + rng.randint(len(stack.phones) * 2 // 10, len(stack.phones) * 14 // 10)
    await wait_for(lambda: stack.fake.arrivals.total >= threshold or pausing.done() and pausing.exception(), 30,
                   step=0.001)
    return FanOut(pausing, before)


def progress(seen: int, total: int) -> str:
    """How far a fan-out got before the kill; a relay fast enough to finish first is called out."""
    return f"{seen}/{total} requests" + (" (the fan-out had finished: not mid fan-out)" if seen >= total else "")


# MARK: - scenarios

async def baseline(ctx: Context) -> dict:
    """No fault: three pauses in a row, each resumed once every phone has its alert (checks the harness itself)."""
    async with bring_up(ctx, "baseline", 20) as stack:
        pauser = await stack.pauser()
        pauses, deadlines = [], []
        for _ in range(3):
            pause = await pauser.pause()
            deadline = time.monotonic() + WINDOW
            await stack.settle([pause], deadline)
            pauses.append(pause)
            deadlines.append(deadline)
            await pauser.resume()
        return tally(stack, pauses, deadlines)


async def relay_kill(ctx: Context) -> dict:
    """kill -9 of the relay mid fan-out (alerts and starts to every phone), then a restart, several rounds; the last
    one killed while the fan-out waits for one slow answer (`STRAGGLER_MS`), everything else answered. Target, push
    by push: nothing sent again after a restart that APNs had answered more than `ANSWERED_BEFORE_MS` before the
    kill; re-sending what was in flight at the kill is fine (`resent_after_kill`)."""
    count, rounds = 1000, 1 if ctx.quick else 3
    async with bring_up(ctx, "relay-kill", count) as stack:
        pauser = await stack.pauser(rounds + 1)
        pauses, deadlines, notes, kills = [], [], [], []
        for round in range(rounds + 1):
            straggler = stack.phones[0].token if round == rounds else None
            pause, deadline, kill = await kill_round(stack, pauser, straggler, ctx.rng)
            kills.append(kill)
            when = (f"all {2 * count} requests, {STRAGGLER_MS // 10} ms later, one answer held {STRAGGLER_MS} ms"
                    if straggler else progress(kill["reached_before_kill"], 2 * count))
            notes.append(f"{when}: re-sent {kill['resent']} answered > {ANSWERED_BEFORE_MS} ms before the kill "
                         f"(of {kill['sent_again']} sent again, the oldest answered {kill['oldest_sent_again_ms']} ms "
                         f"before), in flight {kill['in_flight']}")
            pauses.append(pause)
            deadlines.append(deadline)
            await pauser.resume()
        target = kills_target(kills)
        return {**tally(stack, pauses, deadlines), "kills": kills, "target_met": target["target_met"],
                "note": "killed after " + "; ".join(notes) + target["note"]}


async def kill_round(stack: Stack, pauser: Pauser, straggler: str | None, rng: random.Random) -> tuple:
    """One relay-kill round: a pause, the relay SIGKILLed by the fake mid fan-out (at a random 10-70 % of it, or
    with `straggler`, `STRAGGLER_MS // 10` after the whole fan-out reached APNs while that token's answer is held),
    a restart, and a wait until every phone has its alert and start and the outbox is empty. Returns the pause, its
    deadline and `resent_after_kill` of the round's requests."""
    count = len(stack.phones)
    before = stack.fake.arrivals.total
    stack.relay.expect_kill()
    # The fake kills the relay as the n-th request arrives: a harness watching its output would land late, after a
    # fan-out the relay finishes in ~0.2 s.
    if straggler:
        await stack.fake.command(f"straggle {straggler} {STRAGGLER_MS}")
        await stack.fake.kill_after(stack.relay.process, 2 * count, wait_ms=STRAGGLER_MS // 10)
    else:
        await stack.fake.kill_after(stack.relay.process, rng.randint(count * 2 // 10, count * 14 // 10))
    pausing = asyncio.create_task(pauser.pause())
    killed_ns = await stack.fake.killed()
    await stack.relay.process.wait()
    pause = await pausing
    if straggler:
        await stack.fake.command(f"straggle {straggler} 0")
    restarted_ns = time.monotonic_ns()
    await stack.relay.start()
    deadline = time.monotonic() + WINDOW
    await stack.settle([pause], deadline)
    # What the restarted relay sends again comes from its outbox (a push whose answer the kill lost may already
    # count as delivered): the round ends once that is empty.
    pending = None
    while time.monotonic() < deadline and (pending := await stack.relay.outbox_pending()) != 0:
        await asyncio.sleep(0.1)
    if pending != 0:
        raise RuntimeError(f"the restarted relay's outbox still held {pending} pushes")
    await asyncio.sleep(0.1)  # the fake writes its arrival lines in batches: the last ones of the round
    kill = resent_after_kill(stack.fake.arrivals.requests[before:], killed_ns, restarted_ns,
                             {("alert", straggler): STRAGGLER_MS} if straggler else {})
    return pause, deadline, kill


STRAGGLER_MS = 3000  # the last relay-kill round's slow answer

# An answer older than this at the kill should have been made durable: with the debug relay the oldest answer sent
# again was 9-32 ms old at the kill. `--durable-within-ms` sets another window: `make chaos-asan` passes 500, because
# the AddressSanitizer build's answers lag further behind during a fan-out (see the Makefile for the measurement).
ANSWERED_BEFORE_MS = 50


def use_durable_window(ms: int) -> None:
    global ANSWERED_BEFORE_MS
    ANSWERED_BEFORE_MS = ms


def resent_after_kill(requests: list[tuple[int, str, str, int, str]], killed_ns: int, restarted_ns: int,
                      slow: dict[tuple[str, str], int]) -> dict:
    """Of one fan-out's requests (stamp, push type, token, status, message), around a kill at `killed_ns` and a
    restart at `restarted_ns`, a push being one (push type, token, message): `resent`, pushes answered more than
    `ANSWERED_BEFORE_MS` before the kill and sent again after the restart (`resent_examples` names the oldest few);
    `in_flight`, pushes the killed relay had sent that were unanswered at the kill (reaching APNs after it, or never
    answered), or answered within that margin; `sent_again`, every push sent both before and after the restart. The
    fake answers a request as it completes, so its stamp is when it was answered, but for the (push type, token)
    pairs of `slow`, answered that many ms later."""
    cutoff = killed_ns - ANSWERED_BEFORE_MS * 1_000_000
    before: dict[tuple[str, str, str], tuple[int, int, int]] = {}  # push -> first (arrived, answered, status)
    again: set[tuple[str, str, str]] = set()
    for stamp, push_type, token, status, message in requests:
        key = (push_type, token, message)
        if stamp < restarted_ns:
            before.setdefault(key, (stamp, stamp + slow.get((push_type, token), 0) * 1_000_000, status))
        elif key in before:
            again.add(key)
    in_flight = sum(1 for _, answered, status in before.values() if status == 0 or answered >= cutoff)
    resent = sorted((before[key][1], key) for key in again if before[key][2] != 0 and before[key][1] < cutoff)
    reached = sum(1 for arrived, _, _ in before.values() if arrived < killed_ns)
    oldest = min((before[key][1] for key in again if before[key][2] != 0), default=killed_ns)
    examples = [f"{push_type} to …{token[-6:]} ({message[:12]}) answered {(killed_ns - answered) / 1e6:.0f} ms before"
                for answered, (push_type, token, message) in resent[:3]]
    return {"resent": len(resent), "resent_examples": examples, "in_flight": in_flight, "sent_again": len(again),
            "reached_before_kill": reached, "oldest_sent_again_ms": round(max(0, killed_ns - oldest) / 1e6, 1)}


def kills_target(kills: list[dict]) -> dict:
    """relay-kill's verdict over its rounds (`resent_after_kill` each): met when no push answered more than
    `ANSWERED_BEFORE_MS` before a kill was sent again; the note names a few that were."""
    resent = sum(kill["resent"] for kill in kills)
    if not resent:
        return {"target_met": True, "note": ""}
    examples = [example for kill in kills for example in kill["resent_examples"]][:3]
    return {"target_met": False, "note": f"; {resent} pushes APNs had answered > {ANSWERED_BEFORE_MS} ms before a "
                                         f"kill were sent again (target: none), e.g. {'; '.join(examples)}"}


async def apns_kill(ctx: Context) -> dict:
    """The fake APNs killed mid fan-out and started again on the same port a second later."""
    count = 2000
    async with bring_up(ctx, "apns-kill", count) as stack:
        pauser = await stack.pauser()
        sent = await pause_and_wait_for_requests(stack, pauser, ctx.rng)
        await stack.fake.die()
        seen, pause = stack.fake.arrivals.total - sent.before, await sent.pausing
        await asyncio.sleep(1)
        await stack.fake.start()
        return {**(await stack.settled(pause)), "note": "killed after " + progress(seen, 2 * count)}


async def apns_503(ctx: Context) -> dict:
    """APNs answers 503 ServiceUnavailable to everything for 12 s from the pause."""
    async with bring_up(ctx, "apns-503", 50) as stack:
        pauser = await stack.pauser()
        await stack.fake.command("answer 503 ServiceUnavailable")
        pause = await pauser.pause()
        await asyncio.sleep(max(0.0, pause.called_ns / 1e9 + 12 - time.monotonic()))
        await stack.fake.command("answer normal")
        return await stack.settled(pause)


async def apns_goaway(ctx: Context) -> dict:
    """Every APNs connection sends GOAWAY after 500 answered streams, during a fan-out of 2,000 pushes."""
    async with bring_up(ctx, "apns-goaway", 1000) as stack:
        pauser = await stack.pauser()
        await stack.fake.command("goaway 500")
        pause = await pauser.pause()
        result = await stack.settled(pause)
        await stack.fake.command("goaway off")
        return result


async def rest_500(ctx: Context) -> dict:
    """GET /api/flow_runs/{id} answers 500 until 3 s after the pause (Prefect restarting)."""
    async with bring_up(ctx, "rest-500", 20) as stack:
        pauser = await stack.pauser()
        stack.proxy.fail_run_reads(math.inf)
        pause = await pauser.pause()
        end = pause.called_ns / 1e9 + 3
        stack.proxy.fail_run_reads(end)
        await asyncio.sleep(max(0.0, end - time.monotonic()))
        return {**(await stack.settled(pause)), "note": f"{stack.proxy.injected} run reads answered 500"}


async def rest_stall(ctx: Context) -> dict:
    """Prefect holds every REST read naming 8 runs (more runs than the relay's 6 pooled connections) for 20 s from
    their pauses, as a slow query or a locked table would; a ninth run pauses 4 s in. Target: the ninth run's alerts
    within 2 s of its pause, while the 8 are still held; the 8 announced once Prefect answers them."""
    stalled_count, hold, fresh_at, target = 8, 20, 4, 2.0
    async with bring_up(ctx, "rest-stall", 3) as stack:
        pausers = await asyncio.gather(*(stack.pauser(1) for _ in range(stalled_count + 1)))
        fresh, stalled = pausers[0], pausers[1:]
        stack.proxy.hold_runs([pauser.run_id for pauser in stalled])
        started = time.monotonic()
        stalled_pauses = list(await asyncio.gather(*(pauser.pause() for pauser in stalled)))
        await asyncio.sleep(max(0.0, started + fresh_at - time.monotonic()))
        pause = await fresh.pause()
        await stack.settle([pause], started + hold)
        fresh_latency = (tally(stack, [pause], [started + hold])["latency_s"] or {}).get("max")
        announced_early = sum(stack.delivered(p) for p in stalled_pauses)
        await asyncio.sleep(max(0.0, started + hold - time.monotonic()))
        held_peak = stack.proxy.held_peak
        released_ns = time.monotonic_ns()
        stack.proxy.release()
        deadline = time.monotonic() + WINDOW
        await stack.settle(stalled_pauses, deadline)
        arrivals = stack.fake.arrivals
        after_release = [min(arrivals.stamps(p, "alert", phone.token)) - released_ns
                         for p in stalled_pauses for phone in stack.phones if arrivals.stamps(p, "alert", phone.token)]
        result = tally(stack, [pause] + stalled_pauses, [started + hold] + [deadline] * len(stalled_pauses))
        met = fresh_latency is not None and fresh_latency <= target and not announced_early
        release_note = f"{max(after_release) / 1e9:.2f} s" if after_release else "-"
        return {**result, "fresh_latency_s": fresh_latency, "held_peak": held_peak, "target_met": met,
                "note": f"new pause announced in {fresh_latency if fresh_latency is not None else '-'} s "
                        f"(target <= {target} s {'met' if met else 'NOT met'}) with {stalled_count} runs' reads held; "
                        f"those announced by {release_note} after release; at most {held_peak} reads held at once "
                        f"({stack.proxy.held_total} in all)"}


async def sqlite_lock(ctx: Context) -> dict:
    """Another process holds the relay's database write lock (BEGIN IMMEDIATE) for 20 s; the pause 1 s in."""
    async with bring_up(ctx, "sqlite-lock", 20) as stack:
        pauser = await stack.pauser()
        holder = await spawn(PYTHON, "-c", HOLD_LOCK, stack.relay.db_path, "20", stdout=subprocess.PIPE,
                             log_path=os.path.join(stack.work, "lock-holder.log"))
        try:
            if await asyncio.wait_for(holder.stdout.readline(), 35) != b"locked\n":
                raise RuntimeError("the lock holder did not get the lock")
            await asyncio.sleep(1)
            pause = await pauser.pause()
            if await asyncio.wait_for(holder.stdout.readline(), 35) != b"released\n":
                raise RuntimeError("the lock holder did not commit")
        finally:
            await stop(holder)
        return await stack.settled(pause)


async def disk_full(ctx: Context) -> dict:
    """The database's file system (a 4 MiB tmpfs) full for 10 s, the pause 1 s in; then freed."""
    disk = os.path.join(ctx.work, "disk-full-tmpfs")
    os.makedirs(disk, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", disk], capture_output=True, text=True)
    if mounted.returncode != 0:
        return {"skipped": f"cannot mount a tmpfs (needs root): {mounted.stderr.strip() or mounted.returncode}"}
    try:
        async with bring_up(ctx, "disk-full", 20, db_dir=disk) as stack:
            pauser = await stack.pauser()
            filler = os.path.join(disk, "filler")
            fill(filler)
            started = time.monotonic()
            await asyncio.sleep(1)
            pause = await pauser.pause()
            await asyncio.sleep(max(0.0, started + 10 - time.monotonic()))
            os.remove(filler)
            return await stack.settled(pause)
    finally:
        subprocess.run(["umount", "--lazy", disk], capture_output=True)


def fill(path: str) -> None:
    """Writes `path` until the file system is full."""
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
    with open(path, "ab", buffering=0) as f:  # the last partial chunk's worth too
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 512)


async def socket_cuts(ctx: Context) -> dict:
    """The events socket cut every 2-5 s for 60 s, three flows pausing throughout (each pause resumed once every
    phone has its alert). Target: pause -> alert p50 <= 3 s, max <= 15 s."""
    span = 20 if ctx.quick else 60
    async with bring_up(ctx, "socket-cuts", 3) as stack:
        pausers = await asyncio.gather(*(stack.pauser() for _ in range(3)))
        window_end = time.monotonic() + span
        deadline = window_end + WINDOW
        pauses: list[Pause] = []

        async def cutter() -> tuple[int, int]:
            """(cuts, of them when a socket was open): a relay backing off has none open to cut."""
            cuts = open_ones = 0
            while (wait := ctx.rng.uniform(2, 5)) < window_end - time.monotonic():
                await asyncio.sleep(wait)
                cuts += 1
                open_ones += stack.proxy.cut("events") > 0
            return cuts, open_ones

        async def pausing(pauser: Pauser) -> None:
            while time.monotonic() < window_end:
                pause = await pauser.pause()
                pauses.append(pause)
                await stack.settle([pause], deadline)
                if time.monotonic() >= window_end:
                    return
                await pauser.resume()
                await asyncio.sleep(ctx.rng.uniform(0.2, 1.5))

        (cuts, open_ones), *_ = await asyncio.gather(cutter(), *(pausing(p) for p in pausers))
        result = tally(stack, pauses, [deadline] * len(pauses))
        latency = result["latency_s"]
        met = bool(latency) and latency["p50"] <= 3 and latency["max"] <= 15
        return {**result, "note": f"{cuts} cuts in {span} s, {open_ones} found the socket open; "
                                  f"target p50 <= 3 s, max <= 15 s {'met' if met else 'NOT met'}", "target_met": met}


# The relay PINGs an events socket silent for 10 s and hangs up on one silent for 25 s
# (Sources/Relay/Events/EventsSocket.swift, `retryPolicy`), then reconnects after its first backoff (0.75-1 s) and
# reads the pause from the backfill (a paused listing right after the hang-up often finds it first): a correct relay
# delivers ~26-28 s into the silence at the latest (measured: hang-up at 21.6-25 s, every alert by 22-23 s, debug
# and ASan builds alike). The silent socket is held well past that, for a margin on a loaded machine.
BLACKHOLE_S = 40


async def events_blackhole(ctx: Context) -> dict:
    """The open events socket goes silent for `BLACKHOLE_S` (kept open, everything swallowed both ways, as a dead
    peer or a NAT that dropped the flow leaves it), a pause 2 s in; new connections work. Target: the relay notices
    the silence and hangs up (then lists paused runs and reconnects), so every phone has its alert before the
    silent socket is released (healed, at the span's end or once everything was delivered): releasing it would let
    any relay reconnect."""
    async with bring_up(ctx, "events-blackhole", 3) as stack:
        pauser = await stack.pauser()
        started = time.monotonic()
        if stack.proxy.blackhole("events") != 1:
            raise RuntimeError("the relay had no events socket open to silence")
        await asyncio.sleep(2)
        pause = await pauser.pause()
        await stack.settle([pause], started + BLACKHOLE_S)
        healed_ns, healed_s = time.monotonic_ns(), time.monotonic() - started
        stack.proxy.heal()
        deadline = time.monotonic() + WINDOW
        await stack.settle([pause], deadline)
        arrivals = stack.fake.arrivals
        firsts = [min(arrivals.stamps(pause, "alert", phone.token), default=None) for phone in stack.phones]
        hung_up = [t - started for t in stack.proxy.silent_hung_up]
        reopened = [t - started for t in stack.proxy.events_opened if t > started]
        verdict = blackhole_verdict(firsts, healed_ns, pause.called_ns, min(hung_up, default=None),
                                    reopened[0] if reopened else None, healed_s)
        return {**tally(stack, [pause], [deadline]), **verdict}


def blackhole_verdict(firsts: list[int | None], healed_ns: int, called_ns: int, hung_up_s: float | None,
                      reopened_s: float | None, healed_s: float) -> dict:
    """events-blackhole's target from each phone's first accepted alert (CLOCK_MONOTONIC ns, None: none): met when
    the relay hung up on the silent socket (`hung_up_s` seconds into the silence) and every phone had its alert
    before that socket would have been released (at `healed_ns`, `healed_s` into the silence). A relay that keeps
    the silent socket and finds the pause by its 60 s paused listing did not notice the silence. `reopened_s`: when
    it opened its next events socket (for the note)."""
    early = sum(1 for first in firsts if first is not None and first < healed_ns)
    noticed = hung_up_s is not None and hung_up_s < healed_s
    met = noticed and bool(firsts) and early == len(firsts)
    again = f", a new one at {reopened_s:.1f} s" if reopened_s is not None else ""
    replaced = (f"relay hung up on the silent events socket {hung_up_s:.1f} s into the silence{again}" if noticed
                else f"relay kept the silent events socket for all {healed_s:.0f} s of silence")
    if met:
        outcome = f"every alert {(max(firsts) - called_ns) / 1e9:.1f} s after the pause, while the blackhole held"
    else:
        outcome = (f"{early} of {len(firsts)} phones had their alert while the blackhole held (target: the silent "
                   f"socket dropped and every alert before it would be released)")
    return {"target_met": met, "hung_up_after_s": round(hung_up_s, 1) if hung_up_s is not None else None,
            "reopened_after_s": round(reopened_s, 1) if reopened_s is not None else None,
            "note": f"{replaced}; {outcome}"}


async def apns_silence(ctx: Context) -> dict:
    """Every established APNs connection (open or new; TLS still completes) silent for 15 s, the pause 1 s in."""
    async with bring_up(ctx, "apns-silence", 20) as stack:
        pauser = await stack.pauser()
        await stack.fake.command("silence on")
        started = time.monotonic()
        await asyncio.sleep(1)
        pause = await pauser.pause()
        await asyncio.sleep(max(0.0, started + 15 - time.monotonic()))
        await stack.fake.command("silence off")
        return await stack.settled(pause)


async def db_deleted(ctx: Context) -> dict:
    """The database file (and its -wal, -shm) deleted under the running relay. Expected: it exits non-zero."""
    async with bring_up(ctx, "db-deleted", 20) as stack:
        relay = stack.relay
        relay.expected_exits = tuple(range(128))  # the exit this fault asks for (a signal is still a crash)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(relay.db_path + suffix)
        deleted = time.monotonic()
        try:
            await relay.register(devices(21)[20:])
            registration = "a registration afterwards answered 200"
        except (RuntimeError, OSError, http.client.HTTPException) as error:
            registration = f"a registration afterwards failed ({type(error).__name__})"
        await wait_for(lambda: relay.process.returncode is not None, 15, step=0.1)
        code = relay.process.returncode
        if code is not None:
            outcome = f"exited {code} after {time.monotonic() - deleted:.1f} s; {registration}"
        else:
            await relay.stop()
            await relay.start()
            kept = (await relay.health() or {}).get("devices")
            outcome = f"kept running for 15 s; {registration}; after a restart {kept} devices"
        return {"pauses": 0, "devices": len(stack.phones), "note": outcome, "exit_code": code,
                "target_met": code not in (None, 0)}


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_idle(port: int, count: int) -> list:
    """`count` connections to 127.0.0.1:port that never send a byte (connects the kernel completes from the
    backlog count too, accepted or not)."""
    import socket
    held = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError, OSError):
            s.connect(("127.0.0.1", port))
        held.append(s)
    return held


async def fd_exhaustion(ctx: Context) -> dict:
    """The relay under RLIMIT_NOFILE 128 while 300 idle connections hold its API port for 15 s, refreshed as the
    relay closes them; meanwhile the fake APNs is killed and restarted and Prefect's connections are cut, so the
    relay's own sockets must be opened again at the limit. Expected: under a tenth of a core, a handful of log lines,
    no exit, and the pause made after the connections close announced at once (max <= 5 s)."""
    limit, idle, span = 128, 300, 15
    prefix = ("prlimit", f"--nofile={limit}:{limit}", "--")
    async with bring_up(ctx, "fd-exhaustion", 5, prefix=prefix) as stack:
        pauser = await stack.pauser()
        relay = stack.relay
        lines_before = len(open(relay.log_path, "rb").read().splitlines())
        cpu_before, started = cpu_seconds(relay.process.pid), time.monotonic()
        held = open_idle(relay.port, idle)
        refreshed = 0
        await asyncio.sleep(2)
        await stack.fake.die()
        stack.proxy.cut()
        await asyncio.sleep(1)
        await stack.fake.start()
        while time.monotonic() - started < span:
            await asyncio.sleep(1)
            # The relay closes idle connections after its header deadline: open them again, as a flood would.
            for i, s in enumerate(held):
                try:
                    if s.recv(1, __import__("socket").MSG_DONTWAIT | __import__("socket").MSG_PEEK) == b"":
                        s.close()
                        held[i] = open_idle(relay.port, 1)[0]
                        refreshed += 1
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    held[i] = open_idle(relay.port, 1)[0]
                    refreshed += 1
        alive = relay.process.returncode is None
        cpu = (cpu_seconds(relay.process.pid) - cpu_before) / (time.monotonic() - started) if alive else None
        for s in held:
            s.close()
        lines = open(relay.log_path, "rb").read().splitlines()[lines_before:]
        await asyncio.sleep(1)
        pause = await pauser.pause()
        deadline = time.monotonic() + WINDOW
        await stack.settle([pause], deadline)
        result = tally(stack, [pause], [deadline])
        latency = result.get("latency_s")
        met = bool(alive and cpu is not None and cpu < 0.1 and len(lines) <= 40 and latency and latency["max"] <= 5)
        return {**result, "cpu_cores": round(cpu, 3) if cpu is not None else None, "log_lines": len(lines),
                "alive": alive, "target_met": met,
                "note": f"{'alive' if alive else 'DIED'}; {cpu if cpu is None else round(cpu, 3)} of a core, "
                        f"{len(lines)} log lines in {span} s ({refreshed} idle connections reopened); "
                        f"target < 0.1 core, <= 40 lines, next pause <= 5 s {'met' if met else 'NOT met'}"}


SCENARIOS = {
    "baseline": baseline, "relay-kill": relay_kill, "apns-kill": apns_kill, "apns-503": apns_503, "rest-500": rest_500,
    "rest-stall": rest_stall, "sqlite-lock": sqlite_lock, "disk-full": disk_full, "socket-cuts": socket_cuts,
    "events-blackhole": events_blackhole, "apns-silence": apns_silence, "db-deleted": db_deleted,
    "apns-goaway": apns_goaway, "fd-exhaustion": fd_exhaustion,
}
QUICK = ["baseline", "relay-kill", "rest-500", "socket-cuts", "db-deleted", "fd-exhaustion"]


# MARK: - report

def line(name: str, result: dict) -> str:
    if "skipped" in result:
        return f"{name:<17} skipped: {result['skipped']}"
    if "error" in result:
        return f"{name:<17} FAILED TO RUN: {result['error']}"
    latency = result.get("latency_s")
    numbers = (f"pauses {result['pauses']:>3}  devices {result['devices']:>5}  "
               f"missed {result.get('missed', '-'):>5}  dup {result.get('duplicates', '-'):>4}  "
               f"st-missed {result.get('starts_missed', '-'):>5}  st-dup {result.get('start_duplicates', '-'):>4}  "
               f"st-unknown {result.get('starts_unknown', '-'):>4}  "
               f"p50 {latency['p50'] if latency else '-':>6}  max {latency['max'] if latency else '-':>6}")
    exits = result.get("relay_exits")
    restarted = f"; the relay exited ({', '.join(map(str, exits))}) and was restarted" if exits else ""
    return f"{name:<17} {numbers}  {result.get('note', '')}{restarted}".rstrip()


# Scenarios whose fault itself makes APNs see a push twice (a relay or an APNs killed between a request and its
# answer; a connection silent past the push's deadline, whose request is sent again on a new one while the silent one
# may still deliver it); relay-kill bounds its re-sends with a target of its own. Everywhere else a duplicate fails.
DUPLICATES_EXPECTED = {"relay-kill", "apns-kill", "apns-silence"}
# Scenarios whose fault cuts requests off after they went out, so a start's fate can be unknown (and, by the
# delivery table, it is not sent again). Everywhere else a start given up that way counts as missed.
UNKNOWN_FATE_EXPECTED = {"apns-kill", "apns-silence"}


def passed(name: str, result: dict) -> bool:
    """Ran, every process ended as it should (`bad_endings`), no alert or Live Activity start missed, no duplicate
    where the fault can't explain one, and the scenario's own target (if any) met. A skipped scenario did not pass:
    it proved nothing."""
    if "skipped" in result or "error" in result or result.get("bad_endings") or result.get("sanitizer"):
        return False
    if result.get("missed") or result.get("starts_missed"):
        return False
    if name not in UNKNOWN_FATE_EXPECTED and result.get("starts_unknown"):
        return False
    if name not in DUPLICATES_EXPECTED and (result.get("duplicates") or result.get("start_duplicates")):
        return False
    return result.get("target_met", True)


# The sanitizers' reports, and the Swift runtime's on a crash: its backtracer's "*** Signal 11: Backtracing from
# 0x...", then "*** Program crashed: Bad pointer dereference at 0x... ***" ("💣 Program crashed: ..." on a
# terminal); a fatalError or a failed precondition "File.swift:12: Fatal error: ...", with the backtracer or without.
SANITIZER_MARKS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"WARNING: ThreadSanitizer",
                   b"runtime error:", b"Program crashed: ", b"*** Signal ", b": Fatal error: ")


def sanitizer_reports(work: str) -> list[str]:
    """The first line of each sanitizer report or crash in the scenario's relay logs (what a crash was, where the
    relay's ending only says which signal)."""
    found = []
    for directory, _, files in os.walk(work):
        for name in files:
            if name.startswith("relay") and name.endswith(".log"):
                with open(os.path.join(directory, name), "rb") as f:
                    for raw in f:
                        if any(mark in raw for mark in SANITIZER_MARKS):
                            found.append(raw.decode(errors="replace").strip()[:200])
    return found


async def run_one(name: str, ctx: Context) -> dict:
    log(f"== {name}")
    started = time.monotonic()
    ctx.endings = Endings()
    try:
        result = await SCENARIOS[name](ctx)
    except Exception as error:  # one scenario that cannot run must not stop the others (Ctrl-C still does)
        result = {"error": f"{type(error).__name__}: {error}"}
    result["endings"] = ctx.endings.seen
    bad = ctx.endings.problems
    if bad:
        result["bad_endings"] = bad
        result["target_met"] = False
        result["note"] = (result.get("note", "") + "; " + "; ".join(bad[:3])
                          + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else "")).lstrip("; ")
    reports = sanitizer_reports(os.path.join(ctx.work, name))
    if reports:
        result["sanitizer"] = reports
        result["target_met"] = False
        result["note"] = (result.get("note", "") + f"; {len(reports)} sanitizer or crash report line(s): "
                          + reports[0]).lstrip("; ")
    result["seconds"] = round(time.monotonic() - started, 1)
    log(line(name, result))
    return result


def checkout_commit() -> str:
    """`git rev-parse --short HEAD`, with "-dirty" when tracked files are modified: what the run ran on."""
    def git(*args: str) -> str:
        answer = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return answer.stdout.strip() if answer.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help="comma-separated: " + ",".join(SCENARIOS))
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--durable-within-ms", type=int, default=ANSWERED_BEFORE_MS,
                        help="relay-kill: answers older than this at the kill must not be sent again (default 50)")
    parser.add_argument("--out", default=os.path.join(ROOT, "chaos", "results.json"))
    args = parser.parse_args()
    use_durable_window(args.durable_within_ms)
    names = args.only.split(",") if args.only else (QUICK if args.quick else list(SCENARIOS))
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    binaries = {"relay": os.environ.get("CHAOS_RELAY_BIN") or os.path.join(ROOT, ".build/debug/prefect-push"),
                "fake-apns": os.environ.get("CHAOS_FAKE_APNS_BIN") or os.path.join(ROOT, ".build/debug/fake-apns")}
    for what, path in binaries.items():
        if not os.access(path, os.X_OK):
            parser.error(f"no {what} binary at {path}")

    commit = checkout_commit()
    work = tempfile.mkdtemp(prefix="prefect-push-chaos-")
    log(f"logs in {work}; relay {binaries['relay']}")
    prefect = Prefect(work)
    results: dict[str, dict] = {}
    try:
        await prefect.start()
        ctx = Context(binaries["relay"], binaries["fake-apns"], prefect, work, args.quick, random.Random(args.seed))
        for name in names:
            results[name] = await run_one(name, ctx)
    finally:
        await stop_all()
    print("\n".join(line(name, result) for name, result in results.items()))
    with open(args.out, "w") as f:
        json.dump({"relay": binaries["relay"], "commit": commit, "quick": args.quick, "seed": args.seed,
                   "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "scenarios": results}, f, indent=2)
    failed = [name for name, result in results.items() if not passed(name, result)]
    print(f"wrote {os.path.relpath(args.out, ROOT)}; logs in {work}")
    print(f"FAILED: {', '.join(failed)}" if failed else "all scenarios passed")
    return 1 if failed else 0


def run() -> int:
    """asyncio.run(main()), with SIGTERM treated like Ctrl-C: the main task is cancelled and its cleanup runs."""
    async def guarded() -> int:
        task = asyncio.current_task()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await main()

    try:
        return asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        log("interrupted: everything it started is stopped")
        return 130


if __name__ == "__main__":
    sys.exit(run())
