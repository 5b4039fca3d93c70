#!/usr/bin/env python3
"""`make image-test`: the image `make image` built, run under podman the way deploy/k8s runs it, against a real Prefect
server and the fake APNs on this host.

  usage: tools/image-test.py [--layout .build/oci] [--tag TAG] [--fake-apns BINARY] [--plant DEFECT]

It builds nothing: it copies the OCI layout into podman's storage under a name of its own (skopeo), then
  1. starts a container with the manifests' hardening: user 65532, a read-only root, every capability dropped,
     no-new-privileges, and a named volume at /data; host networking, with the API bound to 127.0.0.1 (API_BIND), so
     it reaches Prefect and the fake APNs on 127.0.0.1 and nothing else listens; the test CA and APNs key are mounted
     read-only from Tests/RelayTests/Fixtures/apns;
  2. `prefect-push check` inside it passes (TLS to the fake verified with the mounted CA, a token signed), and
     `prefect-push --version --verbose` lists the same libraries, versions and linkage as the SBOM in the image
     (/usr/share/doc/prefect-push/sbom.cdx.json, copied out of the container);
  3. a device with a push-to-start token registers through the API; a flow pauses; the pause reaches the fake APNs
     as an alert and as a Live Activity start;
  4. `podman stop` returns within STOP_BOUND_S and the container exited 0 (not 143 or 137);
  5. a second container on the same volume answers /health with the device, announces nothing again (the pushes
     at the fake stay one alert and one start while it subscribes, lists the pause and SETTLE_S more), sends a test
     push to the stored token, and stops as cleanly.
Every process it started is judged by how it ended (tools/harness.py); containers, the volume, the image name, the
flow run and the servers are removed or stopped whatever happened. 127.0.0.1 only; every wait is bounded. Exits 1
with each problem named.

Podman flags a host may need, from the environment (defaults in parentheses):
  IMAGE_TEST_RUNTIME   --runtime for podman (runc when installed: crun on a host with cgroups v1 and v2 mounted side
                       by side fails with "cgroups in hybrid mode not supported"; empty: podman's default)
  IMAGE_TEST_ULIMITS   --ulimit values, space-separated ("nofile=4096:4096 nproc=4096:4096" when this process's hard
                       limits are below podman's defaults of 1048576 and 4194304, which it can't then raise to; empty:
                       none)
  IMAGE_TEST_PODMAN    the podman command (podman)

--plant runs it with a defect it must fail on (docs/testing.md): `no-volume` (the second container gets a fresh
volume: the device is lost), `forget-pauses` (the store's pauses are deleted between the containers: the pause is
announced again), `apns-host` (the relay's APNs hosts point at a closed port: no push arrives).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "chaos"))
from stack import (AUTH, FIX, KEY_ID, ROOT, TEAM_ID, Endings, FakeAPNs, Pauser, Prefect, call, free_port, log,  # noqa: E402
                   stop_all)

SBOM_PATH = "/usr/share/doc/prefect-push/sbom.cdx.json"
STOP_BOUND_S = 1.0
SETTLE_S = 3.0
TOKEN, START_TOKEN = "c0" * 32, "d0" * 32
PODMAN = os.environ.get("IMAGE_TEST_PODMAN", "podman").split()


# MARK: - podman

def runtime_flags() -> list[str]:
    """--runtime and --ulimit, from IMAGE_TEST_RUNTIME / IMAGE_TEST_ULIMITS or as detected (see the docstring)."""
    runtime = os.environ.get("IMAGE_TEST_RUNTIME", "runc" if shutil.which("runc") else "")
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    low = any(limit != resource.RLIM_INFINITY and limit < floor for limit, floor in ((nofile, 1048576), (nproc, 4194304)))
    ulimits = os.environ.get("IMAGE_TEST_ULIMITS", "nofile=4096:4096 nproc=4096:4096" if low else "")
    return (["--runtime", runtime] if runtime else []) + [flag for value in ulimits.split() for flag in ("--ulimit", value)]


async def podman(*args: str, timeout: float = 30) -> tuple[int, str, str]:
    """One podman command: (exit code, stdout, stderr). Killed, and reported as exit -9, past `timeout`."""
    process = await asyncio.create_subprocess_exec(*PODMAN, *args, stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return -9, "", f"podman {' '.join(args[:2])} did not return in {timeout} s"
    return process.returncode, out.decode(), err.decode()


async def must(*args: str, timeout: float = 30) -> str:
    code, out, err = await podman(*args, timeout=timeout)
    if code != 0:
        raise RuntimeError(f"podman {' '.join(args)}: exit {code}: {err.strip()[-500:]}")
    return out.strip()


class Containers:
    """The image, volumes and containers this run made, removed by `clean` whatever happened."""

    def __init__(self, work: str, run_id: str):
        self.work = work
        self.image = f"localhost/prefect-push-image-test:{run_id}"
        self.prefix = f"prefect-push-image-test-{run_id}"
        self.names: list[str] = []
        self.volumes: list[str] = []
        self.pulled = False

    async def load(self, layout: str, tag: str) -> None:
        # skopeo, not `podman pull oci:`: podman names the image after the layout's path, which a ".build" can't be.
        self.pulled = True
        copy = await asyncio.create_subprocess_exec("skopeo", "copy", "--quiet", f"oci:{layout}:{tag}",
                                                    f"containers-storage:{self.image}", stdin=subprocess.DEVNULL,
                                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(copy.communicate(), 120)
        except asyncio.TimeoutError:
            copy.kill()
            await copy.wait()
            raise RuntimeError(f"skopeo copy of {layout}:{tag} did not end in 120 s")
        if copy.returncode != 0:
            raise RuntimeError(f"skopeo copy oci:{layout}:{tag}: exit {copy.returncode}: {out.decode()[-500:]}")

    async def volume(self) -> str:
        name = f"{self.prefix}-data-{len(self.volumes) + 1}"
        await must("volume", "create", name)
        self.volumes.append(name)
        return name

    async def run(self, volume: str, env: dict[str, str]) -> str:
        """A detached container with the manifests' hardening; its name."""
        name = f"{self.prefix}-{len(self.names) + 1}"
        self.names.append(name)
        argv = ["run", "--detach", "--name", name, *runtime_flags(), "--user", "65532:65532", "--read-only",
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--network", "host",
                "--volume", f"{volume}:/data", "--volume", f"{FIX}:/fixtures:ro"]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        await must(*argv, self.image, timeout=60)
        return name

    async def state(self, name: str) -> dict:
        return json.loads(await must("inspect", "--type", "container", "--format", "{{json .State}}", name))

    async def save_log(self, name: str) -> str:
        path = os.path.join(self.work, f"{name}.log")
        code, out, err = await podman("logs", name, timeout=20)
        with open(path, "w") as f:
            f.write(out + err)
        return path

    async def clean(self) -> list[str]:
        """Removes every container, volume and the image name; what could not be removed, as problems."""
        problems = []
        for name in self.names:
            await self.save_log(name)
            code, _, err = await podman("rm", "--force", "--time", "2", name, timeout=30)
            if code != 0 and "no such container" not in err:
                problems.append(f"podman rm {name}: exit {code}: {err.strip()}")
        for name in self.volumes:
            code, _, err = await podman("volume", "rm", "--force", name, timeout=30)
            if code != 0:
                problems.append(f"podman volume rm {name}: exit {code}: {err.strip()}")
        if self.pulled:
            # The name only: the image itself goes too unless another name (a user's own load) still holds it.
            code, _, err = await podman("rmi", self.image, timeout=30)
            if code != 0 and "image not known" not in err:  # a copy that failed left nothing to remove
                problems.append(f"podman rmi {self.image}: exit {code}: {err.strip()}")
        return problems


