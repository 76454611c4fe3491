#!/usr/bin/env bash
# Is a speed difference between two builds code or code placement? Links
# the 0 B ping-pong of each build six ways with lld (seed 0: no shuffle;
# seeds 1-5: --shuffle-sections, the same objects at other addresses), runs
# all twelve interleaved, and prints per binary the medians over rounds and
# per build the spread over its six placements. Ranges that overlap say the
# difference could be placement; ranges apart say it is code. The host
# may switch between a fast and a slow mode of cross-core transfers (see
# BENCHMARKS.md); rounds are reported per mode, a round whose one-way p50
# exceeds SLOW_NS (default 150) counting as slow.
#
#   scripts/placement.sh BASE_DIR NEW_DIR [ROUNDS]        (default 15)
#
# Each DIR is a checkout whose examples/pingpong.rs reports
# one_way_ns_p50_grouped (from 0e29ee0 on; apply that commit's examples/
# change to an older tree) and has a release fmrun (target/release/fmrun).
# The placement builds go to DIR/target/placement (a full release build
# each, with an lld linker wrapper written to a temporary directory).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,19p' "$0"; exit 2; }
BASE=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-15}
GCCLD="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/gcc-ld"
[ -x "$GCCLD/ld.lld" ] || { echo "no rust-lld at $GCCLD"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat >"$T/shufcc.sh" <<WRAP
#!/usr/bin/env bash
cc -fuse-ld=lld -B$GCCLD "\$@" || exit \$?
out=""; prev=""
for a in "\$@"; do [ "\$prev" = "-o" ] && out=\$a; prev=\$a; done
case "\$(basename "\$out")" in
  pingpong-*)
    for s in 1 2 3 4 5; do
      args=(); prev=""
      for a in "\$@"; do if [ "\$prev" = "-o" ]; then args+=("\$out.s\$s"); else args+=("\$a"); fi; prev=\$a; done
      cc -fuse-ld=lld -B$GCCLD "\${args[@]}" -Wl,--shuffle-sections="*=\$s" || exit \$?
    done;;
esac
WRAP
chmod +x "$T/shufcc.sh"
# (Not named *ld*: rustc infers the linker's flavour from its name, and a
# name ending in "ld" would get ld's arguments instead of cc's.)
for d in "$BASE" "$NEW"; do
    [ -x "$d/target/release/fmrun" ] || { echo "missing $d/target/release/fmrun"; exit 1; }
    (cd "$d" && CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER="$T/shufcc.sh" \
        CARGO_TARGET_DIR="$d/target/placement" \
        cargo build -q --release -p fastmsg-examples --example pingpong)
    # The wrapper links the variants only when the example is linked: make
    # sure it was (a build that was fresh already skipped the link).
    ls "$d"/target/placement/release/examples/pingpong-*.s5 >/dev/null
done
bin() { # dir seed
    local h
    h=$(ls "$1"/target/placement/release/examples/pingpong-*.s1 | head -1)
    h=${h%.s1}
    if [ "$2" = 0 ]; then echo "$h"; else echo "$h.s$2"; fi
}
for r in $(seq 1 "$ROUNDS"); do
    for s in 0 1 2 3 4 5; do
        for side in base new; do
            d=$BASE; [ $side = new ] && d=$NEW
            "$d/target/release/fmrun" -n 2 "$(bin "$d" $s)" --json --sizes 0 --runs 3 |
                jq -r --arg k "$side s$s" '"\($k) \(.one_way_ns_p50_grouped) \(.one_way_ns_mean) \(.msg_rate_m_s)"'
        done
    done
done | SLOW_NS=${SLOW_NS:-150} python3 -c '
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
