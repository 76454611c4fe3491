#!/usr/bin/env python3
"""Lines per top-level module of src/ at two git revisions, side by side.

    python3 scripts/module-lines.py [BEFORE [AFTER]]     (default: 29b1e3e HEAD)

A top-level module is the first path component under src/, with `.rs`
dropped, so `src/copy.rs` and `src/copy/` count together as `copy`, and
`src/bin/` (the fmrun and fastmsg-info programs) is `bin`. Every file under
src/ counts (Rust and the C shim). Two counts per module: all lines, and
code lines (neither blank nor only a `//` comment, doc comments included
in the comments; lines of `#[cfg(test)]` modules are code). Reads the
revisions through git alone: the work tree is not touched.
"""

import subprocess
import sys
from collections import defaultdict


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], check=True, capture_output=True).stdout


def module_of(path: str) -> str:
    first = path.split("/")[1]
    return first[:-3] if first.endswith(".rs") else first


def counts(rev: str) -> dict[str, tuple[int, int]]:
    names = git("ls-tree", "-r", "--name-only", rev, "--", "src/").decode().split("\n")
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in filter(None, names):
        text = git("show", f"{rev}:{path}").decode("utf-8", errors="replace")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        code = sum(1 for l in lines if l.strip() and not l.strip().startswith("//"))
        t = total[module_of(path)]
        t[0] += len(lines)
        t[1] += code
    return {m: (a, c) for m, (a, c) in total.items()}


def main() -> None:
    before = sys.argv[1] if len(sys.argv) > 1 else "29b1e3e"
    after = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    short = lambda r: git("rev-parse", "--short", r).decode().strip()
    b, a = counts(before), counts(after)
    print(f"# lines per top-level module of src/: {before} ({short(before)}) -> {after} ({short(after)})")
    print(f"# python3 scripts/module-lines.py {before} {after}")
    print("# all = every line; code = neither blank nor only a // comment")
    head = ("module", "all before", "all after", "delta", "code before", "code after", "delta")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    rows = sorted(set(b) | set(a))
    sums = [0, 0, 0, 0]
    for m in rows:
        (ab, cb), (aa, ca) = b.get(m, (0, 0)), a.get(m, (0, 0))
        sums = [sums[0] + ab, sums[1] + aa, sums[2] + cb, sums[3] + ca]
        gone = " (gone)" if m not in a else " (new)" if m not in b else ""
        print(f"| {m}{gone} | {ab} | {aa} | {aa - ab:+d} | {cb} | {ca} | {ca - cb:+d} |")
    ab, aa, cb, ca = sums
    print(f"| **total** | {ab} | {aa} | {aa - ab:+d} | {cb} | {ca} | {ca - cb:+d} |")


if __name__ == "__main__":
    main()