# MARK: - the relay in a container

async def health(port: int) -> dict | None:
    try:
        status, body = await call(port, "GET", "/health", timeout=2)
        return json.loads(body) if status in (200, 503) else None
    except (OSError, ValueError):
        return None


async def wait_until(what: str, timeout: float, probe, containers: Containers | None = None, name: str = ""):
    """Polls `probe` (async, a value or None) until it gives a value; fails after `timeout`, or at once when the
    container `name` is no longer running."""
    deadline = time.monotonic() + timeout
    checked = 0.0
    while time.monotonic() < deadline:
        value = await probe()
        if value:
            return value
        if containers and time.monotonic() - checked > 1:
            checked = time.monotonic()
            state = await containers.state(name)
            if not state.get("Running"):
                raise RuntimeError(f"{name} exited ({state.get('ExitCode')}) while waiting for {what}; see "
                                   f"{await containers.save_log(name)}")
        await asyncio.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


async def subscribed(containers: Containers, name: str, port: int) -> dict:
    async def probe():
        found = await health(port)
        return found if found and found.get("subscribed") else None
    return await wait_until(f"{name} to subscribe", 30, probe, containers, name)


async def stop_container(containers: Containers, name: str, problems: list[str]) -> float:
    """`podman stop` (SIGTERM, SIGKILL after 10 s): its wall time; the container must have exited 0 within the
    bound."""
    started = time.monotonic()
    code, _, err = await podman("stop", "--time", "10", name, timeout=30)
    took = time.monotonic() - started
    state = await containers.state(name)
    log(f"image-test: podman stop {name}: {took:.2f} s, container exit {state.get('ExitCode')}")
    if code != 0:
        problems.append(f"podman stop {name}: exit {code}: {err.strip()}")
    if state.get("Running") or state.get("ExitCode") != 0:
        problems.append(f"{name} ended with exit {state.get('ExitCode')} (143: SIGTERM not handled, 137: killed), "
                        f"not 0; see {await containers.save_log(name)}")
    if took > STOP_BOUND_S:
        problems.append(f"podman stop {name} took {took:.2f} s, over {STOP_BOUND_S} s")
    return took


