#!/usr/bin/env bash
# Start-up time and memory per rank of one-host jobs with the network
# forced, for several job sizes (the model is in docs/scale.md).
#
#   scripts/startup-scale.sh [--net tcp|ofi] [--connect lazy|eager|both] [--runs R] [--traffic BYTES] [--json] N...
#
# --connect sets FASTMSG_CONNECT for the runs (default: lazy, the
# library's default); `both` runs eager and lazy alternately within each
# round (same build, same load), one table row per size and mode.
#
# For each N, R runs (default 3) of
#   fmrun -n N --net NET target/release/examples/startup --json
# Each run's rank 0 prints the median and maximum over ranks of `start`
# and of each rank's memory, read by the rank itself from
# /proc/self/smaps right after start (examples/memory.rs): RSS and PSS,
# split into the shared segment, the ring regions start created, and the
# rest. The table gives, per N, the median over the runs of: the whole
# fmrun command's wall time, the median and max `start`, and per rank the
# median RSS, PSS and their split, with the segment file's allocation per
# rank (tmpfs, reserved up front: host memory not in any RSS until
# touched) and the host's TCP buffer memory (/proc/net/sockstat, every
# process) while the job was up.
#
# FMRUN and STARTUP_EXAMPLE name other builds of the two programs (to
# compare two builds, run the script for each in turn, same sizes).
# Settings pass through the environment (FASTMSG_NET_SLOTS,
# FASTMSG_NET_SLOT_SIZE, FASTMSG_CREDITS, FI_PROVIDER, ...). Before a size
# runs, the script predicts the memory the job takes (rings as
# docs/scale.md models them, the segment) and skips the size, saying so,
# when that exceeds 60 % of MemAvailable (override: STARTUP_SCALE_MEM_PCT;
# STARTUP_SCALE_EAGER=1 for builds whose rings are resident from start).
# Each run is bounded: fmrun --timeout T (STARTUP_SCALE_TIMEOUT, default
# 60 s: each start-up wait) and `timeout` of T + 60 s + N/2 s in all.
#
# Needs release builds:
#   cargo build --release --bin fmrun -p fastmsg-examples --example startup   # --features fastmsg/ofi for ofi
set -euo pipefail
cd "$(dirname "$0")/.."

NET=tcp RUNS=3 TRAFFIC=0 JSON=0 SIZES=() MODES=(lazy)
while [ $# -gt 0 ]; do
    case "$1" in
    --net) NET=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --connect)
        case "$2" in
        both) MODES=(eager lazy) ;;
        lazy | eager) MODES=("$2") ;;
        *) echo "startup-scale: --connect lazy, eager or both" >&2; exit 2 ;;
        esac
        shift 2 ;;
    --traffic) TRAFFIC=$2; shift 2 ;;
    --json) JSON=1; shift ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    [0-9]*) SIZES+=("$1"); shift ;;
    *) echo "startup-scale: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#SIZES[@]} -gt 0 ] || { echo "startup-scale: give the job sizes, e.g. 16 64 128" >&2; exit 2; }
FMRUN=${FMRUN:-target/release/fmrun}
EX=${STARTUP_EXAMPLE:-target/release/examples/startup}
[ -x "$FMRUN" ] && [ -x "$EX" ] || { echo "startup-scale: build the release binaries first (see the header)" >&2; exit 1; }
PCT=${STARTUP_SCALE_MEM_PCT:-60}
WAIT=${STARTUP_SCALE_TIMEOUT:-60}

