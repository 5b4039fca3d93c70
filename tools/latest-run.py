#!/usr/bin/env python3
"""`make docs-tables`: the "latest run" tables of the docs, written from the results files the runs wrote, each
headed with the commit and date it ran on, so a table can't drift from its run or claim one that never happened.

  chaos  chaos/results.json        (make chaos)  -> docs/testing.md, between the latest-run chaos markers
  soak   bench/soak-results.json   (make soak)   -> docs/testing.md, between the latest-run soak markers
  bench  bench/results.json        (make bench)  -> docs/benchmarks.md, between the latest-run bench markers

A results file without a "commit" makes its table say "commit unknown". A missing results file leaves its table as
it is (said on stderr); missing markers fail (exit 1). --only chaos,soak for some of them; --chaos/--soak/--bench for
other results files (e.g. a smoke run's).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def load(path: str, name: str):
    """A harness module by its path: chaos/run.py and bench/run.py share a name, so neither is imported as `run`."""
    sys.path.insert(0, os.path.join(ROOT, os.path.dirname(path)))  # its own imports, beside it
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)


def stamp(results: dict, what: str) -> str:
    """The heading line: which commit and when, as the results file says (never guessed)."""
    commit = results.get("commit")
    date = results.get("date") or (results.get("machine") or {}).get("date") or "date unknown"
    return f"Latest {what}: commit {'`' + commit + '`' if commit else 'unknown'}, {date}."


def count(value) -> str:
    return f"{value:,}" if isinstance(value, int) else ("–" if value is None else str(value))


# MARK: - chaos

def chaos_verdict():
    """chaos/run.py's own verdict per scenario, so the table can't call a scenario passed that the run failed; None
    when the harness can't be imported (the table then has no verdict column rather than a guessed one)."""
    try:
        return load("chaos/run.py", "chaos_run").passed
    except Exception as error:  # noqa: BLE001 (any failure to import means: no verdict column)
        print(f"latest-run: chaos/run.py not importable ({error!r}): no verdict column", file=sys.stderr)
        return None


def chaos_row(name: str, result: dict, passed) -> str:
    verdict = ["passed" if passed(name, result) else "**failed**"] if passed else []
    if "skipped" in result or "error" in result:
        why = f"skipped: {result['skipped']}" if "skipped" in result else f"could not run: {result['error']}"
        return "| " + " | ".join([f"`{name}`"] + ["–"] * 7 + [result.get("seconds", "–"), why] + verdict) + " |"
    latency = result.get("latency_s")
    cells = [f"`{name}`", count(result.get("pauses")), count(result.get("devices"))] + \
        [count(result.get(key, "–")) for key in ("missed", "duplicates", "starts_missed", "start_duplicates")] + \
        [f"{latency['p50']} / {latency['max']}" if latency else "–", result.get("seconds", "–"),
         (result.get("note") or "").replace("|", "\\|")]
    return "| " + " | ".join(str(c) for c in cells + verdict) + " |"


def chaos_table(results: dict) -> str:
    passed = chaos_verdict()
    head = "| scenario | pauses | devices | missed | dup | st-missed | st-dup | p50 / max (s) | seconds | note |"
    rule = "|---|---|---|---|---|---|---|---|---|---|"
    if passed:
        head, rule = head + " verdict |", rule + "---|"
    kind = "`chaos/run.py --quick` run" if results.get("quick") else "`chaos/run.py` run"
    relay = os.path.relpath(results["relay"], ROOT) if os.path.isabs(results.get("relay", "")) else results.get("relay")
    scenarios = len(results.get("scenarios", {}))
    lines = [stamp(results, kind) + f" {scenarios} scenarios, relay `{relay}`, seed {results.get('seed')}.", "",
             head, rule]
    lines += [chaos_row(name, result, passed) for name, result in results.get("scenarios", {}).items()]
    return "\n".join(lines)


# MARK: - soak