async def resident_mib(containers: Containers, name: str) -> float | None:
    """The relay's VmRSS in MiB, read from the host's /proc (for the log: docs/benchmarks.md "Footprint" quotes it)."""
    pid = (await containers.state(name)).get("Pid")
    try:
        with open(f"/proc/{pid}/status") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None
    return round(kib / 1024, 1)


def library_lines(sbom: dict) -> list[str]:
    """The SBOM's libraries as `--version --verbose` prints them: `name version (linkage)`."""
    lines = []
    for component in sbom.get("components", []):
        if component.get("type") != "library":
            continue
        linkage = {p["name"]: p["value"] for p in component.get("properties", [])}.get("prefect-push:linkage", "?")
        lines.append(f"{component['name']} {component['version']} ({linkage})")
    return lines


async def check_inside(containers: Containers, name: str, problems: list[str]) -> None:
    """`check` passes inside the container; `--version --verbose` lists what the image's SBOM lists."""
    code, out, err = await podman("exec", name, "/usr/local/bin/prefect-push", "check", timeout=40)
    if code != 0 or "certificate verified" not in out:
        problems.append(f"prefect-push check in {name}: exit {code}:\n{out}{err}")
    else:
        log(f"image-test: check inside {name} passed ({sum(line.startswith('ok') for line in out.splitlines())} ok)")
    verbose = (await must("exec", name, "/usr/local/bin/prefect-push", "--version", "--verbose")).splitlines()
    copy = os.path.join(containers.work, "sbom.cdx.json")
    await must("cp", f"{name}:{SBOM_PATH}", copy)
    with open(copy) as f:
        sbom = json.load(f)
    expected = library_lines(sbom)
    application = sbom.get("metadata", {}).get("component", {})
    if not expected or sorted(verbose[1:]) != sorted(expected):
        problems.append(f"--version --verbose lists {verbose[1:]}, the image's SBOM {expected}")
    elif not verbose[0].startswith(f"prefect-push {application.get('version')} "):
        problems.append(f"--version says {verbose[0]!r}, the SBOM's application is {application.get('version')}")
    else:
        log(f"image-test: --version --verbose matches the SBOM ({len(expected)} libraries)")


