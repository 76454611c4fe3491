#!/usr/bin/env bash
# The Bale kernels of several builds side by side in one run, beside the
# aggregated MPI programs: each round runs every KERNEL:RANKS for every
# DIR in turn (the word `mpi` runs ../shared/anchors/run.sh); each run
# does 3 repetitions and keeps their median; the table shows per build the
# median over rounds (M items/s) and the ratio to the first DIR.
#
#   scripts/bale-variants.sh ROUNDS "KERNEL:RANKS ..." DIR|mpi ...
#
#   scripts/bale-variants.sh 5 "ig:2 ig:4 histo:2" mpi ../before .
#
# Each DIR is a checkout with release builds of fmrun and the examples
# (cargo build --release -p fastmsg --bin fmrun -p fastmsg-examples
# --examples). On a mode-switching host compare the ratios of one run.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,15p' "$0"; exit 2; }
R=$1; K=$2; shift 2
ANCHORS=${ANCHORS_SH:-$(dirname "$0")/../../shared/anchors/run.sh}
for d in "$@"; do
    [ "$d" = mpi ] && { [ -x "$ANCHORS" ] || { echo "no anchors at $ANCHORS"; exit 1; }; continue; }
    [ -x "$d/target/release/fmrun" ] || { echo "missing release fmrun in $d"; exit 1; }
done
for _ in $(seq 1 "$R"); do
    for d in "$@"; do
        for k in $K; do
            IFS=: read -r kernel n <<<"$k"
            if [ "$d" = mpi ]; then
                v=$("$ANCHORS" "$kernel" "$n" --reps 3 2>/dev/null | grep -o '_per_s=[0-9.e+]*' | cut -d= -f2 | sort -g | sed -n 2p)
            else
                v=$("$d/target/release/fmrun" -n "$n" "$d/target/release/examples/$kernel" --reps 3 --json |
                    jq -r '.requests_per_s // .updates_per_s' | sort -g | sed -n 2p)
            fi
            echo "$d $kernel $n $v"
        done
    done
done | python3 -c '
import sys, statistics as s
m = {}
for l in sys.stdin:
    d, k, n, v = l.split()
    m.setdefault((k, n), {}).setdefault(d, []).append(float(v))
for (k, n), dd in m.items():
    med = {d: s.median(v) for d, v in dd.items()}
    first = next(iter(med.values()))
    print("%-6s %2s  " % (k, n) + "  ".join("%s %.1f (x%.3f)" % (d, v / 1e6, v / first) for d, v in med.items()))
'
