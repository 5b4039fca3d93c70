#!/usr/bin/env python3
"""Lists Swift functions (func, init, deinit, closures assigned to properties excluded) longer than a limit.

  tools/long_functions.py [--limit 60] [paths...]   (default: Sources)

A function's length is counted from the line of its declaration to the line of its closing brace, inclusive.
Exits 1 when any function is over the limit, so `make lint` can hold the line.
"""
import argparse
import os
import re
import sys

DECL = re.compile(r"^\s*(?:@[\w()]+\s+)*(?:(?:public|private|fileprivate|internal|package|static|class|final|override|"
                  r"mutating|nonmutating|nonisolated|convenience|required|isolated|@\w+)\s+)*"
                  r"(?:func\s+[^\s(<]+|init[?!]?|deinit)\b")


def strip_strings(line: str) -> str:
    """Removes string literals and // comments so braces inside them don't count (multi-line strings are rare
    enough in function bodies that they are handled by the caller's state)."""
    out, i, quote = [], 0, False
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif line.startswith("//", i):
            break
        else:
            out.append(c)
        i += 1
    return "".join(out)


def functions(path: str):
    lines = open(path, encoding="utf-8").read().split("\n")
    in_multiline = False
    depth = 0
    stack = []  # (name, start line, depth at which its body opened)
    for number, raw in enumerate(lines, 1):
        if raw.count('"""') % 2 == 1:
            in_multiline = not in_multiline
            continue
        if in_multiline:
            continue
        line = strip_strings(raw)
        match = DECL.match(line)
        if match:
            stack.append([match.group(0).strip(), number, None])
        for c in line:
            if c == "{":
                depth += 1
                if stack and stack[-1][2] is None:
                    stack[-1][2] = depth
            elif c == "}":
                if stack and stack[-1][2] == depth:
                    name, start, _ = stack.pop()
                    yield name, start, number
                depth -= 1
        # A protocol requirement (no body) is not a function to measure.
        if stack and stack[-1][2] is None and match and "{" not in line and not line.rstrip().endswith(("(", ",", "->")):
            if not re.search(r"[({,]\s*$", line):
                stack.pop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("paths", nargs="*", default=["Sources"])
    args = parser.parse_args()
    over = []
    for root in args.paths:
        for directory, _, files in os.walk(root):
            for name in files:
                if name.endswith(".swift"):
                    path = os.path.join(directory, name)
                    for fn, start, end in functions(path):
                        if end - start + 1 > args.limit:
                            over.append((end - start + 1, f"{path}:{start}", fn))
    for length, where, fn in sorted(over, reverse=True):
        print(f"{length:4d} lines  {where}  {fn}")
    print(f"{len(over)} functions over {args.limit} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
