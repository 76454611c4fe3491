#!/usr/bin/env python3
"""The import graph of src/ and the check that it only goes downward.

    scripts/layers.py graph   module -> module edges, with the files behind each
    scripts/layers.py check   exit 1 on an import that goes up (or sideways)

The layer order is the table in src/lib.rs's module doc, between the lines
`layers:begin` and `layers:end`: one layer a line, the lowest first, a line
holding its modules (top-level modules of `src/`). A module may name (in
`use crate::…`, or a `crate::x::…` path anywhere in code) only itself and
modules of lower layers. Comments are ignored (doc links may point
anywhere), and so are test-only files (`tests.rs`, `*_tests.rs`): tests may
drive a layer from above (e.g. through the thread launcher). `src/bin/` are
separate crates that use the public API; `src/lib.rs` is the root that
re-exports.

Inside a module: a folder module whose `mod.rs` module doc holds a table
of the same form (its sub-modules, one layer a line, the highest first)
is checked the same way one level down: a file of sub-module `a` may name
(through `crate::m::b`, `super::b` or `self::b` paths) only `a` itself,
sub-modules of lower layers, and the items `mod.rs` itself defines (the
module's root, which declares and re-exports, as `src/lib.rs` does for the
crate). Tables nest: a sub-module with its own table is checked inside too.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "src")


def layers():
    text = open(os.path.join(SRC, "lib.rs")).read()
    m = re.search(r"layers:begin\n(.*?)\n//!\s*layers:end", text, re.S)
    if not m:
        sys.exit("layers.py: no `layers:begin` … `layers:end` table in src/lib.rs")
    rank = {}
    rows = [l.removeprefix("//!").strip() for l in m.group(1).splitlines()]
    # A row whose module column is empty continues the row above.
    rows = [r for r in rows if r.split("|")[0].strip()]
    # The table in lib.rs lists the highest layer first.
    for i, row in enumerate(reversed(rows)):
        mods = row.split("|")[0].split()
        for mod in mods:
            rank[mod] = i
    return rank


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def crate_refs(text):
    """Top-level modules named by `crate::` paths, with `use crate::{a, b::c}`."""
    names = set()
    for m in re.finditer(r"\bcrate::\{", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        inner, d, cur, parts = text[m.end():i - 1], 0, "", []
        for c in inner:
            if c == "," and d == 0:
                parts.append(cur)
                cur = ""
                continue
            d += {"{": 1, "}": -1}.get(c, 0)
            cur += c
        parts.append(cur)
        for p in parts:
            w = re.match(r"\s*(\w+)", p)
            if w and w.group(1) != "self":
                names.add(w.group(1))
    names.update(re.findall(r"\bcrate::(\w+)", text))
    return names


def module_of(path):
    rel = os.path.relpath(path, SRC)
    return rel.split(os.sep)[0].removesuffix(".rs")


def edges():
    out = defaultdict(set)
    for dirpath, _, files in os.walk(SRC):
        for f in files:
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, SRC)
            if not f.endswith(".rs") or rel.startswith("bin" + os.sep) or rel == "lib.rs":
                continue
            src = module_of(path)
            for dst in crate_refs(strip_comments(open(path).read())):
                if dst != src:
                    out[(src, dst)].add(rel)
    return out


def module_path(rel):
    """`transport/net/setup.rs` -> ["transport", "net", "setup"]; a
    `mod.rs` is its folder's module."""
    parts = rel.removesuffix(".rs").split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return parts