# MARK: - the run

def relay_env(prefect: Prefect, fake: FakeAPNs, port: int, plant: str | None) -> dict[str, str]:
    apns = f"https://127.0.0.1:{free_port() if plant == 'apns-host' else fake.port}"
    return {"PREFECT_API_URL": prefect.api, "PREFECT_API_AUTH_STRING": AUTH, "PORT": str(port), "API_BIND": "127.0.0.1",
            "APNS_KEY_PATH": "/fixtures/AuthKey_TESTKEY123.p8", "APNS_KEY_ID": KEY_ID, "APNS_TEAM_ID": TEAM_ID,
            "APNS_CA_FILE": "/fixtures/ca.pem", "APNS_PRODUCTION_URL": apns, "APNS_DEVELOPMENT_URL": apns}


def pushes(fake: FakeAPNs) -> list[tuple[str, str, int, str]]:
    """Every request the fake answered: (push type, token, status, collapse id or run)."""
    return [(push_type, token, status, message) for _, push_type, token, status, message in fake.arrivals.requests]


async def announced(fake: FakeAPNs, state_id: str, run_id: str):
    async def probe():
        seen = pushes(fake)
        alert = ("alert", TOKEN, 200, state_id) in seen
        # A start carries the pause's collapse id, or none (then the arrival names the run).
        start = any(("liveactivity", START_TOKEN, 200, message) in seen for message in (state_id, f"run {run_id}"))
        return seen if alert and start else None
    return probe


def forget_pauses(volume_path: str) -> None:
    """The planted `forget-pauses` defect: the store loses the pauses it announced, and nothing else."""
    database = os.path.join(volume_path, "prefect-push.db")
    with sqlite3.connect(database) as connection:
        connection.execute("DELETE FROM pauses")
    owner = os.stat(database)
    for name in os.listdir(volume_path):
        os.chown(os.path.join(volume_path, name), owner.st_uid, owner.st_gid)


