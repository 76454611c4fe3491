#!/usr/bin/env bash
# The engine's software overhead (examples/overhead) of several builds,
# side by side, over many heap placements: for each --heap-pad in
# 0, STEP, 2*STEP, ... (COUNT values) every build runs once, in turn; then
# per build the median, quartiles and range over placements (ns).
#
#   scripts/overhead-sweep.sh ONLY STEP COUNT LABEL=DIR ...
#
#   scripts/overhead-sweep.sh empty 64 65 main=. old=../old
#
# ONLY is overhead's --only (empty, fn, async, fn-burst). Each DIR is a
# checkout with a release build of the example (cargo build --release -p
# fastmsg-examples --example overhead). One placement can favour either
# build at this scale (docs/engine.md, "Store forwarding and placement"):
# compare medians over placements, from one run. Keep STEP * COUNT under
# glibc's mmap threshold (128 KiB): a larger pad moves nothing.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,16p' "$0"; exit 2; }
ONLY=$1 STEP=$2 COUNT=$3; shift 3
for spec in "$@"; do
    d=${spec#*=}
    [ -x "$d/target/release/examples/overhead" ] || { echo "missing release overhead in $d"; exit 1; }
done
for k in $(seq 0 $((COUNT - 1))); do
    for spec in "$@"; do
        label=${spec%%=*}; d=${spec#*=}
        ns=$("$d/target/release/examples/overhead" --only "$ONLY" --runs 1 \
            --iters 5000000 --heap-pad $((k * STEP)) | grep -oE '[0-9.]+ ns' | head -1 | cut -d' ' -f1)
        echo "$label $ns"
    done
done | python3 -c '
import sys, statistics as s
m = {}
for l in sys.stdin:
    d, v = l.split()
    m.setdefault(d, []).append(float(v))
for d, v in m.items():
    q = s.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
    print("%-10s median %.2f ns  quartiles %.2f-%.2f  range %.2f-%.2f  placements %d"
          % (d, s.median(v), q[0], q[2], min(v), max(v), len(v)))
'