def soak_table(results: dict) -> str:
    m, w, e = results.get("memory") or {}, results.get("at_warmup") or {}, results.get("final") or {}
    preload = f", relay preloaded with `{results['relay_preload']}`" if results.get("relay_preload") else ""
    lines = [stamp(results, "soak") + f" `bench/soak.py --pauses {results['pauses']} --every {results.get('every')}`, "
             f"`{results.get('relay')}` ({results.get('relay_version') or 'version unknown'}){preload}: "
             f"**{'passed' if results.get('passed') else 'failed'}**.", "",
             "| measurement | value |", "|---|---|"]
    rows = [("pauses, devices", f"{count(results['pauses'])}, {results['devices']}"),
            ("time", f"{results.get('seconds', '–')} s ({results.get('pauses_per_s', '–')} pauses/s)"),
            ("warm-up; samples after it", f"{count(results.get('warmup'))} pauses; {m.get('samples', '–')}")]
    if w and e:
        rows += [("resident memory at warm-up → end", f"{w['rss_kib'] / 1024:.2f} → {e['rss_kib'] / 1024:.2f} MiB"),
                 (f"{m.get('judged', 'RSS')} slope after warm-up (bound)",
                  f"{m.get('judged_slope_kib_per_pause', m['slope_kib_per_pause']):+.4f} KiB/pause "
                  f"({m['max_slope_kib_per_pause']})"),
                 ("noise around that slope (residuals' std. dev.)",
                  f"{m.get('judged_noise_kib', m['noise_kib'])} KiB"),
                 ("whole RSS slope; SQLite's page cache slope", f"{m['slope_kib_per_pause']:+.4f} KiB/pause; "
                  + (f"{m['sqlite_cache_slope_kib_per_pause']:+.4f} KiB/pause"
                     if m.get('sqlite_cache_slope_kib_per_pause') is not None else "not reported")),
                 ("RssAnon slope, noise", f"{m['anon_slope_kib_per_pause']:+.4f} KiB/pause, {m['anon_noise_kib']} KiB"),
                 ("descriptors at warm-up → end", f"{w['fds']} → {e['fds']}"),
                 ("database at the end; largest log", f"{e['store_bytes'] / 1024:,.0f} KiB; "
                  f"{max(s['wal_bytes'] for s in results['samples'] + [e]) / 1024:,.0f} KiB"),
                 ("messages without rows", str(e["messages_without_rows"]))]
    rows.append(("the relay at SIGTERM", results.get("relay_ending_problem") or results.get("relay_ending", "–")))
    if results.get("stopped_early"):
        rows.append(("stopped early", results["stopped_early"]))
    failed = [name for name, ok in results.get("checks", {}).items() if not ok]
    rows.append(("failed checks", ", ".join(failed) or "none"))
    return "\n".join(lines + [f"| {name} | {value} |" for name, value in rows])


# MARK: - bench

def bench_table(results: dict) -> str:
    bench = load("bench/run.py", "bench_run")  # the same table `make bench` prints
    lines = [stamp(results, "`make bench`"), "", bench.table(results)]
    if results.get("relay_endings"):
        lines += ["", "The run failed: " + "; ".join(results["relay_endings"])]
    return "\n".join(lines)


# MARK: - writing

TABLES = {"chaos": ("docs/testing.md", chaos_table), "soak": ("docs/testing.md", soak_table),
          "bench": ("docs/benchmarks.md", bench_table)}


def replace(text: str, name: str, table: str) -> str:
    begin, end = f"<!-- latest-run {name}: begin -->", f"<!-- latest-run {name}: end -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"latest-run: no '{begin}' ... '{end}' markers")
    note = "<!-- written by tools/latest-run.py (make docs-tables); edits here are overwritten -->"
    return pattern.sub(lambda _: f"{begin}\n{note}\n{table}\n{end}", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="chaos,soak,bench")
    parser.add_argument("--chaos", default=os.path.join(ROOT, "chaos", "results.json"))
    parser.add_argument("--soak", default=os.path.join(ROOT, "bench", "soak-results.json"))
    parser.add_argument("--bench", default=os.path.join(ROOT, "bench", "results.json"))
    parser.add_argument("--docs", default=ROOT, help="where docs/ is (a copy, to try it)")
    args = parser.parse_args()
    for name in args.only.split(","):
        doc, make = TABLES[name]
        source = getattr(args, name)
        if not os.path.exists(source):
            print(f"latest-run: no {os.path.relpath(source, ROOT)}: the {name} table is left as it is", file=sys.stderr)
            continue
        with open(source) as f:
            table = make(json.load(f))
        path = os.path.join(args.docs, doc)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(replace(text, name, table))
        print(f"latest-run: the {name} table in {doc} from {os.path.relpath(source, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
