#!/usr/bin/env bash
# The TCP transport's figures of issue 12 (item 5), two builds side by side
# with Open MPI's tcp BTL, interleaved within one run:
# - 0 B one-way (p50, µs) and 1 MiB bandwidth (MB/s, 64 in flight):
#   examples/pingpong over `fmrun --net tcp` (loopback), beside
#   `../shared/anchors/run.sh tcp` (Open MPI, btl self,tcp);
# - the empty poll (ns): examples/net_overhead, shm 4 ranks against shm
#   1 queue + 3 TCP rings (target: within 2x);
# - with root (network namespaces): the same pingpong across two
#   namespaces joined by a veth pair (examples/netns-pingpong.sh).
#
#   scripts/tcp-bench.sh BASE_DIR NEW_DIR [ROUNDS]    (default 3)
#
# Each DIR is a checkout with release builds (cargo build --release
# --workspace --bins --examples). A round runs Open MPI, then base and new
# alternately; each line carries the 1-minute load average. The summary is
# the median over rounds per side and new/base, new/Open MPI.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,18p' "$0"; exit 2; }
BASE=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-3}
# Open MPI's side: ../shared/anchors beside the repository (or $ANCHORS_DIR).
ANCHORS=${ANCHORS_DIR:-}
for a in "$(dirname "$0")/../../shared/anchors" "$(dirname "$0")/../../../shared/anchors"; do
    [ -z "$ANCHORS" ] && [ -x "$a/run.sh" ] && ANCHORS=$(cd "$a" && pwd)
done
for d in "$BASE" "$NEW"; do
    for f in target/release/fmrun target/release/examples/pingpong target/release/examples/net_overhead; do
        [ -x "$d/$f" ] || { echo "missing $d/$f (build it first, see the header)"; exit 1; }
    done
done
NETNS=0
[ "$(id -u)" = 0 ] && command -v ip >/dev/null && NETNS=1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
PP_ARGS=(--sizes 0,1048576 --max-size 1048576 --runs 5 --scale 0.5 --json)

load() { cut -d' ' -f1 /proc/loadavg; }
# pingpong JSON lines -> "lat_us bw_MBps"
pp_fig() { python3 -c '
import json, sys
r = {j["size"]: j for j in map(json.loads, filter(str.strip, sys.stdin))}
print(r[0]["one_way_ns_p50"] / 1e3, r[1048576]["bandwidth_mb_s"])'; }

side() { # name dir round
    local name=$1 dir=$2 r=$3 l
    l=$(load)
    timeout 300 "$dir/target/release/fmrun" -n 2 --net tcp "$dir/target/release/examples/pingpong" \
        "${PP_ARGS[@]}" | pp_fig >"$OUT/$name.$r.lo"
    timeout 300 "$dir/target/release/examples/net_overhead" --iters 2000000 --runs 5 |
        awk '{for (i = 1; i < NF; i++) if ($(i+1) == "ns") v = $i}
             /shm, 4 ranks/ {s = v} /tcp 3 rings/ {t = v} END {print s, t, t / s}' >"$OUT/$name.$r.poll"
    if [ $NETNS = 1 ]; then
        timeout 300 "$dir/examples/netns-pingpong.sh" "${PP_ARGS[@]}" 2>/dev/null | grep '^{' | pp_fig >"$OUT/$name.$r.ns"
    else
        echo "nan nan" >"$OUT/$name.$r.ns"
    fi
    printf 'round %s %-5s load %5s  loopback 0B %s us, 1MiB %s MB/s | poll shm4 %s ns, shm1+tcp3 %s ns (%sx) | netns 0B %s us, 1MiB %s MB/s\n' \
        "$r" "$name" "$l" $(cat "$OUT/$name.$r.lo") $(cat "$OUT/$name.$r.poll") $(cat "$OUT/$name.$r.ns")
}

for r in $(seq 1 "$ROUNDS"); do
    if [ -n "$ANCHORS" ] && [ -x "$ANCHORS/run.sh" ]; then
        l=$(load)
        timeout 600 "$ANCHORS/run.sh" tcp >"$OUT/ompi.$r.raw" 2>&1 || true
        lat=$(awk '/^lat +size=0 / {sub("median_us=", "", $4); print $4}' "$OUT/ompi.$r.raw")
        bw=$(awk '/^bw +size=1048576 / {sub("median=", "", $4); print $4}' "$OUT/ompi.$r.raw")
        echo "${lat:-nan} ${bw:-nan}" >"$OUT/ompi.$r.lo"
        printf 'round %s ompi  load %5s  loopback 0B %s us, 1MiB %s MB/s\n' "$r" "$l" "${lat:-nan}" "${bw:-nan}"
    else
        echo "nan nan" >"$OUT/ompi.$r.lo"
    fi
    side base "$BASE" "$r"
    side new "$NEW" "$r"
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import math, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def col(name, ext, i):
    v = [float(open(f"{out}/{name}.{r}.{ext}").read().split()[i]) for r in range(1, rounds + 1)]
    v = [x for x in v if not math.isnan(x)]
    return statistics.median(v) if v else float("nan")
rows = [("loopback 0 B one-way p50, us", "lo", 0), ("loopback 1 MiB bandwidth, MB/s", "lo", 1),
        ("empty poll shm 4 ranks, ns", "poll", 0), ("empty poll shm 1 + tcp 3 rings, ns", "poll", 1),
        ("  tcp 3 / shm 4", "poll", 2),
        ("netns 0 B one-way p50, us", "ns", 0), ("netns 1 MiB bandwidth, MB/s", "ns", 1)]
print(f"\n# medians of {rounds} rounds")
print(f"{'':38} {'ompi':>9} {'base':>9} {'new':>9} {'new/base':>9} {'new/ompi':>9}")
for label, ext, i in rows:
    o = col("ompi", "lo", i) if ext == "lo" else float("nan")
    b, n = col("base", ext, i), col("new", ext, i)
    print(f"{label:38} {o:9.2f} {b:9.2f} {n:9.2f} {n / b:9.2f} {n / o if o == o else float('nan'):9.2f}")
EOF
