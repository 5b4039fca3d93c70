#!/usr/bin/env python3
"""Writes the image's software bill of materials: a CycloneDX 1.5 JSON document of the release binary and what it
is built from.

  usage: deploy/sbom.py --stamp STAMP --binary BINARY --created TIME [--source URL] OUT

The libraries come from STAMP, the Swift file deploy/build-stamp.sh generated for the release build that made
BINARY (Sources/Relay/Process/BuildStamp.generated.swift): build-stamp.sh holds the one list, and `prefect-push --version
--verbose` prints the same entries, compiled in from the same file. A stamp whose version or commit is not the
binary's own (`BINARY --version`) is refused: it would describe another build.

Besides the libraries, the document names the binary (its SHA-256), and the CA certificates the image carries
(Debian's ca-certificates, as installed where the image is built). The same inputs give the same bytes: TIME is
the image's created time (SOURCE_DATE_EPOCH), and the serial number is derived from the binary and that time.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import uuid

LIBRARY = re.compile(r'\(name: "([^"]+)", version: "([^"]+)", linkage: "(static|dynamic)", purl: "([^"]+)"\)')
BINARY_PATH = "/usr/local/bin/prefect-push"


def fail(message: str) -> None:
    sys.exit(f"sbom.py: {message}")


def read_stamp(path: str) -> tuple[str, str, list[tuple[str, str, str, str]]]:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as error:
        fail(f"cannot read the build stamp {path}: {error.strerror} (make build writes it)")
    version = re.search(r'static let version = "([^"]*)"', text)
    commit = re.search(r'static let commit = "([^"]*)"', text)
    libraries = LIBRARY.findall(text)
    if not version or not commit or not libraries:
        fail(f"{path} names no version, commit or libraries: written by an older deploy/build-stamp.sh? (make build)")
    return version.group(1), commit.group(1), libraries


def binary_identity(binary: str) -> tuple[str, str]:
    """The version and commit the binary reports: `prefect-push VERSION (commit COMMIT)`."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.match(r"prefect-push (\S+) \(commit ([0-9a-f]+|unknown)\)", out)
    if not match:
        fail(f"{binary} --version said {out.strip()!r}")
    return match.group(1), match.group(2)


def ca_certificates() -> dict:
    """Debian's ca-certificates, whose roots image.sh copies into the image."""
    out = subprocess.run(["dpkg-query", "-W", "-f=${source:Package} ${source:Version}", "ca-certificates"],
                         capture_output=True, text=True)
    if out.returncode != 0 or " " not in out.stdout:
        fail("ca-certificates is not installed (the image's trusted roots come from it)")
    source, version = out.stdout.split(" ", 1)
    return {"type": "data", "bom-ref": "ca-certificates", "name": "ca-certificates", "version": version,
            "description": "Trusted root certificates: /etc/ssl/certs (the bundle and one file per root)",
            "purl": f"pkg:deb/debian/{source}@{quote(version)}?arch=source&distro=debian-12"}


def quote(version: str) -> str:
    return version.replace("%", "%25").replace(":", "%3A").replace("+", "%2B")


def document(args: argparse.Namespace) -> dict:
    version, commit, libraries = read_stamp(args.stamp)
    reported = binary_identity(args.binary)
    if reported != (version, commit):
        fail(f"{args.binary} is {reported[0]} (commit {reported[1]}), but {args.stamp} is for {version} "
             f"(commit {commit}): build them together (make build)")
    with open(args.binary, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    application = {"type": "application", "bom-ref": "prefect-push", "name": "prefect-push", "version": version,
                   "description": "Relays Prefect flow-run pauses to iPhones via APNs",
                   "licenses": [{"license": {"id": "Apache-2.0"}}],
                   "purl": f"pkg:generic/prefect-push@{quote(version)}",
                   "hashes": [{"alg": "SHA-256", "content": digest}],
                   "properties": [{"name": "prefect-push:commit", "value": commit},
                                  {"name": "prefect-push:path", "value": BINARY_PATH}]}
    if args.source:
        application["externalReferences"] = [{"type": "vcs", "url": args.source}]
    components = []
    for name, library_version, linkage, purl in libraries:
        where = (f"linked into {BINARY_PATH}" if linkage == "static"
                 else f"a shared library in the image that {BINARY_PATH} loads")
        components.append({"type": "library", "bom-ref": name, "name": name, "version": library_version,
                           "scope": "required", "description": f"{name} {library_version}, {where}", "purl": purl,
                           "properties": [{"name": "prefect-push:linkage", "value": linkage}]})
    components.append(ca_certificates())
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"prefect-push/{version}/{digest}/{args.created}")
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {"timestamp": args.created,
                     "tools": {"components": [{"type": "application", "name": "deploy/sbom.py"}]},
                     "component": application},
        "components": components,
        "dependencies": [{"ref": "prefect-push", "dependsOn": [c["bom-ref"] for c in components]}]
                        + [{"ref": c["bom-ref"]} for c in components],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stamp", required=True, help="the generated BuildStamp Swift file")
    parser.add_argument("--binary", required=True, help="the release binary it was compiled into")
    parser.add_argument("--created", required=True, help="the image's created time, RFC 3339 (UTC)")
    parser.add_argument("--source", default="", help="the repository's address, if known")
    parser.add_argument("out")
    args = parser.parse_args()
    bom = document(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(bom, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
