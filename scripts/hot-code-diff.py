#!/usr/bin/env python3
"""Are two builds' hot functions the same code at different addresses?

    scripts/hot-code-diff.py BIN_A BIN_B [REGEX]

Disassembles both binaries (objdump -d -C), normalises addresses and
symbol operands, and for every function whose name matches REGEX (default:
the 0-byte shared-memory path of examples/pingpong) prints SAME or DIFF,
its instruction count, its address in each build and that address modulo
64 (the cache-line offset the loop heads inherit). Two builds whose hot
functions are all SAME but sit at other offsets differ in code placement
only: a speed difference between them is placement, not code (issue 13's
bisect, BENCHMARKS.md "Code placement").
"""
import re
import subprocess
import sys

HOT = (r"Core::(deliver|perform|progress_busy|run_fast_async|run_fast_piece|release|after_run"
       r"|send_waiting|poll_wide|progress_round)|wait_until|Waiter::idle"
       r"|ShmTransport as .*(commit|try_reserve)|RecvQueue::publish|ShmTransport::(send|poll)")


def functions(binary):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", binary],
                         check=True, capture_output=True, text=True).stdout
    funcs, addr, cur = {}, {}, None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if m:
            # Several monomorphised copies can share a name: number them.
            cur, k = m.group(2), 1
            while cur in funcs:
                k += 1
                cur = f"{m.group(2)} #{k}"
            funcs[cur] = []
            addr[cur] = int(m.group(1), 16)
            continue
        if cur and "\t" in line:
            ins = line.split("\t", 1)[1].strip()
            ins = re.sub(r"<[^>]*>", "", ins)
            ins = re.sub(r"\b(0x)?[0-9a-f]{5,}\b", "ADDR", ins)
            funcs[cur].append(ins)
    return funcs, addr


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    hot = re.compile(sys.argv[3] if len(sys.argv) > 3 else HOT)
    (fa, aa), (fb, ab) = functions(sys.argv[1]), functions(sys.argv[2])
    names = sorted(n for n in fa if hot.search(n))
    if not names:
        sys.exit("no function matches")
    for n in names:
        if n not in fb:
            print(f"ONLY-A {len(fa[n]):5} {aa[n]:#10x} {'':10} {aa[n] % 64:3} {'':3} {n[:100]}")
            continue
        same = "SAME" if fa[n] == fb[n] else "DIFF"
        print(f"{same:6} {len(fa[n]):5} {aa[n]:#10x} {ab[n]:#10x} {aa[n] % 64:3} {ab[n] % 64:3} {n[:100]}")
    for n in sorted(n for n in fb if hot.search(n) and n not in fa):
        print(f"ONLY-B {len(fb[n]):5} {'':10} {ab[n]:#10x} {'':3} {ab[n] % 64:3} {n[:100]}")


if __name__ == "__main__":
    main()
