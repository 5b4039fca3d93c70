#!/usr/bin/env python3
"""`make apns-key` (deploy/apns-key.sh) against a fake kubectl: the key is checked before anything the relay uses changes.

The fake records every call (and what each `apply -f -` was given), renders `apply -k` with the real kubectl's
kustomize when there is one, and answers the check Job as told: passed, failed (with a `failed` line in its log) or
never finished. Each scenario then holds the script to its contract:
- passed: the candidate Secret is applied and checked by a Job that mounts and reads the candidate (and only it),
  with the running relay's image; only then is prefect-push-apns applied with the same key, the relay restarted and
  its rollout waited for; the candidate is deleted.
- failed, or unfinished: exit 1, the failed line printed, prefect-push-apns never applied, no restart, the candidate
  deleted.
- no relay and no image: the Secret is stored without a Job or a restart.
- a missing argument or an unreadable key: exit 2 and no kubectl call at all.
Under 5 s. Exits 1 listing what failed.
usage: check-apns-key.py [--script deploy/apns-key.sh]
"""
import argparse
import base64
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

FAKE = r'''#!PYTHON
"""A kubectl that records its calls in $FAKE_LOG and answers as $FAKE_CHECK says."""
import base64, json, os, subprocess, sys
args = sys.argv[1:]
while args and args[0] in ("--namespace", "--context"):
    args = args[2:]
entry = {"argv": args}
out, code = "", 0
if args[:3] == ["create", "secret", "generic"]:
    data = {}
    for a in args[3:]:
        if a.startswith("--from-file="):
            k, path = a[len("--from-file="):].split("=", 1)
            data[k] = base64.b64encode(open(path, "rb").read()).decode()
        elif a.startswith("--from-literal="):
            k, v = a[len("--from-literal="):].split("=", 1)
            data[k] = base64.b64encode(v.encode()).decode()
    out = json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": args[3]}, "data": data})
elif args[:2] == ["apply", "-f"]:
    entry["applied"] = json.loads(sys.stdin.read())
elif args[:2] == ["apply", "-k"]:
    real = os.environ.get("REAL_KUBECTL")
    if real:
        rendered = subprocess.run([real, "kustomize", args[2]], capture_output=True, text=True)
        if rendered.returncode != 0:
            sys.stderr.write(rendered.stderr); sys.exit(1)
        entry["rendered"] = rendered.stdout
elif args[:2] == ["get", "deployment/prefect-push"]:
    if os.environ.get("FAKE_DEPLOYMENT") != "yes":
        sys.stderr.write('Error from server (NotFound): deployments.apps "prefect-push" not found\n'); code = 1
    elif "-o" in args:
        out = os.environ["FAKE_IMAGE"]
elif args[:2] == ["get", "job"]:
    out = {"pass": "1/", "fail": "/1"}.get(os.environ["FAKE_CHECK"], "/")
elif args[:1] == ["logs"]:
    out = "ok      prefect: answered\n"
    if os.environ["FAKE_CHECK"] == "fail":
        out += "failed  apns development: refused the provider token (403 InvalidProviderToken); fix: the key id\n"
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(entry) + "\n")
sys.stdout.write(out)
sys.exit(code)
'''

IMAGE = "registry.example.com/prefect/prefect-push@sha256:" + "ab" * 32
CANDIDATE = "prefect-push-apns-candidate"


