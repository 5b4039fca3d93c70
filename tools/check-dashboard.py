#!/usr/bin/env python3
"""Every PromQL expression in a Grafana dashboard must parse: each panel target's `expr` becomes a recording rule
in a throwaway rules file that `promtool check rules` reads (promtool has no offline query parser of its own).

Grafana's interval macros ($__rate_interval, $__interval, $__range) become `5m` first; `$job`-style variables are
left alone, since they only ever appear inside label matcher strings. Before the real check, a file with one broken
expression must be refused, so a promtool that accepts everything can't go unnoticed.

usage: check-dashboard.py DASHBOARD.json [PROMTOOL]
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MACROS = re.compile(r"\$__(rate_interval|interval|range)|\$\{__(rate_interval|interval|range)\}")


def expressions(node):
    """Every `expr` string in the dashboard, wherever a panel or a nested row keeps it."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def check(exprs, promtool):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "dashboard-rules.yaml"
        rules = [{"record": f"dashboard_expr_{i}", "expr": MACROS.sub("5m", expr)} for i, expr in enumerate(exprs)]
        # JSON is YAML: no YAML library needed.
        path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}, indent=1))
        result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
        return result.returncode, result.stdout + result.stderr


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    dashboard = json.loads(Path(sys.argv[1]).read_text())
    promtool = sys.argv[2] if len(sys.argv) > 2 else "promtool"
    exprs = list(expressions(dashboard))
    if not exprs:
        sys.exit(f"{sys.argv[1]}: no expressions found")
    code, _ = check(["sum(rate(prefect_push_pushes_total[5m])"], promtool)
    if code == 0:
        sys.exit("promtool accepted a broken expression; the check proves nothing")
    code, output = check(exprs, promtool)
    if code != 0:
        sys.exit(f"{sys.argv[1]}: an expression does not parse\n{output}")
    print(f"{sys.argv[1]}: {len(exprs)} expressions parse")


if __name__ == "__main__":
    main()
