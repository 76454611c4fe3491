#!/usr/bin/env bash
# Two builds side by side, alternating within one run, on what the lazy
# connector touches: lazy start-up (the dials, the hand-over to the poll)
# and the empty extract with network rings (the poll's flag load).
#
#   scripts/lazy-bench.sh BASE_DIR NEW_DIR [ROUNDS [SIZES...]]   (default 5, sizes 16 64)
#
# Each DIR is a checkout with release builds of fmrun, startup and
# net_overhead:
#   cargo build --release -p fastmsg --bin fmrun
#   cargo build --release -p fastmsg-examples --example startup --example net_overhead
# Odd rounds run base then new, even rounds new then base (so that neither
# side always follows the other): scripts/startup-scale.sh --connect lazy
# --runs 1 --json at each size (this checkout's script, each side's
# binaries), then net_overhead --runs 3. The summary gives per side the
# median over rounds of start (median over ranks) and the fmrun wall time
# per size, and of each net_overhead layout, with the median of the
# per-round new/base ratios; the 1-minute load average of each round is
# printed. On a busy host compare the ratios, not the milliseconds.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,19p' "$0"; exit 2; }
BASE=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-5}
shift $(($# < 3 ? $# : 3))
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(16 64)
for d in "$BASE" "$NEW"; do
    for f in target/release/fmrun target/release/examples/startup target/release/examples/net_overhead; do
        [ -x "$d/$f" ] || { echo "missing $d/$f (build it first, see the header)"; exit 1; }
    done
done
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "# $(date -u +%FT%TZ) base $BASE ($(git -C "$BASE" describe --always --dirty)), new $NEW ($(git -C "$NEW" describe --always --dirty)), $(nproc) cores"
for r in $(seq 1 "$ROUNDS"); do
    order="base new"
    [ $((r % 2)) = 0 ] && order="new base"
    for side in $order; do
        dir=$BASE
        [ "$side" = new ] && dir=$NEW
        load=$(cut -d' ' -f1 /proc/loadavg)
        echo "# round $r $side load $load"
        FMRUN="$dir/target/release/fmrun" STARTUP_EXAMPLE="$dir/target/release/examples/startup" \
            "$HERE/scripts/startup-scale.sh" --connect lazy --runs 1 --json "${SIZES[@]}" \
            | grep '^{' | sed "s/}\$/,\"side\":\"$side\",\"round\":$r}/" >>"$OUT/startup.jsonl" || true
        "$dir/target/release/examples/net_overhead" --runs 3 \
            | grep -E ' ns' | sed "s/^/$side $r | /" >>"$OUT/poll.txt" || true
    done
done
python3 - "$OUT/startup.jsonl" "$OUT/poll.txt" <<'PY'
import json, re, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def table(title, data):
    # data: {(key, side, round): value}
    print(f"\n{title}")
    print("| what | base | new | new/base (medians) | median of round ratios | rounds |")
    print("|---|---:|---:|---:|---:|---:|")
    for key in sorted({k for k, _, _ in data}, key=str):
        b = {r: v for (k, s, r), v in data.items() if k == key and s == "base"}
        n = {r: v for (k, s, r), v in data.items() if k == key and s == "new"}
        both = sorted(set(b) & set(n))
        if not both:
            continue
        mb, mn = st.median(b[r] for r in both), st.median(n[r] for r in both)
        ratio = st.median(n[r] / b[r] for r in both if b[r] > 0)
        print(f"| {key} | {mb:.2f} | {mn:.2f} | {mn / mb:.3f} | {ratio:.3f} | {len(both)} |")
start = {}
for x in rows:
    start[(f"N={x['ranks']} start median ms", x["side"], x["round"])] = x["start_ms_median"]
    start[(f"N={x['ranks']} fmrun wall ms", x["side"], x["round"])] = x["wall_ms"]
table("lazy start-up (startup-scale.sh --connect lazy)", start)
poll = {}
for line in open(sys.argv[2]):
    m = re.match(r"(\w+) (\d+) \| (.*?)\s+([\d.]+) ns", line)
    if m:
        poll[(m.group(3).strip(), m.group(1), int(m.group(2)))] = float(m.group(4))
table("empty extract (net_overhead, ns)", poll)
PY