def path_refs(text, here, is_root):
    """Module paths named by `crate::`, `super::` and `self::` paths
    (with `{a, b::c}` groups), resolved from module `here`."""
    refs = []
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)*)::(\{|\w+)", text):
        head, mid, last = m.group(1), m.group(2), m.group(3)
        if head == "crate":
            base = []
        elif head == "super":
            base = here[:-1] if is_root else here[:-1]
        else:
            base = list(here)
        names = [n for n in mid.split("::") if n]
        if last == "{":
            depth, i = 1, m.end()
            while depth and i < len(text):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            for first in re.findall(r"(?:^|,)\s*(\w+)", text[m.end():i - 1]):
                if first != "self":
                    refs.append(base + names + [first])
            refs.append(base + names)
        else:
            refs.append(base + names + [last])
    return refs


def inner_tables():
    """Each folder module whose mod.rs declares a layers table: its path
    and the rank of each sub-module."""
    out = {}
    for dirpath, _, files in os.walk(SRC):
        if "mod.rs" not in files:
            continue
        text = open(os.path.join(dirpath, "mod.rs")).read()
        m = re.search(r"layers:begin\n(.*?)\n//!\s*layers:end", text, re.S)
        if not m:
            continue
        rows = [l.removeprefix("//!").strip() for l in m.group(1).splitlines()]
        rows = [r for r in rows if r.split("|")[0].strip()]
        rank = {}
        for i, row in enumerate(reversed(rows)):
            for mod in row.split("|")[0].split():
                rank[mod] = i
        out[tuple(module_path(os.path.relpath(os.path.join(dirpath, "mod.rs"), SRC)))] = rank
    return out


def inner_check():
    """Edges between sub-modules of modules with a table: (bad lines, count)."""
    tables, bad, n = inner_tables(), [], 0
    seen = set()
    for table, rank in tables.items():
        folder = os.path.join(SRC, *table)
        subs = {f.removesuffix(".rs") for f in os.listdir(folder)
                if (f.endswith(".rs") and f != "mod.rs") or os.path.isdir(os.path.join(folder, f))}
        for sub in sorted(subs - set(rank)):
            if not is_test_file(sub + ".rs"):
                bad.append(f"{'::'.join(table)}::{sub} is in no layer of its mod.rs table")
    for dirpath, _, files in os.walk(SRC):
        for f in files:
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, SRC)
            if not f.endswith(".rs") or rel.startswith("bin" + os.sep) or rel == "lib.rs" or is_test_file(rel):
                continue
            here = module_path(rel)
            text = strip_comments(open(path).read())
            for ref in path_refs(text, here, f == "mod.rs"):
                for table, rank in tables.items():
                    k = len(table)
                    if here[:k] != list(table) or ref[:k] != list(table):
                        continue
                    if len(here) <= k or len(ref) <= k or here[k] == ref[k]:
                        continue
                    a, b = here[k], ref[k]
                    if b not in rank:
                        continue  # an item of the module's root
                    if a not in rank:
                        continue  # reported above
                    if (table, a, b) not in seen:
                        seen.add((table, a, b))
                        n += 1
                    if rank[b] >= rank[a]:
                        how = "sideways (same layer)" if rank[b] == rank[a] else "up"
                        bad.append(f"{'::'.join(table)}: {a} -> {b} goes {how}: src/{rel}")
    return sorted(set(bad)), n


def is_test_file(rel):
    name = os.path.basename(rel)
    return name == "tests.rs" or name.endswith("_tests.rs")


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else "graph"
    rank, es = layers(), edges()
    if cmd == "graph":
        for (a, b), files in sorted(es.items(), key=lambda e: (-rank.get(e[0][0], 99), e[0])):
            up = "" if rank.get(b, 99) < rank.get(a, -1) else "   <-- UP"
            tests = " (tests only)" if all(is_test_file(f) for f in files) else ""
            print(f"{a:>10} -> {b:<10} {len(files):3} file(s){tests}{up}")
        return 0
    if cmd != "check":
        sys.exit(__doc__)
    bad = []
    mods = {module_of(os.path.join(dp, f)) for dp, _, fs in os.walk(SRC) for f in fs
            if f.endswith(".rs") and not os.path.relpath(os.path.join(dp, f), SRC).startswith("bin")}
    mods.discard("lib")
    for m in sorted(mods - set(rank)):
        bad.append(f"module `{m}` is in no layer of src/lib.rs's table")
    for (a, b), files in sorted(es.items()):
        files = sorted(f for f in files if not is_test_file(f))
        if files and b in rank and a in rank and rank[b] >= rank[a]:
            how = "sideways (same layer)" if rank[b] == rank[a] else "up"
            bad.append(f"{a} -> {b} goes {how}: src/{', src/'.join(files)}")
    inner_bad, inner_n = inner_check()
    bad += inner_bad
    if bad:
        print("house rules: imports must go down the layers of src/lib.rs (and of"
              " each mod.rs that declares a table):", file=sys.stderr)
        for b in bad:
            print("  " + b, file=sys.stderr)
        return 1
    print(f"layers: ok ({len(es)} module edges and {inner_n} edges inside"
          f" {len(inner_tables())} modules, all downward)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
