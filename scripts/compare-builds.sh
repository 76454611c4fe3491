#!/usr/bin/env bash
# Two builds of fastmsg side by side in one run: is NEW as fast as BASE?
#
#   scripts/compare-builds.sh base=DIR new=DIR [--rounds N] [MODE...]
#
# Each DIR is a checkout with release builds of what the modes run:
#   cargo build --release -p fastmsg --bin fmrun
#   cargo build --release -p fastmsg-examples --example pingpong --example overhead \
#       --example collectives --example histo --example ig
# and every figure is taken from both builds alternately, round by round,
# under the same background load; compare the ratios of one run, never
# figures of two runs. MODEs (default: interleave):
#
#   interleave  0 B, 64 B and 1 KiB one-way latency and message rate (two
#               ranks over shared memory, examples/pingpong), the empty
#               `extract` and the 0 B self-send in bursts of 32 (one thread,
#               examples/overhead). Default 15 rounds.
#   placement   is a difference code or code placement? Links each build's
#               pingpong six ways with lld (seed 0: as is; 1-5:
#               --shuffle-sections, the same objects at other addresses),
#               runs all twelve interleaved (0 B), and prints per build the
#               range over its six placements: ranges apart say code, ranges
#               that overlap say it could be placement. Default 15 rounds.
#               Builds go to DIR/target/placement.
#   overhead    examples/overhead over many heap layouts (--heap-pad 0, 64,
#               ... 2048 B; one layout can favour either build): median,
#               quartiles and range over layouts, for --only ONLY (env ONLY,
#               default empty; also fn, async, fn-burst).
#   coll        collective latency (examples/collectives: barrier and
#               allreduce by `auto` and a message algorithm, broadcast then
#               reduce), at the rank counts in env RANKS (default "2 4").
#               Default 5 rounds.
#   bale        the Bale kernels (histo, ig) at the rank counts in env RANKS
#               (default "2 4 8"), M items/s. Default 5 rounds.
#
# The host may switch between a fast and a slow mode of cross-core
# transfers (BENCHMARKS.md, "The machine, and measuring on it"). The
# ping-pong modes report each mode apart: a run whose 0 B one-way p50
# exceeds SLOW_NS (default 150) is slow, and ratios are taken within a mode
# only. The 1-minute load average is printed with every round.
set -euo pipefail
usage() { sed -n '2,38p' "$0"; exit 2; }
BASE="" NEW="" ROUNDS="" MODES=()
while [ $# -gt 0 ]; do
    case $1 in
        base=*) BASE=$(cd "${1#base=}" && pwd) ;;
        new=*) NEW=$(cd "${1#new=}" && pwd) ;;
        --rounds) ROUNDS=$2; shift ;;
        --rounds=*) ROUNDS=${1#--rounds=} ;;
        interleave|placement|overhead|coll|bale) MODES+=("$1") ;;
        *) usage ;;
    esac
    shift
