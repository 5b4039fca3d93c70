#!/usr/bin/env python3
"""Checks the container image's OCI layouts: blobs, layers as tar, reproducibility, and the SBOM.

  usage: tools/check-image.py [--rebuild BINARY [--keep LAYOUT]] [--compression zstd|gzip] [--no-schema] [LAYOUT ...]

For every LAYOUT (an OCI image layout directory, as `make image` writes .build/oci):
  - every blob's SHA-256 is its name, and every descriptor's digest and size are the blob's;
  - every layer, uncompressed, has the config's diff_id; it ends with tar's two zero blocks after its last entry;
    GNU tar lists it (`tar -tvf`) with exit 0 and nothing on stderr; Python's tarfile lists the same entries;
  - the config declares ports 8080 and 9747, labels its created time, and names the SBOM (label prefect-push.sbom),
    which the layers carry: CycloneDX 1.5 (checked against its JSON schema with cyclonedx-python-lib unless
    --no-schema), with a version and package URL for every component and the binary's SHA-256 as it is in the image.

With --rebuild BINARY it first builds the image twice from BINARY (deploy/image.sh, then deploy/image-compress.py
with the compression given) and requires the same manifest digest both times; checks that layout and a gzip copy of
it (as `make image-archive` makes); and packs the same root the way umoci alone does (`umoci insert`), which must
fail the layer checks: a check that can't fail proves nothing. Exits 1 on any problem, naming each.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZERO_BLOCK = bytes(512)
PORTS = ("8080/tcp", "9747/tcp")
SBOM_LABEL = "prefect-push.sbom"
BINARY_IN_IMAGE = "usr/local/bin/prefect-push"


# MARK: - Blobs

def blob_path(layout: str, digest: str) -> str:
    algorithm, value = digest.split(":", 1)
    return os.path.join(layout, "blobs", algorithm, value)


def read_blob(layout: str, descriptor: dict, problems: list[str]) -> bytes | None:
    """The blob a descriptor names, if it is there with that digest and size."""
    try:
        with open(blob_path(layout, descriptor["digest"]), "rb") as f:
            data = f.read()
    except OSError:
        problems.append(f"{descriptor['digest']}: missing blob")
        return None
    if len(data) != descriptor["size"]:
        problems.append(f"{descriptor['digest']}: {len(data)} bytes, descriptor says {descriptor['size']}")
    return data


def check_blob_names(layout: str, problems: list[str]) -> None:
    directory = os.path.join(layout, "blobs", "sha256")
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != name:
                problems.append(f"blobs/sha256/{name}: its SHA-256 is not its name")


# MARK: - Layers

def uncompressed(media_type: str, data: bytes) -> bytes:
    if media_type.endswith("+gzip"):
        return gzip.decompress(data)
    if media_type.endswith("+zstd"):
        return subprocess.run(["zstd", "-dc", "-q"], input=data, capture_output=True, check=True).stdout
    if media_type.endswith(".tar"):
        return data
    raise ValueError(f"unknown layer media type {media_type}")


def end_of_entries(tar: bytes) -> int | None:
    """Where the entries end, walking the headers (each followed by its data in 512-byte blocks): the offset of the
    first zero block, or None when the archive ends first."""
    offset = 0
    while offset + 512 <= len(tar):
        header = tar[offset:offset + 512]
        if header == ZERO_BLOCK:
            return offset
        field = header[124:136]
        if field[0] & 0x80:  # base-256, for sizes past 8 GiB
            size = int.from_bytes(field[1:], "big")
        else:
            size = int(field.rstrip(b"\0 ").decode() or "0", 8)
        offset += 512 + (size + 511) // 512 * 512
    return None


def check_tar(name: str, tar: bytes, problems: list[str]) -> int:
    """GNU tar and Python's tarfile must both read the whole archive, the same way. Returns the entry count."""
    end = end_of_entries(tar)
    if end is None or tar[end:end + 1024] != bytes(1024):
        problems.append(f"{name}: no end-of-archive (two zero blocks) after the last entry")
    verbose = subprocess.run(["tar", "-tvf", "-"], input=tar, capture_output=True)
    if verbose.returncode != 0 or verbose.stderr:
        problems.append(f"{name}: GNU tar -tvf exit {verbose.returncode}: {verbose.stderr.decode().strip()!r}")
    listed = subprocess.run(["tar", "-tf", "-"], input=tar, capture_output=True).stdout.decode().splitlines()
    gnu = [entry.rstrip("/") for entry in listed]
    try:
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as archive:
            python = [member.name for member in archive]
    except tarfile.TarError as error:
        problems.append(f"{name}: Python tarfile: {error}")
        return len(gnu)
    if python != gnu:
        problems.append(f"{name}: Python tarfile lists {len(python)} entries, GNU tar {len(gnu)}")
    return len(python)