async def scenario(args, work: str, containers: Containers, prefect: Prefect, fake: FakeAPNs, pauser: Pauser,
                   problems: list[str], timings: dict) -> None:
    """Steps 1-5 of the docstring; raises on what makes the rest meaningless, appends what doesn't."""
    ready = [asyncio.create_task(step) for step in (prefect.start(), fake.start(),
                                                    containers.load(args.layout, args.tag))]
    try:
        await asyncio.gather(*ready)
    finally:
        for task in ready:
            task.cancel()
    timings["prefect_and_image_ready_s"] = round(time.monotonic() - timings["t0"], 1)
    flow = asyncio.create_task(pauser.start(1))  # the flow's Python start-up, beside the container's
    port = free_port()
    env = relay_env(prefect, fake, port, args.plant)
    volume = await containers.volume()
    first = await containers.run(volume, env)
    await subscribed(containers, first, port)
    timings["idle_rss_mib"] = await resident_mib(containers, first)
    await check_inside(containers, first, problems)
    status, body = await call(port, "POST", "/devices", {"id": "phone", "token": TOKEN, "start_token": START_TOKEN,
                                                          "environment": "production", "server_id": "image-test"})
    if status != 200:
        raise RuntimeError(f"POST /devices answered {status}: {body[:200]!r}")
    await flow
    pause = await pauser.pause()
    started = time.monotonic()
    try:
        seen = await wait_until("the alert and the Live Activity start at the fake APNs", 30,
                                await announced(fake, pause.state_id, pause.run_id), containers, first)
    except RuntimeError as error:
        raise RuntimeError(f"{error}; the fake APNs answered {pushes(fake) or 'nothing'} (pause {pause})") from None
    timings["pause_to_pushes_s"] = round(time.monotonic() - started, 2)
    log(f"image-test: the pause reached the fake APNs as an alert and a Live Activity start in "
        f"{timings['pause_to_pushes_s']} s")
    timings["stop_first_s"] = round(await stop_container(containers, first, problems), 2)

    if args.plant == "no-volume":
        volume = await containers.volume()
    elif args.plant == "forget-pauses":
        forget_pauses(await must("volume", "inspect", "--format", "{{.Mountpoint}}", volume))
    second = await containers.run(volume, env)
    # What the first relay sent, then the second one's start: subscribed, the pause listed (waiting), and a while.
    await subscribed(containers, second, port)

    async def listed():
        found = await health(port)
        return found if found and found.get("waiting", 0) >= 1 else None
    state = await wait_until(f"{second} to list the waiting pause", 15, listed, containers, second)
    await asyncio.sleep(SETTLE_S)
    again = pushes(fake)[len(seen):]
    if again:
        problems.append(f"{second} sent again what {first} had sent: {again}")
    if state.get("devices") != 1:
        problems.append(f"{second} on the same volume has {state.get('devices')} devices in /health, not 1")
    status, body = await call(port, "POST", "/devices/phone/test")
    answer = json.loads(body) if status == 200 else {}

    # The relay answers once the fake has; the fake's arrival line may reach us a moment later.
    async def tested():
        return any(push[1] == TOKEN for push in pushes(fake)[len(seen):]) or None
    reached = False
    if answer.get("sent"):
        try:
            reached = bool(await wait_until("the test push's arrival at the fake APNs", 5, tested))
        except RuntimeError:
            reached = False
    if not reached:
        problems.append(f"{second}: a test push to the stored device: {status} {body[:200]!r}")
    else:
        log(f"image-test: {second} kept the device (a test push reached its token) and sent nothing again")
    timings["stop_second_s"] = round(await stop_container(containers, second, problems), 2)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", default=os.path.join(ROOT, ".build", "oci"))
    parser.add_argument("--tag", required=True)
    parser.add_argument("--fake-apns", default=os.path.join(ROOT, ".build", "release", "fake-apns"))
    parser.add_argument("--plant", choices=("no-volume", "forget-pauses", "apns-host"))
    args = parser.parse_args()
    for path, hint in ((os.path.join(args.layout, "index.json"), "make image"), (args.fake_apns, "swift build")):
        if not os.path.exists(path):
            sys.exit(f"image-test: no {path} ({hint} first)")
    if not shutil.which(PODMAN[0]):
        sys.exit(f"image-test: no {PODMAN[0]} (apt-get install podman runc)")
    timings = {"t0": time.monotonic()}
    work = tempfile.mkdtemp(prefix="prefect-push-image-test-")
    endings = Endings()
    containers = Containers(work, f"{os.getpid()}")
    prefect, fake = Prefect(work), FakeAPNs(args.fake_apns, work, endings)
    pauser = Pauser(prefect, work, "flow")
    problems: list[str] = []
    try:
        await scenario(args, work, containers, prefect, fake, pauser, problems, timings)
    except (RuntimeError, asyncio.TimeoutError, OSError) as error:
        problems.append(f"{type(error).__name__}: {error}")
    finally:
        if getattr(pauser, "process", None):
            await pauser.finish()
            endings.judge("flow", pauser.process)
        problems += await containers.clean()
        await fake.stop()
        if getattr(prefect, "process", None):
            await stop_all()  # what is left: the Prefect server, stopped as a process group
            endings.judge("prefect server", prefect.process)
    problems += endings.problems
    timings["total_s"] = round(time.monotonic() - timings.pop("t0"), 1)
    log(f"image-test: {json.dumps(timings)}; ended: {', '.join(endings.seen)}")
    if problems:
        print("image-test FAILED" + (f" (planted: {args.plant})" if args.plant else "") + f"; logs in {work}:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print(f"image-test passed in {timings['total_s']} s: alert and Live Activity start through the image, stop "
          f"{timings['stop_first_s']} s and {timings['stop_second_s']} s (exit 0), the device kept on the volume, "
          "nothing sent twice")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
