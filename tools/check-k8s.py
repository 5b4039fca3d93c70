#!/usr/bin/env python3
"""What the Kubernetes schemas can't see in deploy/k8s: the manifests agreeing with each other.

- Paths: BASE_PATH in prefect-push.env is where the relay serves, so the Deployment's probes must ask
  <BASE_PATH>/health/live (startup, liveness) and <BASE_PATH>/health (readiness), the example Ingress must route
  <BASE_PATH>, and the Makefile's BASE_PATH_K8S (what `make health` fetches), when it is a literal, must equal it.
- Ports: PORT and METRICS_PORT in the Deployment's env are its `http` and `metrics` container ports, and the example
  NetworkPolicy admits each of those ports from somewhere and selects the relay's and the check's pods.
- Rollout timing: minReadySeconds outlasts HEALTH_STARTUP_SECONDS (prefect-push.env, default 60) plus the readiness
  probe's failures by 10 s, so a relay that never subscribes fails its rollout; progressDeadlineSeconds leaves room
  for the old pod's stop, the start-up probe and minReadySeconds, plus a minute.
- Secrets: no two Secrets in secrets.example.yaml share a name, and every Secret the Deployment reads is one of them.
- The APNs key is a file: APNS_KEY_PATH names a file of the prefect-push-apns Secret's volume (a key the example
  Secret has, mounted read-only, mode 0400 with the pod's fsGroup: kubelet adds group read), the key's ids come from
  that Secret by secretKeyRef (required, not optional), and nothing puts the key itself in the environment.
- The pre-rollout check Job (check/check-job.yaml) runs `check` with the Deployment's image, envFrom, env, data
  mount and APNs key volume and mount, and its pods don't carry the label the Service selects.
- With --rendered MAIN CHECK (kubectl kustomize of deploy/k8s, and of an overlay adding the check/ Component): the
  check's rendering holds only a ConfigMap, the volume claim and the Job, and its ConfigMap is the Deployment's
  (the same hashed name), which the Job reads. With --candidate CANDIDATE too (the check with check/candidate, as
  `make apns-key` renders it): the same objects, its Job the check's but for the APNs Secret's name, every reference
  to which (the key volume, both ids) is prefect-push-apns-candidate.

Exits 1 listing every disagreement, 2 when it can't read the manifests (so a broken copy that only breaks this
script doesn't pass for a caught disagreement).
usage: check-k8s.py [--dir deploy/k8s] [--makefile Makefile] [--rendered MAIN CHECK [--candidate CANDIDATE]]
"""
import argparse
import re
import sys
from pathlib import Path

import yaml

STARTUP_DEFAULT = 60
MARGIN = 10
APNS_SECRET = "prefect-push-apns"
CANDIDATE_SECRET = "prefect-push-apns-candidate"


