#!/usr/bin/env bash
# Two builds of fastmsg side by side, alternating within one run: 0 B,
# 64 B and 1 KiB one-way latency and message rate (examples/pingpong over
# shared memory, two ranks), the empty `extract` and the 0 B self-send in
# bursts of 32 (examples/overhead, one thread: the least disturbed by
# other load).
# Issue 13's speed clause ("unchanged or better in one interleaved run").
#
#   scripts/interleave.sh BASE_DIR NEW_DIR [ROUNDS]    (default 5)
#
# Each DIR is a checkout with release builds of fmrun, pingpong and
# overhead, each run with its own fmrun:
#   cargo build --release --bin fmrun
#   cargo build --release -p fastmsg-examples --example pingpong --example overhead
# Every round runs base then new (pingpong --runs 3, overhead --runs 3) and
# prints each side's figures with the 1-minute load average before it; the
# summary is the median over rounds per side, new/base, and the median of
# the per-round ratios; rounds in the host's slow mode are left out (and
# their 0 B rows shown apart). "p50 grouped" (where the pingpong reports
# it) is the median read between the clock's steps. On a busy host the
# ratios are what to compare, not the nanoseconds.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,18p' "$0"; exit 2; }
BASE=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-5}
for d in "$BASE" "$NEW"; do
    for f in target/release/fmrun target/release/examples/pingpong target/release/examples/overhead; do
        [ -x "$d/$f" ] || { echo "missing $d/$f (build it first, see the header)"; exit 1; }
    done
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

one() { # side dir round
    local side=$1 dir=$2 round=$3 load
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$dir/target/release/fmrun" -n 2 "$dir/target/release/examples/pingpong" \
        --json --sizes 0,64,1024 --runs 3 >"$OUT/$side.$round.pp"
    "$dir/target/release/examples/overhead" --only empty --runs 3 >"$OUT/$side.$round.ov"
    "$dir/target/release/examples/overhead" --only fn-burst --runs 3 >>"$OUT/$side.$round.ov"
    echo "$load" >"$OUT/$side.$round.load"
    printf 'round %s %-4s load %5s  ' "$round" "$side" "$load"
    jq -r '"\(.size) B: \(.one_way_ns_mean) ns \(.msg_rate_m_s) M/s"' "$OUT/$side.$round.pp" | paste -sd' ' | tr -d '\n'
    printf '  empty %s ns  burst %s ns\n' "$(awk '/empty extract/ {print $3}' "$OUT/$side.$round.ov")" \
        "$(awk '/bursts of 32/ {print $(NF-5)}' "$OUT/$side.$round.ov")"
}

for r in $(seq 1 "$ROUNDS"); do
    one base "$BASE" "$r"
    one new "$NEW" "$r"
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
med = statistics.median
def side(name):
    """Per round, each figure of one side: {figure: [value per round]}."""
    m = {}
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{name}.{r}.pp"):
            j = json.loads(line)
            s = j["size"]
            m.setdefault(f"{s} B one-way mean (ns)", []).append(j["one_way_ns_mean"])
            m.setdefault(f"{s} B one-way p50 (ns)", []).append(j["one_way_ns_p50"])
            if j.get("one_way_ns_p50_grouped") is not None:
                m.setdefault(f"{s} B p50 grouped (ns)", []).append(j["one_way_ns_p50_grouped"])
            m.setdefault(f"{s} B rate (M msg/s)", []).append(j["msg_rate_m_s"])
        for line in open(f"{out}/{name}.{r}.ov"):
            if line.startswith("empty extract"):
                m.setdefault("empty extract (ns)", []).append(float(line.split()[2]))
            if "bursts of 32" in line:
                m.setdefault("0 B self-send, burst (ns)", []).append(float(line.split()[-6]))
        m.setdefault("load average", []).append(float(open(f"{out}/{name}.{r}.load").read()))
    return m
b, n = side("base"), side("new")
# This VM at times runs everything ~4x slower for minutes (the raw cache-line
# ping-pong goes from ~60 to ~290 ns). A round where either side's 0 B
# one-way is over twice the run's fastest is in that mode: it is counted,
# shown, and left out of the medians, since it says nothing about the code.
key = "0 B one-way mean (ns)"
floor = min(b[key] + n[key])
kept = [r for r in range(rounds) if max(b[key][r], n[key][r]) < 2 * floor]
print(f"\n{rounds} rounds, {rounds - len(kept)} in the host's slow mode (0 B over {2 * floor:.0f} ns) left out")
if not kept:
    sys.exit("no round outside the slow mode: rerun on a quieter host")
print(f"medians over the {len(kept)} kept rounds; last column: median of the per-round ratios (paired)")
print(f"{'':28} {'base':>10} {'new':>10} {'new/base':>9} {'paired':>8}")
for k in b:
    bv = [b[k][r] for r in kept]
    nv = [n[k][r] for r in kept]
    pr = med([nv[i] / bv[i] for i in range(len(kept)) if bv[i]])
    print(f"{k:28} {med(bv):10.2f} {med(nv):10.2f} {med(nv) / med(bv):9.3f} {pr:8.3f}")
slow = [r for r in range(rounds) if r not in kept]
if slow:
    print(f"\nthe {len(slow)} slow-mode rounds alone (cross-core transfers ~4x slower), same columns")
    for k in b:
        if not k.startswith("0 B"):
            continue
        bv = [b[k][r] for r in slow]
        nv = [n[k][r] for r in slow]
        pr = med([nv[i] / bv[i] for i in range(len(slow)) if bv[i]])
        print(f"{k:28} {med(bv):10.2f} {med(nv):10.2f} {med(nv) / med(bv):9.3f} {pr:8.3f}")
EOF
