#!/usr/bin/env bash
# Two builds of fastmsg-handlers side by side, alternating within one run:
# collective latency (examples/collectives: barrier and allreduce by the
# automatic and the message algorithms, 1 f64; a broadcast then a reduce
# of 1 f64, `--rooted`), N ranks over shared memory.
#
#   scripts/coll-interleave.sh BASE_DIR NEW_DIR [ROUNDS] [RANKS]   (5; "2 4")
#
# Each DIR is a checkout with release builds of fmrun and the example:
#   cargo build --release -p fastmsg --bin fmrun
#   cargo build --release -p fastmsg-examples --example collectives
# (the base must have `--rooted`: examples/collectives.rs from this change
# on). Every round runs base then new and prints the 1-minute load average
# before each; the summary is, per operation and rank count, each side's
# median over rounds, new/base, and the median of the per-round ratios. On
# a busy host the ratios are what to compare, not the microseconds.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
BASE=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-5}
RANKS=${4:-"2 4"}
for d in "$BASE" "$NEW"; do
    for f in target/release/fmrun target/release/examples/collectives; do
        [ -x "$d/$f" ] || { echo "missing $d/$f (build it first, see the header)"; exit 1; }
    done
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for round in $(seq 1 "$ROUNDS"); do
    for n in $RANKS; do
        for side in base new; do
            dir=$BASE
            [ "$side" = new ] && dir=$NEW
            load=$(cut -d' ' -f1 /proc/loadavg)
            echo "round $round, $n ranks, $side (load $load)"
            "$dir/target/release/fmrun" -n "$n" "$dir/target/release/examples/collectives" \
                --json --iters 3000 --runs 3 --settle 300 --elems 1 --rooted 1 \
                --barrier auto,dissemination --allreduce auto,recursive-doubling \
                | sed "s/^/$side $round $n /" | tee -a "$OUT/all"
        done
    done
done
python3 - "$OUT/all" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, rnd, n, js = line.split(' ', 3)
    j = json.loads(js)
    key = (int(n), j['op'], j['algo'].split('=')[0] if j['algo'].startswith('auto') else j['algo'])
    rows.setdefault(key, {}).setdefault(int(rnd), {})[side] = j['latency_us']
print(f"{'ranks':>5} {'op':<13} {'algo':<20} {'base us':>9} {'new us':>9} {'new/base':>9} {'median of ratios':>17}")
for key in sorted(rows):
    r = rows[key]
    both = [v for v in r.values() if 'base' in v and 'new' in v]
    b = statistics.median(v['base'] for v in both)
    nw = statistics.median(v['new'] for v in both)
    ratio = statistics.median(v['new'] / v['base'] for v in both)
    print(f"{key[0]:>5} {key[1]:<13} {key[2]:<20} {b:>9.3f} {nw:>9.3f} {nw / b:>9.3f} {ratio:>17.3f}")
PY