def env_file(path):
    """KEY=VALUE lines as kustomize's configMapGenerator reads them (comments and blank lines skipped)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value
    return values


def documents(path):
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def one(path, kind):
    found = [doc for doc in documents(path) if doc.get("kind") == kind]
    if len(found) != 1:
        raise ValueError(f"{path}: expected one {kind}, found {len(found)}")
    return found[0]


def container(pod_spec, name=None):
    containers = pod_spec["containers"]
    return next((c for c in containers if c["name"] == name), containers[0]) if name else containers[0]


class Checker:
    def __init__(self):
        self.problems = []

    def expect(self, condition, problem):
        if not condition:
            self.problems.append(problem)

    # MARK: - paths

    def paths(self, base, deployment, ingress, makefile):
        relay = container(deployment["spec"]["template"]["spec"], "prefect-push")
        wanted = {"startupProbe": base + "/health/live", "livenessProbe": base + "/health/live",
                  "readinessProbe": base + "/health"}
        for probe, path in wanted.items():
            got = relay.get(probe, {}).get("httpGet", {}).get("path")
            self.expect(got == path, f"deployment.yaml: {probe} asks {got!r}, but BASE_PATH={base or '(empty)'} "
                                     f"in prefect-push.env serves it at {path!r}")
        for rule in ingress["spec"].get("rules", []):
            for entry in rule.get("http", {}).get("paths", []):
                path = entry.get("path", "")
                self.expect(path == (base or "/"),
                            f"ingress.example.yaml: routes {path!r}, but the relay serves under BASE_PATH="
                            f"{base or '(empty)'} (prefect-push.env)")
        if makefile:
            match = re.search(r"^BASE_PATH_K8S\s*[:?]?=\s*(\S*)\s*$", makefile.read_text(), re.M)
            if match and "$" not in match.group(1):
                self.expect(match.group(1).rstrip("/") == base,
                            f"{makefile}: BASE_PATH_K8S is {match.group(1)!r} (what `make health` fetches), "
                            f"prefect-push.env says BASE_PATH={base or '(empty)'}")

    # MARK: - ports

    def ports(self, deployment, policy):
        relay = container(deployment["spec"]["template"]["spec"], "prefect-push")
        declared = {p["name"]: p["containerPort"] for p in relay.get("ports", [])}
        env = {e["name"]: e.get("value") for e in relay.get("env", [])}
        for variable, name in (("PORT", "http"), ("METRICS_PORT", "metrics")):
            self.expect(name in declared and env.get(variable) == str(declared[name]),
                        f"deployment.yaml: {variable}={env.get(variable)} but container port {name!r} is "
                        f"{declared.get(name)}")
        admitted = set()
        for rule in policy["spec"].get("ingress", []):
            self.expect(rule.get("from"), "networkpolicy.example.yaml: an ingress rule without `from` admits anyone")
            for port in rule.get("ports", []):
                admitted.add(port.get("port"))
        for name, number in declared.items():
            self.expect(number in admitted or name in admitted,
                        f"networkpolicy.example.yaml: container port {name} ({number}) is admitted from nowhere")
        selector = policy["spec"]["podSelector"]
        for name in ("prefect-push", "prefect-push-check"):
            self.expect(selects(selector, {"app.kubernetes.io/name": name}),
                        f"networkpolicy.example.yaml: its podSelector misses pods named {name}")

    # MARK: - rollout timing

    def timing(self, env, deployment):
        spec = deployment["spec"]
        relay = container(spec["template"]["spec"], "prefect-push")
        startup = int(env.get("HEALTH_STARTUP_SECONDS", STARTUP_DEFAULT))
        readiness = relay["readinessProbe"]
        unready = startup + readiness.get("periodSeconds", 10) * readiness.get("failureThreshold", 3)
        min_ready = spec.get("minReadySeconds", 0)
        self.expect(min_ready >= unready + MARGIN,
                    f"deployment.yaml: minReadySeconds {min_ready} is under HEALTH_STARTUP_SECONDS {startup} + the "
                    f"readiness probe's failures ({unready - startup} s) + {MARGIN}: a relay that never subscribes "
                    f"would count as available and pass its rollout")
        start = relay["startupProbe"]
        budget = (spec["template"]["spec"].get("terminationGracePeriodSeconds", 30)
                  + start.get("periodSeconds", 10) * start.get("failureThreshold", 3) + min_ready + 60)
        deadline = spec.get("progressDeadlineSeconds", 600)
        self.expect(deadline >= budget,
                    f"deployment.yaml: progressDeadlineSeconds {deadline} leaves under a minute beside the old pod's "
                    f"stop, the start-up probe and minReadySeconds ({budget - 60} s)")

    # MARK: - Secrets and the check Job

    def secrets(self, deployment, job, secrets):
        names = [doc["metadata"]["name"] for doc in secrets if doc.get("kind") == "Secret"]
        for name in sorted({n for n in names if names.count(n) > 1}):
            self.problems.append(f"secrets.example.yaml: two Secrets are named {name}; applying both keeps the last")
        for manifest, what in ((deployment, "deployment.yaml"), (job, "check/check-job.yaml")):
            for entry in container(manifest["spec"]["template"]["spec"]).get("envFrom", []):
                if "secretRef" in entry:
                    name = entry["secretRef"]["name"]
                    self.expect(name in names, f"{what}: reads Secret {name}, which secrets.example.yaml doesn't have")

    def apns_key(self, deployment, secrets):
        pod = deployment["spec"]["template"]["spec"]
        relay = container(pod, "prefect-push")
        example = next((d for d in secrets if d.get("kind") == "Secret" and d["metadata"]["name"] == APNS_SECRET), {})
        keys = set(example.get("stringData", {})) | set(example.get("data", {}))
        self.expect("APNS_KEY" not in keys, f"secrets.example.yaml: {APNS_SECRET} holds APNS_KEY, the key as an "
                                            f"environment variable; it holds the .p8 as a file key")
        env = {e["name"]: e for e in relay.get("env", [])}
        self.expect("APNS_KEY" not in env, "deployment.yaml: sets APNS_KEY, the key in the environment")
        for entry in relay.get("envFrom", []):
            self.expect(entry.get("secretRef", {}).get("name") != APNS_SECRET,
                        f"deployment.yaml: envFrom reads {APNS_SECRET}, which puts the key file's text in the "
                        f"environment; mount it and read its ids by secretKeyRef")
        for name in ("APNS_KEY_ID", "APNS_TEAM_ID"):
            ref = env.get(name, {}).get("valueFrom", {}).get("secretKeyRef", {})
            self.expect(ref.get("name") == APNS_SECRET and ref.get("key") in keys and not ref.get("optional"),
                        f"deployment.yaml: {name} is not read (required) from a key of {APNS_SECRET} that "
                        f"secrets.example.yaml has")
        path = env.get("APNS_KEY_PATH", {}).get("value", "")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        found = None
        for mount in relay.get("volumeMounts", []):
            secret = volumes.get(mount["name"], {}).get("secret")
            if secret and secret.get("secretName") == APNS_SECRET:
                for item in secret.get("items", []):
                    if mount["mountPath"].rstrip("/") + "/" + item["path"] == path:
                        found = (mount, secret, item)
        self.expect(found is not None, f"deployment.yaml: APNS_KEY_PATH={path or '(unset)'} is no file of a "
                                       f"{APNS_SECRET} volume the relay mounts")
        if found:
            mount, secret, item = found
            self.expect(item["key"] in keys, f"deployment.yaml: mounts key {item['key']} of {APNS_SECRET}, which "
                                             f"secrets.example.yaml doesn't have")
            self.expect(mount.get("readOnly") is True, "deployment.yaml: the APNs key's mount is not readOnly")
            self.expect(not secret.get("optional"), f"deployment.yaml: the {APNS_SECRET} volume is optional: a "
                                                    f"missing Secret would start a relay that sends nothing")
            mode = item.get("mode", secret.get("defaultMode", 0o644))
            self.expect(mode == 0o400, f"deployment.yaml: the APNs key file's mode is {mode:#o}, not 0400 (the pod's "
                                       f"fsGroup adds group read)")
            self.expect(pod.get("securityContext", {}).get("fsGroup") is not None,
                        "deployment.yaml: no fsGroup, so the 0400 key file is readable only by root, not the relay")

    def check_job(self, deployment, job):
        pod = deployment["spec"]["template"]["spec"]
        relay = container(pod, "prefect-push")
        job_pod = job["spec"]["template"]["spec"]
        check = container(job_pod)
        self.expect(check.get("args") == ["check"], f"check/check-job.yaml: runs {check.get('args')}, not [check]")
        for what, c in (("deployment.yaml", relay), ("check/check-job.yaml", check)):
            self.expect(c.get("terminationMessagePolicy") == "FallbackToLogsOnError",
                        f"{what}: terminationMessagePolicy is not FallbackToLogsOnError, so `kubectl describe` "
                        f"won't show why the container exited")
        for field in ("image", "envFrom", "env"):
            self.expect(check.get(field) == relay.get(field),
                        f"check/check-job.yaml: its {field} differs from the Deployment's: the check would try "
                        f"another configuration than the relay runs")
        claims = lambda spec: {v["name"]: v["persistentVolumeClaim"]["claimName"]
                               for v in spec.get("volumes", []) if "persistentVolumeClaim" in v}
        mounts = lambda c, spec: {m["mountPath"]: claims(spec).get(m["name"]) for m in c.get("volumeMounts", [])
                                  if m["name"] in claims(spec)}
        self.expect(mounts(check, job_pod) == mounts(relay, pod),
                    "check/check-job.yaml: mounts other volume claims than the Deployment (DB_PATH's store)")
        self.expect(secret_mounts(check, job_pod) == secret_mounts(relay, pod),
                    f"check/check-job.yaml: its Secret volumes and mounts {secret_mounts(check, job_pod)} differ from "
                    f"the Deployment's {secret_mounts(relay, pod)}: the check would read another APNs key file than the "
                    f"relay")
        service_selector = deployment["spec"]["selector"]["matchLabels"]
        labels = job["spec"]["template"]["metadata"].get("labels", {})
        self.expect(not all(labels.get(k) == v for k, v in service_selector.items()),
                    "check/check-job.yaml: its pods carry the relay's labels, so the Service would route to them")
        self.expect(job["spec"].get("backoffLimit") == 0,
                    "check/check-job.yaml: backoffLimit must be 0 (a failed check is an answer, not a flake)")

    # MARK: - renderings

    def candidate(self, check_path, candidate_path):
        check = [d for d in yaml.safe_load_all(Path(check_path).read_text()) if d]
        candidate = [d for d in yaml.safe_load_all(Path(candidate_path).read_text()) if d]
        kinds = lambda docs: sorted((d["kind"], d["metadata"]["name"]) for d in docs)
        self.expect(kinds(candidate) == kinds(check),
                    f"{candidate_path}: renders {kinds(candidate)}, not the check's {kinds(check)}")
        jobs = [d for d in candidate if d["kind"] == "Job"]
        check_jobs = [d for d in check if d["kind"] == "Job"]
        if len(jobs) != 1 or len(check_jobs) != 1:
            return
        # kustomize's strategic merge puts the patched env entries and volumes first; their order means nothing here
        # (no env value refers to another), so named entries are compared as sets.
        text = yaml.safe_dump(jobs[0], sort_keys=True)
        self.expect(by_name(yaml.safe_load(text.replace(CANDIDATE_SECRET, APNS_SECRET))) == by_name(check_jobs[0]),
                    f"{candidate_path}: its Job differs from the check's in more than the APNs Secret's name")
        pod = jobs[0]["spec"]["template"]["spec"]
        refs = [v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v]
        refs += [e["valueFrom"]["secretKeyRef"]["name"] for e in container(pod).get("env", [])
                 if "secretKeyRef" in e.get("valueFrom", {})]
        refs += [e["secretRef"]["name"] for e in container(pod).get("envFrom", []) if "secretRef" in e]
        apns = [r for r in refs if r.startswith(APNS_SECRET)]
        self.expect(len(apns) >= 3 and all(r == CANDIDATE_SECRET for r in apns),
                    f"{candidate_path}: its Job reads APNs Secrets {apns}: the key volume and both ids must all come "
                    f"from {CANDIDATE_SECRET}")

    def rendered(self, main_path, check_path):
        main = [d for d in yaml.safe_load_all(Path(main_path).read_text()) if d]
        check = [d for d in yaml.safe_load_all(Path(check_path).read_text()) if d]
        kinds = sorted(d["kind"] for d in check)
        self.expect(kinds == ["ConfigMap", "Job", "PersistentVolumeClaim"],
                    f"{check_path}: the check's rendering holds {kinds}, not only the ConfigMap, the claim and the Job")
        main_maps = {d["metadata"]["name"] for d in main if d["kind"] == "ConfigMap"}
        check_maps = {d["metadata"]["name"] for d in check if d["kind"] == "ConfigMap"}
        self.expect(main_maps and check_maps == main_maps,
                    f"{check_path}: its ConfigMap {sorted(check_maps)} is not the Deployment's {sorted(main_maps)}")
        for job in (d for d in check if d["kind"] == "Job"):
            refs = {e["configMapRef"]["name"] for e in container(job["spec"]["template"]["spec"]).get("envFrom", [])
                    if "configMapRef" in e}
            self.expect(refs == main_maps, f"{check_path}: the Job reads ConfigMap {sorted(refs)}, not the "
                                           f"rendered {sorted(main_maps)} (its namespace must be the ConfigMap's)")


def by_name(value):
    """`value` with every list whose items all have a name sorted by it (at any depth)."""
    if isinstance(value, dict):
        return {k: by_name(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [by_name(v) for v in value]
        if items and all(isinstance(v, dict) and "name" in v for v in items):
            items.sort(key=lambda v: v["name"])
        return items
    return value


def secret_mounts(c, spec):
    """mountPath -> (the Secret volume as declared, readOnly) for each Secret volume `c` mounts."""
    secrets = {v["name"]: v["secret"] for v in spec.get("volumes", []) if "secret" in v}
    return {m["mountPath"]: (secrets[m["name"]], m.get("readOnly", False)) for m in c.get("volumeMounts", [])
            if m["name"] in secrets}


def selects(selector, labels):
    """A label selector (matchLabels, and matchExpressions with In/NotIn/Exists/DoesNotExist) against labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        ok = {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[operator]
        if not ok:
            return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="deploy/k8s", type=Path)
    parser.add_argument("--makefile", type=Path)
    parser.add_argument("--rendered", nargs=2, metavar=("MAIN", "CHECK"))
    parser.add_argument("--candidate", metavar="CANDIDATE")
    args = parser.parse_args()
    d = args.dir
    env = env_file(d / "prefect-push.env")
    base = env.get("BASE_PATH", "").strip().rstrip("/")
    deployment = one(d / "deployment.yaml", "Deployment")
    job = one(d / "check" / "check-job.yaml", "Job")
    checker = Checker()
    checker.paths(base, deployment, one(d / "ingress.example.yaml", "Ingress"), args.makefile)
    checker.ports(deployment, one(d / "networkpolicy.example.yaml", "NetworkPolicy"))
    checker.timing(env, deployment)
    checker.secrets(deployment, job, documents(d / "secrets.example.yaml"))
    checker.apns_key(deployment, documents(d / "secrets.example.yaml"))
    checker.check_job(deployment, job)
    if args.rendered:
        checker.rendered(*args.rendered)
        if args.candidate:
            checker.candidate(args.rendered[1], args.candidate)
    if checker.problems:
        print("\n".join(f"{d}: {p}" for p in checker.problems))
        sys.exit(1)
    print(f"{d}: manifests agree (BASE_PATH={base or '(empty)'}, ports, rollout timing, Secrets, APNs key file, "
          f"check Job{', renderings' if args.rendered else ''}{', candidate check' if args.candidate else ''})")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 (any failure to read is exit 2, not a finding)
        print(f"check-k8s.py: cannot check: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)
