#!/usr/bin/env bash
# Several builds, or one build under several settings, side by side in one
# run: the 0 B ping-pong of each VARIANT in turn, ROUNDS times, then per
# variant the medians over rounds of the one-way p50, grouped p50 and mean
# (ns) and of the message rate (M msg/s), with the rate's ratio to the
# first variant's.
#
#   scripts/variants.sh ROUNDS LABEL=DIR[,VAR=VALUE...] ...
#
#   scripts/variants.sh 21 main=. old=../old
#   scripts/variants.sh 15 ded=. shared=.,FASTMSG_QUEUES=1
#
# Each DIR is a checkout with release builds of fmrun and the example
# (cargo build --release -p fastmsg --bin fmrun; cargo build --release -p
# fastmsg-examples --example pingpong) whose pingpong reports
# one_way_ns_p50_grouped. On a busy or mode-switching host compare the
# ratios of one run, never figures of two runs. Where the host switches
# between a fast and a slow mode of cross-core transfers, the rounds of
# each mode are reported apart (a round whose one-way p50 exceeds SLOW_NS,
# default 150, is slow); the ratio is to the first variant of that mode.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,20p' "$0"; exit 2; }
R=$1; shift
for spec in "$@"; do
    rest=${spec#*=}; d=${rest%%,*}
    [ -x "$d/target/release/fmrun" ] && [ -x "$d/target/release/examples/pingpong" ] \
        || { echo "missing release fmrun or pingpong in $d"; exit 1; }
done
for _ in $(seq 1 "$R"); do
    for spec in "$@"; do
        label=${spec%%=*}; rest=${spec#*=}; d=${rest%%,*}; envs=()
        if [[ $rest == *,* ]]; then IFS=, read -r -a envs <<<"${rest#*,}"; fi
        env "${envs[@]}" "$d/target/release/fmrun" -n 2 "$d/target/release/examples/pingpong" \
            --json --sizes 0 --runs 3 |
            jq -r --arg d "$label" '"\($d) \(.one_way_ns_p50) \(.one_way_ns_p50_grouped) \(.one_way_ns_mean) \(.msg_rate_m_s)"'
    done
done | SLOW_NS=${SLOW_NS:-150} python3 -c '
import os, sys, statistics as s
slow = float(os.environ["SLOW_NS"])
m = {}
for l in sys.stdin:
    d, *v = l.split()
    v = [float(x) for x in v]
    m.setdefault("slow" if v[0] > slow else "fast", {}).setdefault(d, []).append(v)
for mode, mm in sorted(m.items()):
    if len(m) > 1:
        print("== %s mode (one-way p50 %s %.0f ns)" % (mode, ">" if mode == "slow" else "<=", slow))
    first = None
    for d, v in mm.items():
        med = [s.median(x[i] for x in v) for i in range(4)]
        first = first or med
        print("%-10s p50 %.1f  p50 grouped %.2f  mean %.1f  rate %.2f (x%.3f)  rounds %d"
              % (d, *med, med[3] / first[3], len(v)))
'
