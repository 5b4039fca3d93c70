#!/usr/bin/env python3
"""What promtool doesn't check in deploy/prometheus: the alerts' annotations, their tests, and the inhibitions.

- Every rule in alerts.yaml has a summary, a description naming the instance ({{ $labels.instance }}) and the value
  ({{ $value }}, piped or not), and a runbook_url ending in docs/operations.md#<alert name lower-cased>, with the
  same address before the `#` for all, whose anchor is a heading of docs/operations.md (GitHub's heading anchors).
- Every alert has a promtool test in alerts.test.yaml that expects it to fire and one that expects it silent.
- alertmanager-inhibit.example.yaml holds only inhibit_rules with Alertmanager's fields; its matchers parse; every
  alert name its alertname matchers can match is one in alerts.yaml; a rule's source and target alerts differ; every
  `equal` label is one the alerts carry (job and instance from the scrape, or a rule label). With amtool on PATH (or
  --amtool), `amtool check-config` must accept a minimal configuration around it and refuse one with a broken
  matcher.

Exits 1 listing every problem, 2 when the files can't be read.
usage: check-alerts.py [--dir deploy/prometheus] [--docs docs/operations.md] [--amtool PATH]
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

RULE_FIELDS = {"source_matchers", "target_matchers", "equal", "source_match", "source_match_re", "target_match",
               "target_match_re"}
MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')
SCRAPE_LABELS = {"job", "instance"}


def github_anchor(heading):
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(markdown):
    anchors, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            anchors.add(github_anchor(match.group(1)))
    return anchors


def in_template(text, pattern):
    """Whether some {{ ... }} action of a Go template mentions `pattern`."""
    return any(re.search(pattern, action) for action in re.findall(r"\{\{(.*?)\}\}", text, re.S))


class Checker:
    def __init__(self):
        self.problems = []

    def expect(self, condition, problem):
        if not condition:
            self.problems.append(problem)

    def rules(self, rules, anchors):
        bases = set()
        for rule in rules:
            name, notes = rule["alert"], rule.get("annotations", {})
            self.expect(notes.get("summary"), f"alerts.yaml: {name} has no summary")
            description = notes.get("description", "")
            self.expect(in_template(description, r"\$labels\.instance\b"),
                        f"alerts.yaml: {name}'s description doesn't name the instance ({{{{ $labels.instance }}}})")
            self.expect(in_template(description, r"\$value\b"),
                        f"alerts.yaml: {name}'s description doesn't give the value ({{{{ $value }}}})")
            url = notes.get("runbook_url", "")
            base, _, anchor = url.partition("#")
            bases.add(base)
            self.expect(base.endswith("docs/operations.md") and anchor == name.lower(),
                        f"alerts.yaml: {name}'s runbook_url {url!r} is not …docs/operations.md#{name.lower()}")
            self.expect(anchor in anchors, f"alerts.yaml: {name}'s runbook anchor #{anchor} is no heading of "
                                           f"docs/operations.md")
        self.expect(len(bases) <= 1, f"alerts.yaml: the runbook_urls differ before their anchors: {sorted(bases)}")

    def tests(self, names, tests):
        firing, silent = set(), set()
        for test in tests.get("tests", []):
            for case in test.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else silent).add(case["alertname"])
        for name in names:
            self.expect(name in firing, f"alerts.test.yaml: no test expects {name} to fire")
            self.expect(name in silent, f"alerts.test.yaml: no test expects {name} to stay silent")

    def inhibitions(self, config, rules):
        names = {rule["alert"] for rule in rules}
        carried = SCRAPE_LABELS | {key for rule in rules for key in rule.get("labels", {})}
        self.expect(set(config) == {"inhibit_rules"}, f"inhibit example: top-level keys {sorted(config)}, "
                                                      f"not only inhibit_rules")
        for index, rule in enumerate(config.get("inhibit_rules") or [], 1):
            where = f"inhibit rule {index}"
            self.expect(set(rule) <= RULE_FIELDS, f"{where}: unknown fields {sorted(set(rule) - RULE_FIELDS)}")
            sides = {}
            for side in ("source", "target"):
                matchers = rule.get(f"{side}_matchers", [])
                self.expect(matchers, f"{where}: no {side}_matchers")
                sides[side] = self.alerts_matched(where, matchers, names)
            self.expect(not (sides["source"] & sides["target"]),
                        f"{where}: {sorted(sides['source'] & sides['target'])} would inhibit itself")
            for label in rule.get("equal", []):
                self.expect(label in carried, f"{where}: equal names {label!r}, which no alert carries")

    def alerts_matched(self, where, matchers, names):
        """The alert names a rule side's alertname matchers select, each checked to exist."""
        matched = set()
        for text in matchers:
            match = MATCHER.match(text)
            if not match:
                self.problems.append(f"{where}: matcher {text!r} doesn't parse (label, =, !=, =~ or !~, quoted value)")
                continue
            label, operator, value = match.groups()
            if label != "alertname":
                continue
            if operator == "=":
                self.expect(value in names, f"{where}: alertname {value!r} is no alert in alerts.yaml")
                matched.add(value)
            elif operator == "=~":
                for part in value.split("|"):
                    self.expect(part in names, f"{where}: alertname=~ part {part!r} is no alert in alerts.yaml")
                    matched.add(part)
        return matched

    def amtool(self, config, amtool):
        def check(inhibit_rules):
            body = {"route": {"receiver": "none"}, "receivers": [{"name": "none"}], "inhibit_rules": inhibit_rules}
            with tempfile.NamedTemporaryFile("w", suffix=".yml") as file:
                yaml.safe_dump(body, file)
                file.flush()
                result = subprocess.run([amtool, "check-config", file.name], capture_output=True, text=True)
                return result.returncode, result.stdout + result.stderr
        code, _ = check([{"source_matchers": ['alertname=~"unclosed'], "target_matchers": ["alertname=x"]}])
        self.expect(code != 0, f"{amtool} accepted a broken matcher; its check proves nothing")
        code, output = check(config.get("inhibit_rules"))
        self.expect(code == 0, f"amtool check-config refuses the inhibit example:\n{output}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="deploy/prometheus", type=Path)
    parser.add_argument("--docs", default="docs/operations.md", type=Path)
    parser.add_argument("--amtool", default=shutil.which("amtool"))
    args = parser.parse_args()
    rules = [rule for group in yaml.safe_load((args.dir / "alerts.yaml").read_text())["groups"]
             for rule in group["rules"] if "alert" in rule]
    inhibit = yaml.safe_load((args.dir / "alertmanager-inhibit.example.yaml").read_text())
    checker = Checker()
    checker.rules(rules, headings(args.docs.read_text()))
    checker.tests([rule["alert"] for rule in rules], yaml.safe_load((args.dir / "alerts.test.yaml").read_text()))
    checker.inhibitions(inhibit, rules)
    if args.amtool:
        checker.amtool(inhibit, args.amtool)
    if checker.problems:
        print("\n".join(f"{args.dir}: {p}" for p in checker.problems))
        sys.exit(1)
    print(f"{args.dir}: {len(rules)} alerts annotated, runbooks in {args.docs}, each tested firing and silent; "
          f"{len(inhibit['inhibit_rules'])} inhibit rules name only these alerts"
          f"{' (amtool check-config: valid)' if args.amtool else ' (amtool not installed: not run)'}")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 (any failure to read is exit 2, not a finding)
        print(f"check-alerts.py: cannot check: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)