# Predicted bytes of a job of N ranks on this host: per rank, a ring of
# SLOTS x SLOT_SIZE per peer (tcp: receive ring; ofi: receive ring and the
# staging mirror, and libfabric's pools), as far as written, and the
# segment (docs/scale.md).
predict() {
    TRAFFIC=$TRAFFIC python3 - "$1" "$NET" <<'PY'
import os, sys
n, net = int(sys.argv[1]), sys.argv[2]
slots = int(os.environ.get("FASTMSG_NET_SLOTS") or 16)
slot = int(os.environ.get("FASTMSG_NET_SLOT_SIZE") or 65536)
credits = int(os.environ.get("FASTMSG_CREDITS") or 32)
frame = int(os.environ.get("FASTMSG_FRAME_SIZE") or 8192)
q = int(os.environ.get("FASTMSG_QUEUES") or min(n, 16))
# Ring pages are resident once written (src/ring/region.rs): in full
# after --traffic, or with a build older than that change
# (STARTUP_SCALE_EAGER=1); otherwise the page of one slot per peer.
written = slot if int(os.environ.get("TRAFFIC") or 0) or os.environ.get("STARTUP_SCALE_EAGER") == "1" else 4096
rings = n * (n - 1) * slots * written * (2 if net == "ofi" else 1)
# libfabric's tcp;ofi_rxm holds about 90 MiB per rank whatever the size
# (its bounce-buffer pools, FI_OFI_RXM_BUFFER_SIZE x TX/RX sizes).
rings += n * (96 << 20 if net == "ofi" else 0)
spq = -(-n // q)
qslots = 1 << max(1, (credits * spq - 1).bit_length())
queue = 128 + 64 * qslots + (64 + frame) * qslots
segment = 4096 + 4 * 64 * n + 64 * n * n + n * q * queue
print(rings + segment)
PY
}

echo "# $(date -u +%FT%TZ) $(git describe --always --dirty 2>/dev/null || echo "?"), net $NET, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), MemAvailable $(awk '/MemAvailable/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "# settings: FASTMSG_NET_SLOTS=${FASTMSG_NET_SLOTS:-16} FASTMSG_NET_SLOT_SIZE=${FASTMSG_NET_SLOT_SIZE:-65536} runs $RUNS traffic $TRAFFIC connect ${MODES[*]}"
RAW=$(mktemp)
ERR=$(mktemp)
trap 'rm -f "$RAW" "$ERR"' EXIT
for n in "${SIZES[@]}"; do
    want=$(predict "$n")
    avail=$(awk '/MemAvailable/ {printf "%.0f", $2 * 1024}' /proc/meminfo)
    if [ "$want" -gt $((avail / 100 * PCT)) ]; then
        echo "# N=$n skipped: predicted $((want >> 20)) MiB > $PCT % of MemAvailable ($((avail >> 20)) MiB); lower FASTMSG_NET_SLOTS or FASTMSG_NET_SLOT_SIZE"
        continue
    fi
    for r in $(seq 1 "$RUNS"); do
      for mode in "${MODES[@]}"; do
        t0=$(date +%s%N)
        if ! out=$(FASTMSG_CONNECT=$mode timeout $((WAIT + 60 + n / 2)) "$FMRUN" -n "$n" --net "$NET" --timeout "$WAIT" \
            "$EX" --json --traffic "$TRAFFIC" 2>"$ERR"); then
            echo "# N=$n $mode run $r failed (status $?); its stderr's tail:"
            tail -5 "$ERR" | sed 's/^/#   /'
            continue
        fi
        t1=$(date +%s%N)
        line=$(echo "$out" | grep '^{' | tail -1)
        [ -n "$line" ] || { echo "# N=$n $mode run $r printed no JSON"; continue; }
        echo "${line%\}},\"connect\":\"$mode\",\"wall_ms\":$(((t1 - t0) / 1000000)),\"load1\":$(cut -d' ' -f1 /proc/loadavg)}" >>"$RAW"
        if [ "$JSON" = 1 ]; then tail -1 "$RAW"; fi
      done
    done
done
python3 - "$RAW" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault((r["ranks"], r.get("connect", "?")), []).append(r)
cols = [
    ("runs", None), ("wall ms", "wall_ms"), ("start med ms", "start_ms_median"),
    ("start max ms", "start_ms_max"), ("RSS MiB", "rss_mib_median"),
    ("RSS max", "rss_mib_max"), ("PSS MiB", "pss_mib_median"),
    ("rings RSS", "regions_rss_mib_median"), ("segment RSS", "segment_rss_mib_median"),
    ("rest RSS", "rest_rss_mib_median"), ("before start", "pre_start_rss_mib_median"),
    ("conns med", "connections_median"), ("conns max", "connections_max"),
    ("segment alloc/rank", None), ("host TCP buf KiB", "host_tcp_buffer_kib"),
    ("load", "load1"),
]
print("| ranks | connect | " + " | ".join(c for c, _ in cols) + " |")
print("|---:|---" + "|---:" * len(cols) + "|")
for n, mode in sorted(by):
    rs = by[(n, mode)]
    med = lambda k: statistics.median(r.get(k, float("nan")) for r in rs)
    cells = []
    for name, key in cols:
        if name == "runs":
            cells.append(str(len(rs)))
        elif name == "segment alloc/rank":
            cells.append(f"{med('segment_allocated_mib') / n:.2f}")
        else:
            cells.append(f"{med(key):.1f}" if key != "wall_ms" else f"{med(key):.0f}")
    print(f"| {n} | {mode} | " + " | ".join(cells) + " |")
PY