class Run:
    count = 0

    def __init__(self, work, script, check, deployment=True, image_ref="", args=None):
        Run.count += 1
        self.log = work / f"calls-{Run.count}.jsonl"
        key = work / "AuthKey_NEWKEY1234.p8"
        env = dict(os.environ, KUBECTL=f"{work / 'kubectl'} --namespace prefect", FAKE_LOG=str(self.log),
                   FAKE_CHECK=check, FAKE_DEPLOYMENT="yes" if deployment else "no", FAKE_IMAGE=IMAGE,
                   IMAGE_REF=image_ref, CHECK_JOB_SECONDS="1", CHECK_JOB_POLL="0.1",
                   OVERLAY=".build/k8s-apns-key-test")
        real = shutil.which("kubectl")
        if real:
            env["REAL_KUBECTL"] = real
        argv = args if args is not None else [str(key), "NEWKEY1234", "TEAM123456"]
        done = subprocess.run(["bash", script, *argv], env=env, capture_output=True, text=True, timeout=30)
        self.code, self.output = done.returncode, done.stdout + done.stderr
        self.calls = [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []
        self.key = key.read_bytes()

    def index(self, *prefix):
        return next((i for i, c in enumerate(self.calls) if c["argv"][:len(prefix)] == list(prefix)), None)

    def applied(self, name):
        return [i for i, c in enumerate(self.calls) if c.get("applied", {}).get("metadata", {}).get("name") == name]


class Checker:
    def __init__(self):
        self.problems = []

    def expect(self, condition, scenario, problem, run=None):
        if not condition:
            detail = f"\n    output: {run.output.strip()[-600:]}\n    calls: {[c['argv'][:3] for c in run.calls]}" if run else ""
            self.problems.append(f"{scenario}: {problem}{detail}")

    def secret_holds_key(self, run, name, scenario):
        for i in run.applied(name):
            data = run.calls[i]["applied"]["data"]
            self.expect(base64.b64decode(data.get("AuthKey.p8", "")) == run.key
                        and base64.b64decode(data.get("APNS_KEY_ID", "")) == b"NEWKEY1234"
                        and set(data) == {"AuthKey.p8", "APNS_KEY_ID", "APNS_TEAM_ID"},
                        scenario, f"{name} was applied without the key file as AuthKey.p8 and its ids: {sorted(data)}", run)

    def job_reads_candidate(self, run, scenario, image):
        i = run.index("apply", "-k")
        rendered = run.calls[i].get("rendered") if i is not None else None
        if rendered is None:
            return  # no kubectl here to render with
        docs = [d for d in yaml.safe_load_all(rendered) if d]
        jobs = [d for d in docs if d["kind"] == "Job"]
        self.expect(sorted(d["kind"] for d in docs) == ["ConfigMap", "Job", "PersistentVolumeClaim"], scenario,
                    f"the check overlay renders {sorted(d['kind'] for d in docs)}, not only the check's objects", run)
        if len(jobs) != 1:
            return
        pod = jobs[0]["spec"]["template"]["spec"]
        check = pod["containers"][0]
        refs = [v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v]
        refs += [e["valueFrom"]["secretKeyRef"]["name"] for e in check.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})]
        apns = [r for r in refs if r.startswith("prefect-push-apns")]
        self.expect(len(apns) == 3 and set(apns) == {CANDIDATE}, scenario,
                    f"the check Job reads APNs Secrets {apns}, not only {CANDIDATE}", run)
        self.expect(check["image"] == image, scenario, f"the check Job runs {check['image']}, not {image}", run)
        self.expect(jobs[0]["metadata"].get("namespace") == "prefect", scenario, "the check Job is not in namespace prefect", run)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default="deploy/apns-key.sh")
    args = parser.parse_args()
    checker = Checker()
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        fake = work / "kubectl"
        fake.write_text(FAKE.replace("PYTHON", sys.executable, 1))
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        (work / "AuthKey_NEWKEY1234.p8").write_text("-----BEGIN PRIVATE KEY-----\nbmV3IGtleQ==\n-----END PRIVATE KEY-----\n")

        s = "check passes"
        run = Run(work, args.script, "pass")
        checker.expect(run.code == 0, s, f"exit {run.code}, not 0", run)
        candidate, job, installed = run.applied(CANDIDATE), run.index("apply", "-k"), run.applied("prefect-push-apns")
        restart, status = run.index("rollout", "restart"), run.index("rollout", "status")
        checker.expect(candidate and job is not None and candidate[0] < job, s, "the candidate was not applied before the Job", run)
        checker.expect(installed and job is not None and installed[0] > job, s, "prefect-push-apns was not applied after the Job passed", run)
        checker.expect(restart is not None and installed and restart > installed[0] and status is not None and status > restart,
                       s, "the relay was not restarted (and its rollout waited for) after the Secret was replaced", run)
        checker.expect(run.calls and run.calls[-1]["argv"][:3] == ["delete", "secret", CANDIDATE], s, "the candidate was left behind", run)
        checker.secret_holds_key(run, CANDIDATE, s)
        checker.secret_holds_key(run, "prefect-push-apns", s)
        checker.job_reads_candidate(run, s, IMAGE)

        for check in ("fail", "hang"):
            s = "check fails" if check == "fail" else "check never finishes"
            run = Run(work, args.script, check)
            checker.expect(run.code == 1, s, f"exit {run.code}, not 1", run)
            checker.expect(not run.applied("prefect-push-apns"), s, "prefect-push-apns was applied anyway", run)
            checker.expect(run.index("rollout") is None, s, "the relay was restarted anyway", run)
            checker.expect(run.applied(CANDIDATE) and run.index("apply", "-k") is not None, s, "the candidate was not checked", run)
            checker.expect(run.calls and run.calls[-1]["argv"][:3] == ["delete", "secret", CANDIDATE], s,
                           "the candidate was not deleted", run)
            if check == "fail":
                checker.expect("failed  apns development: refused the provider token" in run.output.split("failed lines:")[-1],
                               s, "the Job's failed line is not printed after the verdict", run)

        s = "no relay, no image"
        run = Run(work, args.script, "pass", deployment=False)
        checker.expect(run.code == 0 and run.applied("prefect-push-apns") and run.index("apply", "-k") is None
                       and run.index("rollout") is None and not run.applied(CANDIDATE), s,
                       "the Secret was not stored alone (no Job, no restart, no candidate)", run)

        s = "no relay, an image pushed"
        run = Run(work, args.script, "pass", deployment=False, image_ref="registry.example.com/prefect/prefect-push@sha256:" + "cd" * 32)
        checker.expect(run.code == 0 and run.applied("prefect-push-apns") and run.index("rollout") is None, s,
                       "the key was not checked and stored without a restart", run)
        checker.job_reads_candidate(run, s, "registry.example.com/prefect/prefect-push@sha256:" + "cd" * 32)

        for argv, what in (([str(work / "AuthKey_NEWKEY1234.p8"), "NEWKEY1234"], "no TEAM_ID"),
                           ([str(work / "missing.p8"), "NEWKEY1234", "TEAM123456"], "an unreadable key")):
            run = Run(work, args.script, "pass", args=argv)
            checker.expect(run.code == 2 and not run.calls, what, f"exit {run.code} after {len(run.calls)} kubectl calls, "
                                                                  f"not 2 before any", run)
    if checker.problems:
        print("\n".join(f"{args.script}: {p}" for p in checker.problems))
        sys.exit(1)
    print(f"{args.script}: checks the key before it installs it (passed, failed, unfinished, no relay, bad arguments)")


if __name__ == "__main__":
    main()