def member(tar: bytes, path: str) -> bytes | None:
    try:
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as archive:
            found = archive.extractfile(path)
            return found.read() if found else None
    except (KeyError, tarfile.TarError):
        return None


# MARK: - Config and SBOM

def check_annotations(manifest: dict, config: dict, problems: list[str]) -> None:
    """The manifest carries the OCI annotations registries show (they read the manifest, not the config), each
    equal to the config's label of the same name; source, url and documentation whenever IMAGE_SOURCE was given."""
    annotations = manifest.get("annotations") or {}
    labels = config.get("config", {}).get("Labels") or {}
    wanted = ["title", "version", "revision", "created", "licenses"]
    if os.environ.get("IMAGE_SOURCE"):
        wanted += ["source", "url", "documentation"]
    for name in ("org.opencontainers.image." + key for key in wanted):
        if not annotations.get(name):
            problems.append(f"manifest: no annotation {name}")
        elif annotations[name] != labels.get(name):
            problems.append(f"manifest: annotation {name} is {annotations[name]!r}, the config's label "
                            f"{labels.get(name)!r}")


def check_config(config: dict, problems: list[str]) -> None:
    settings = config.get("config", {})
    for port in PORTS:
        if port not in settings.get("ExposedPorts", {}):
            problems.append(f"config: port {port} not declared")
    labels = settings.get("Labels") or {}
    if labels.get("org.opencontainers.image.created") != config.get("created"):
        problems.append("config: label org.opencontainers.image.created is not the image's created time")
    if SBOM_LABEL not in labels:
        problems.append(f"config: no {SBOM_LABEL} label naming the SBOM")


def check_sbom(text: bytes, binary: bytes | None, schema: bool, problems: list[str]) -> int:
    bom = json.loads(text)
    if (bom.get("bomFormat"), bom.get("specVersion")) != ("CycloneDX", "1.5"):
        problems.append("SBOM: not CycloneDX 1.5")
    components = bom.get("components", [])
    for component in components:
        if not component.get("version") or not component.get("purl"):
            problems.append(f"SBOM: {component.get('name')} has no version or package URL")
    hashes = bom.get("metadata", {}).get("component", {}).get("hashes", [])
    if binary is None or {"alg": "SHA-256", "content": hashlib.sha256(binary).hexdigest()} not in hashes:
        problems.append(f"SBOM: the binary's SHA-256 is not that of /{BINARY_IN_IMAGE} in the image")
    if schema:
        from cyclonedx.schema import SchemaVersion
        from cyclonedx.validation.json import JsonStrictValidator
        error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text.decode())
        if error:
            problems.append(f"SBOM: CycloneDX 1.5 schema: {error}")
    return len(components)


# MARK: - A layout

def check_layout(layout: str, schema: bool) -> tuple[list[str], str]:
    """Problems found, and a one-line account of what was checked."""
    problems: list[str] = []
    check_blob_names(layout, problems)
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    accounts = []
    for entry in index["manifests"]:
        manifest = json.loads(read_blob(layout, entry, problems) or b"{}")
        config = json.loads(read_blob(layout, manifest["config"], problems) or b"{}")
        diff_ids = config.get("rootfs", {}).get("diff_ids", [])
        if len(diff_ids) != len(manifest["layers"]):
            problems.append(f"{entry['digest']}: {len(manifest['layers'])} layers, {len(diff_ids)} diff_ids")
        check_config(config, problems)
        check_annotations(manifest, config, problems)
        tars = []
        for number, (layer, diff_id) in enumerate(zip(manifest["layers"], diff_ids)):
            try:
                tar = uncompressed(layer["mediaType"], read_blob(layout, layer, problems) or b"")
            except (ValueError, OSError, EOFError, subprocess.CalledProcessError) as error:
                problems.append(f"layer {number}: cannot decompress: {error}")
                continue
            if "sha256:" + hashlib.sha256(tar).hexdigest() != diff_id:
                problems.append(f"layer {number}: its tar's SHA-256 is not diff_id {diff_id}")
            entries = check_tar(f"layer {number}", tar, problems)
            tars.append(tar)
            accounts.append(f"layer {number} {layer['mediaType'].rsplit('.', 1)[-1]} {layer['size']} bytes, "
                            f"tar {len(tar)} bytes, {entries} entries")
        sbom_path = (config.get("config", {}).get("Labels") or {}).get(SBOM_LABEL, "").lstrip("/")
        found = [m for m in (member(tar, sbom_path) for tar in tars) if m is not None] if sbom_path else []
        if sbom_path and not found:
            problems.append(f"SBOM: /{sbom_path} is not in the image")
        if found:
            binaries = [m for m in (member(tar, BINARY_IN_IMAGE) for tar in tars) if m is not None]
            count = check_sbom(found[-1], binaries[-1] if binaries else None, schema, problems)
            accounts.append(f"SBOM {count} components")
        accounts.insert(0, f"manifest {entry['digest']}")
    return problems, "; ".join(accounts)


