#!/usr/bin/env python3
"""Where the release binary's bytes go, from the linker map `make size-report` writes (GNU gold or lld format).

  usage: tools/size-report.py MAP [BINARY]

Every input section the linker kept is charged to where it came from: a Swift module of ours (its .o files under
`<Module>.build/`), a Swift runtime library (`libswiftCore.a`, `lib_Concurrency.a`, ...) or a C archive
(`libcrypto.a`, ...), or the linker itself (symbol and relocation tables, PLT, headers). Sections are grouped as
code (.text, PLT), read-only data (.rodata, Swift metadata, unwind tables) and writable data (relocated at start-up
or zero-filled). .bss takes no room in the file and is shown apart. Prints three tables: by library or module, by
section kind, and the largest archive members; then which of our symbols pull in the Swift string-processing
libraries (over 1 MB with what they drag along), since a single `String.contains(String)` is enough.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

NOT_LOADED = (".debug", ".comment", ".symtab", ".strtab", ".shstrtab", ".note.stapsdt", ".gnu_debuglink",
              ".swift_modhash", ".swift1_autolink_entries")
CODE = (".text", ".plt", ".init", ".fini", ".iplt")
RELRO_OR_DATA = (".data", ".got", ".init_array", ".fini_array", ".tm_clone_table", ".dynamic")
LINKER_TABLES = (".dynsym", ".dynstr", ".gnu.hash", ".hash", ".gnu.version", ".rela", ".interp", ".note")


def kind(section: str) -> str:
    if section.startswith(".bss") or section.startswith(".tbss"):
        return "bss (zero-filled, not in the file)"
    if section.startswith(CODE):
        return "code"
    if section.startswith((".eh_frame", ".gcc_except_table")):
        return "unwind tables"
    if section.startswith(RELRO_OR_DATA) or section.startswith(".tdata"):
        return "writable data (relocated at start-up)"
    if section.startswith(LINKER_TABLES):
        return "dynamic symbols and relocations"
    if section.startswith("swift5_"):
        return "Swift metadata sections"
    return "read-only data"


def origin(path: str) -> tuple[str, str]:
    """(owner, member): the owner is a module, an archive or 'linker'; member is the archive member if any."""
    if not path:
        return "linker: merged strings, tables, headers", ""
    archive = re.match(r"(.*)\((.*)\)$", path)
    if archive:
        name = os.path.basename(archive.group(1))
        if name.startswith("libswift") or name in ("libdispatch.a", "libBlocksRuntime.a"):
            name = "Swift runtime: " + name
        elif name.startswith(("libstdc++", "libgcc")):
            name = "C++ runtime: " + name
        else:
            name = "C: " + name
        return name, archive.group(2)
    module = re.search(r"/([^/]+)\.build/[^/]+\.o$", path)
    if module:
        owner = module.group(1)
        return ("C: " if owner == "CShims" else "Swift: ") + owner, os.path.basename(path)
    base = os.path.basename(path)
    if base.endswith(".o") and ("crt" in base or base == "swiftrt.o"):
        return "C runtime start files", base
    return base, ""


OPTIONAL_RUNTIME = ("libswift_StringProcessing.a", "libswift_RegexParser.a")


def optional_runtime_uses(objects: set[str]) -> list[str]:
    """Symbols our objects import from the optional Swift runtime libraries, demangled when swift-demangle is found."""
    if not objects or not shutil.which("nm"):
        return []
    undefined = subprocess.run(["nm", "-u", *sorted(objects)], capture_output=True, text=True).stdout
    wanted = {line.split()[-1] for line in undefined.splitlines()
              if line.strip().startswith("U ") and ("17_StringProcessing" in line or "12_RegexParser" in line)}
    names = sorted(wanted)
    demangle = shutil.which("swift-demangle") or shutil.which("/opt/swift/usr/bin/swift-demangle")
    if names and demangle:
        out = subprocess.run([demangle, "--simplified"], input="\n".join(names), capture_output=True, text=True)
        if out.returncode == 0:
            names = out.stdout.strip().splitlines()
    return names


def parse(path: str):
    """Yields (output section, input section, size, file) for each input section in the memory map."""
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("Memory map")), None)
    if start is not None:
        yield from parse_gold(lines[start + 1:])
    else:
        yield from parse_lld(lines)


def parse_gold(lines: list[str]):
    out = ""
    pending = None  # an input section name whose address and size are on the next line
    for line in lines:
        if not line.strip():
            continue
        if not line.startswith(" "):
            out = line.split()[0]
            continue
        fields = line.split()
        if pending is not None:
            if len(fields) >= 2 and fields[0].startswith("0x"):
                yield out, pending, int(fields[1], 16), " ".join(fields[2:])
            pending = None
            continue
        if line.startswith(" **"):
            m = re.match(r"\s+\*\*.*?\s(0x[0-9a-f]+)\s+(0x[0-9a-f]+)", line)
            if m:
                yield out, "**", int(m.group(2), 16), ""
            else:
                pending = "**"
            continue
        if line.startswith(" ") and not line.startswith("  ") and fields:
            if len(fields) >= 3 and fields[1].startswith("0x"):
                yield out, fields[0], int(fields[2], 16), " ".join(fields[3:])
            else:
                pending = fields[0]


def parse_lld(lines: list[str]):
    # lld: "VMA LMA Size Align Out In Symbol" with indentation marking the level.
    out = ""
    for line in lines[1:]:
        m = re.match(r"\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+)(\s+)(.*)$", line)
        if not m:
            continue
        indent, text = len(m.group(5)), m.group(6)
        size = int(m.group(3), 16)
        if not text.strip():
            continue
        if indent == 1:
            out = text.split()[0]
        elif indent == 9:
            fm = re.match(r"(.*):\((.*)\)$", text)
            file, section = (fm.group(1), fm.group(2)) if fm else ("", text)
            yield out, section, size, file if file != "<internal>" else ""


def table(title: str, rows: list[tuple[str, int]], total: int, limit: int | None = None) -> str:
    width = max([len(title)] + [len(n) for n, _ in rows[:limit]]) + 2
    text = [f"{title:<{width}} {'bytes':>11} {'share':>6}"]
    for name, size in rows[:limit]:
        text.append(f"{name:<{width}} {size:>11,} {100 * size / total:>5.1f}%")
    if limit is not None and len(rows) > limit:
        rest = sum(s for _, s in rows[limit:])
        text.append(f"{'(' + str(len(rows) - limit) + ' more)':<{width}} {rest:>11,} {100 * rest / total:>5.1f}%")
    text.append(f"{'total':<{width}} {total:>11,}")
    return "\n".join(text)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    owners: dict[str, int] = defaultdict(int)
    kinds: dict[str, int] = defaultdict(int)
    members: dict[str, int] = defaultdict(int)
    owner_kind: dict[tuple[str, str], int] = defaultdict(int)
    bss = 0
    ours: set[str] = set()
    for out, _section, size, file in parse(sys.argv[1]):
        if re.search(r"/(Relay|RelayCore|prefect_push)\.build/[^/]+\.o$", file):
            ours.add(file)
        if out.startswith(NOT_LOADED) or size == 0:
            continue
        k = kind(out)
        owner, member = origin(file)
        if k.startswith("bss"):
            bss += size
            continue
        owners[owner] += size
        kinds[k] += size
        owner_kind[(owner, k)] += size
        if member:
            members[f"{owner.split(': ')[-1]}({member})"] += size
    total = sum(owners.values())
    by_owner = sorted(owners.items(), key=lambda kv: -kv[1])
    print(table("by library or module", by_owner, total))
    print()
    print(table("by section kind", sorted(kinds.items(), key=lambda kv: -kv[1]), total))
    print(f"(plus {bss:,} bytes of .bss, zero-filled at start-up, not in the file)")
    print()
    print(table("largest archive members and object files", sorted(members.items(), key=lambda kv: -kv[1]),
                total, limit=25))
    print()
    kinds_order = [k for k, _ in sorted(kinds.items(), key=lambda kv: -kv[1])]
    short = {k: k.split(" (")[0].replace("dynamic symbols and relocations", "dyn.tables")
             .replace("Swift metadata sections", "swift5_*").replace("read-only data", "rodata")
             .replace("writable data", "data").replace("unwind tables", "unwind") for k in kinds_order}
    head = f"{'kB by owner and kind':<38}" + "".join(f"{short[k]:>11}" for k in kinds_order)
    print(head)
    for owner, _ in by_owner[:14]:
        print(f"{owner:<38}" + "".join(f"{owner_kind[(owner, k)] / 1000:>11,.0f}" for k in kinds_order))
    optional = [name for name in OPTIONAL_RUNTIME if any(o.endswith(name) for o in owners)]
    if optional:
        print(f"\n{' and '.join(optional)} linked ({sum(v for o, v in owners.items() if o.endswith(OPTIONAL_RUNTIME)):,} "
              "bytes) because our code uses:")
        for name in optional_runtime_uses(ours) or ["(nm found no direct use: pulled in by another library)"]:
            print(f"  {name}")
    if len(sys.argv) > 2:
        size = os.path.getsize(sys.argv[2])
        print(f"\n{sys.argv[2]}: {size:,} bytes on disk (the sections above plus alignment, headers, section table)")


if __name__ == "__main__":
    main()