done
[ -n "$BASE" ] && [ -n "$NEW" ] || usage
[ ${#MODES[@]} -gt 0 ] || MODES=(interleave)
SLOW_NS=${SLOW_NS:-150}
export SLOW_NS
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

need() { # file...: each must exist, executable, in both builds
    local d f
    for d in "$BASE" "$NEW"; do
        for f in "$@"; do
            [ -x "$d/$f" ] || { echo "missing $d/$f (build it first, see the header)"; exit 1; }
        done
    done
}
load() { cut -d' ' -f1 /proc/loadavg; }
dir_of() { if [ "$1" = base ]; then echo "$BASE"; else echo "$NEW"; fi; }

# --- interleave -------------------------------------------------------------
interleave() {
    local rounds=${ROUNDS:-15} r side dir
    need target/release/fmrun target/release/examples/pingpong target/release/examples/overhead
    for r in $(seq 1 "$rounds"); do
        for side in base new; do
            dir=$(dir_of $side)
            printf 'round %s %-4s load %s\n' "$r" "$side" "$(load)" >&2
            "$dir/target/release/fmrun" -n 2 "$dir/target/release/examples/pingpong" \
                --json --sizes 0,64,1024 --runs 3 | sed "s/^/$side $r pp /"
            "$dir/target/release/examples/overhead" --only empty --runs 3 | sed "s/^/$side $r ov /"
            "$dir/target/release/examples/overhead" --only fn-burst --runs 3 | sed "s/^/$side $r ov /"
        done
    done >"$OUT/interleave"
    python3 - "$OUT/interleave" <<'EOF'
import json, os, statistics as st, sys
slow = float(os.environ["SLOW_NS"])
fig = {}   # (side, round) -> {figure: value}
for line in open(sys.argv[1]):
    side, rnd, kind, rest = line.split(" ", 3)
    f = fig.setdefault((side, int(rnd)), {})
    if kind == "pp":
        j = json.loads(rest)
        s = j["size"]
        f[f"{s} B one-way mean (ns)"] = j["one_way_ns_mean"]
        f[f"{s} B one-way p50 (ns)"] = j["one_way_ns_p50"]
        if j.get("one_way_ns_p50_grouped") is not None:
            f[f"{s} B p50 grouped (ns)"] = j["one_way_ns_p50_grouped"]
        f[f"{s} B rate (M msg/s)"] = j["msg_rate_m_s"]
    elif rest.startswith("empty extract"):
        f["empty extract (ns)"] = float(rest.split()[2])
    elif "bursts of 32" in rest:
        f["0 B self-send, burst (ns)"] = float(rest.split()[-6])
def mode(f):
    return "slow" if f["0 B one-way p50 (ns)"] > slow else "fast"
rounds = sorted({r for _, r in fig})
for m in ("fast", "slow"):
    both = [r for r in rounds if mode(fig[("base", r)]) == m and mode(fig[("new", r)]) == m]
    if not both:
        continue
    print(f"\n== {m} mode (0 B one-way p50 {'>' if m == 'slow' else '<='} {slow:.0f} ns): "
          f"{len(both)} of {len(rounds)} rounds with both builds in it")
    print(f"{'':28} {'base':>10} {'new':>10} {'new/base':>9} {'paired':>8}")
    for k in fig[("base", both[0])]:
        bv = [fig[("base", r)][k] for r in both]
        nv = [fig[("new", r)][k] for r in both]
        pr = st.median([n / b for b, n in zip(bv, nv) if b])
        print(f"{k:28} {st.median(bv):10.2f} {st.median(nv):10.2f} {st.median(nv) / st.median(bv):9.3f} {pr:8.3f}")
mixed = len(rounds) - sum(1 for r in rounds if mode(fig[("base", r)]) == mode(fig[("new", r)]))
if mixed:
    print(f"\n{mixed} rounds had the builds in different modes: left out")
print("\npaired = median of the per-round new/base ratios")
EOF
}

# --- placement ----------------------------------------------------------------
placement() {
    local rounds=${ROUNDS:-15} d r s side gccld
    need target/release/fmrun
    gccld="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/gcc-ld"
    [ -x "$gccld/ld.lld" ] || { echo "no rust-lld at $gccld"; exit 1; }
    # A linker wrapper that links pingpong a further five times, shuffled.
    # (Not named *ld*: rustc infers the linker's flavour from its name, and a
    # name ending in "ld" would get ld's arguments instead of cc's.)
    cat >"$OUT/shufcc.sh" <<WRAP
#!/usr/bin/env bash
cc -fuse-ld=lld -B$gccld "\$@" || exit \$?
out=""; prev=""
for a in "\$@"; do [ "\$prev" = "-o" ] && out=\$a; prev=\$a; done
case "\$(basename "\$out")" in
  pingpong-*)
    for s in 1 2 3 4 5; do
      args=(); prev=""
      for a in "\$@"; do if [ "\$prev" = "-o" ]; then args+=("\$out.s\$s"); else args+=("\$a"); fi; prev=\$a; done
      cc -fuse-ld=lld -B$gccld "\${args[@]}" -Wl,--shuffle-sections="*=\$s" || exit \$?
    done;;
esac
WRAP
    chmod +x "$OUT/shufcc.sh"
    for d in "$BASE" "$NEW"; do
        (cd "$d" && CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER="$OUT/shufcc.sh" \
            CARGO_TARGET_DIR="$d/target/placement" \
            cargo build -q --release -p fastmsg-examples --example pingpong)
        # The wrapper links the variants only when the example is linked:
        # make sure it was (a build that was fresh already skipped the link).
        ls "$d"/target/placement/release/examples/pingpong-*.s5 >/dev/null
    done
    bin() { # dir seed
        local h
        h=$(ls "$1"/target/placement/release/examples/pingpong-*.s1 | head -1)
        h=${h%.s1}
        if [ "$2" = 0 ]; then echo "$h"; else echo "$h.s$2"; fi
    }
    for r in $(seq 1 "$rounds"); do
        echo "round $r load $(load)" >&2
        for s in 0 1 2 3 4 5; do
            for side in base new; do
                d=$(dir_of $side)
                "$d/target/release/fmrun" -n 2 "$(bin "$d" $s)" --json --sizes 0 --runs 3 |
                    jq -r --arg k "$side s$s" '"\($k) \(.one_way_ns_p50_grouped) \(.one_way_ns_mean) \(.msg_rate_m_s)"'
            done
        done
    done | python3 -c '
import os, sys, statistics as st
slow = float(os.environ["SLOW_NS"])
m = {}
for line in sys.stdin:
    side, seed, g, mean, rate = line.split()
    mode = "slow" if float(g) > slow else "fast"
    m.setdefault(mode, {}).setdefault((side, seed), []).append([float(g), float(mean), float(rate)])
for mode, mm in sorted(m.items()):
    print("== %s mode (one-way p50 %s %.0f ns)" % (mode, ">" if mode == "slow" else "<=", slow))
    print("binary     p50 grouped    mean    rate  rounds  (0 B one-way ns, M msg/s; medians over rounds)")
    per = {}
    for (side, seed), v in sorted(mm.items()):
        med = [st.median(x[i] for x in v) for i in range(3)]
        per.setdefault(side, []).append(med)
        print("%-10s %11.2f %7.1f %7.2f %7d" % (side + " " + seed, *med, len(v)))
    for side, v in per.items():
        rng = lambda i: (min(x[i] for x in v), max(x[i] for x in v), st.median(x[i] for x in v))
        print("%s over %d placements: p50 grouped %.2f..%.2f (median %.2f), mean %.1f..%.1f (%.1f), rate %.2f..%.2f (%.2f)"
              % ((side, len(v)) + rng(0) + rng(1) + rng(2)))
'
}

# --- overhead -------------------------------------------------------------------
overhead() {
    local only=${ONLY:-empty} k side d ns
    need target/release/examples/overhead
    # 33 pads of 64 B: below glibc's mmap threshold (128 KiB), where a pad
    # moves the heap; a larger one is mapped apart and moves nothing.
    for k in $(seq 0 32); do
        for side in base new; do
            d=$(dir_of $side)
            ns=$("$d/target/release/examples/overhead" --only "$only" --runs 1 \
                --iters 5000000 --heap-pad $((k * 64)) | grep -oE '[0-9.]+ ns' | head -1 | cut -d' ' -f1)
            echo "$side $ns"
        done
    done | python3 -c '
import sys, statistics as s
m = {}
for l in sys.stdin:
    d, v = l.split()
    m.setdefault(d, []).append(float(v))
print("overhead --only '"$only"', ns over heap layouts")
for d, v in m.items():
    q = s.quantiles(v, n=4)
    print("%-5s median %.2f  quartiles %.2f-%.2f  range %.2f-%.2f  layouts %d"
          % (d, s.median(v), q[0], q[2], min(v), max(v), len(v)))
print("new/base (medians): %.3f" % (s.median(m["new"]) / s.median(m["base"])))
'
}

# --- coll -----------------------------------------------------------------------
coll() {
    local rounds=${ROUNDS:-5} ranks=${RANKS:-"2 4"} r n side dir
    need target/release/fmrun target/release/examples/collectives
    for r in $(seq 1 "$rounds"); do
        for n in $ranks; do
            for side in base new; do
                dir=$(dir_of $side)
                echo "round $r, $n ranks, $side (load $(load))" >&2
                "$dir/target/release/fmrun" -n "$n" "$dir/target/release/examples/collectives" \
                    --json --iters 3000 --runs 3 --settle 300 --elems 1 --rooted 1 \
                    --barrier auto,dissemination --allreduce auto,recursive-doubling |
                    sed "s/^/$side $r $n /"
            done
        done
    done >"$OUT/coll"
    python3 - "$OUT/coll" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, rnd, n, js = line.split(' ', 3)
    j = json.loads(js)
    key = (int(n), j['op'], j['algo'].split('=')[0] if j['algo'].startswith('auto') else j['algo'])
    rows.setdefault(key, {}).setdefault(int(rnd), {})[side] = j['latency_us']
print(f"{'ranks':>5} {'op':<13} {'algo':<20} {'base us':>9} {'new us':>9} {'new/base':>9} {'paired':>8}")
for key in sorted(rows):
    both = [v for v in rows[key].values() if 'base' in v and 'new' in v]
    b = statistics.median(v['base'] for v in both)
    nw = statistics.median(v['new'] for v in both)
    ratio = statistics.median(v['new'] / v['base'] for v in both)
    print(f"{key[0]:>5} {key[1]:<13} {key[2]:<20} {b:>9.3f} {nw:>9.3f} {nw / b:>9.3f} {ratio:>8.3f}")
EOF
}

# --- bale -----------------------------------------------------------------------
bale() {
    local rounds=${ROUNDS:-5} ranks=${RANKS:-"2 4 8"} r n k side dir v
    need target/release/fmrun target/release/examples/histo target/release/examples/ig
    for r in $(seq 1 "$rounds"); do
        echo "round $r load $(load)" >&2
        for k in histo ig; do
            for n in $ranks; do
                for side in base new; do
                    dir=$(dir_of $side)
                    v=$("$dir/target/release/fmrun" -n "$n" "$dir/target/release/examples/$k" --reps 3 --json |
                        jq -r '.requests_per_s // .updates_per_s' | sort -g | sed -n 2p)
                    echo "$side $k $n $v"
                done
            done
        done
    done | python3 -c '
import sys, statistics as s
m = {}
for l in sys.stdin:
    side, k, n, v = l.split()
    m.setdefault((k, int(n)), {}).setdefault(side, []).append(float(v))
print("kernel ranks   base M/s    new M/s  new/base   (medians over rounds of the median of 3 reps)")
for (k, n), d in sorted(m.items()):
    b, nw = s.median(d["base"]), s.median(d["new"])
    print("%-6s %5d %10.1f %10.1f %9.3f" % (k, n, b / 1e6, nw / 1e6, nw / b))
'
}

for m in "${MODES[@]}"; do
    echo "### $m: base=$BASE new=$NEW"
    "$m"
done