# MARK: - Builds

def build(binary: str, layout: str, compression: str) -> str:
    """Packs the image as `make image` does and returns its manifest digest."""
    subprocess.run(["sh", os.path.join(ROOT, "deploy/image.sh"), binary, layout, "check"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, os.path.join(ROOT, "deploy/image-compress.py"), layout, "check", compression],
                   check=True)
    with open(os.path.join(layout, "index.json")) as f:
        return json.load(f)["manifests"][0]["digest"]


def umoci_layout(layout: str, work: str) -> str:
    """The same root packed by `umoci insert` (what deploy/image.sh did before it wrote the layer itself)."""
    with open(os.path.join(layout, "index.json")) as f:
        digest = json.load(f)["manifests"][0]["digest"]
    with open(blob_path(layout, digest)) as f:
        manifest = json.load(f)
    root = os.path.join(work, "root")
    os.mkdir(root)
    for layer in manifest["layers"]:
        with open(blob_path(layout, layer["digest"]), "rb") as f:
            tar = uncompressed(layer["mediaType"], f.read())
        subprocess.run(["tar", "-xpf", "-", "--numeric-owner", "-C", root], input=tar, check=True)
    old = os.path.join(work, "umoci")
    for command in (["init", "--layout", old], ["new", "--image", f"{old}:check"],
                    ["insert", "--image", f"{old}:check", root, "/"]):
        subprocess.run(["umoci", *command], check=True, stdout=subprocess.DEVNULL)
    return old


def rebuild(binary: str, compression: str, schema: bool, keep: str | None = None) -> list[str]:
    problems = []
    with tempfile.TemporaryDirectory(prefix="check-image-") as work:
        first, second = os.path.join(work, "first"), os.path.join(work, "second")
        digests = build(binary, first, compression), build(binary, second, compression)
        print(f"built twice from {binary}: {digests[0]}, {digests[1]}")
        if digests[0] != digests[1]:
            problems.append(f"two builds from the same binary differ: {digests[0]} and {digests[1]}")
        gzipped = os.path.join(work, "gzip")
        shutil.copytree(first, gzipped)
        subprocess.run([sys.executable, os.path.join(ROOT, "deploy/image-compress.py"), gzipped, "check", "gzip"],
                       check=True)
        for name, layout in ((compression, first), ("gzip", gzipped)):
            found, account = check_layout(layout, schema)
            print(f"{name}: {account}")
            problems += [f"{name}: {problem}" for problem in found]
        planted, _ = check_layout(umoci_layout(first, work), schema=False)
        layer_problems = [p for p in planted if p.startswith("layer")]
        print(f"umoci insert (must fail): {'; '.join(layer_problems) or 'no layer problem found'}")
        if not layer_problems:
            problems.append("the layer checks passed umoci's own layer, which tar refuses: they can't fail")
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(first, keep)
            print(f"kept the first build in {keep} (tag check)")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", metavar="BINARY", help="build the image twice from BINARY and compare")
    parser.add_argument("--compression", choices=("zstd", "gzip"), default="zstd")
    parser.add_argument("--no-schema", action="store_true", help="skip the CycloneDX schema validation")
    parser.add_argument("--keep", metavar="LAYOUT", help="with --rebuild: keep the first build there, tagged check")
    parser.add_argument("layouts", nargs="*")
    args = parser.parse_args()
    if not args.rebuild and not args.layouts:
        parser.error("give --rebuild BINARY or a LAYOUT")
    if "GNU tar" not in subprocess.run(["tar", "--version"], capture_output=True, text=True).stdout:
        sys.exit("check-image: needs GNU tar")
    problems = (rebuild(os.path.abspath(args.rebuild), args.compression, not args.no_schema, args.keep)
                if args.rebuild else [])
    for layout in args.layouts:
        found, account = check_layout(layout, not args.no_schema)
        print(f"{layout}: {account}")
        problems += [f"{layout}: {problem}" for problem in found]
    for problem in problems:
        print(f"  FAIL {problem}")
    print(f"image-check: {'failed' if problems else 'passed'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
