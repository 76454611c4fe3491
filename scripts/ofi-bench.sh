#!/usr/bin/env bash
# fastmsg's libfabric transport beside libfabric's own benchmarks on the
# same provider, on the loopback, interleaved round by round: 0-byte
# one-way against fi_pingpong, 1 MiB bandwidth against fi_rma_bw (write
# and writedata), the empty poll with the ofi rings against shm alone.
#
#   scripts/ofi-bench.sh [ROUNDS]    (default 5; medians at the end)
#
# Needs libfabric-bin (fi_pingpong), fabtests' fi_rma_bw built by
# scripts/fabtests-build.sh (Debian packages no fabtests), and release builds:
#   cargo build --release -p fastmsg --bin fmrun -p fastmsg-examples \
#       --features fastmsg/ofi --example pingpong --example net_overhead
#   scripts/fabtests-build.sh PATH-TO-LIBFABRIC-GIT-OR-FABTESTS-TREE
#
# Per round:
# - fastmsg: examples/pingpong over FASTMSG_NET=ofi, 0 B one-way (RTT/2,
#   median over runs of each run's mean) and 1 MiB streamed bandwidth
#   (windows of 64 messages, each window acknowledged; the receiving
#   handler copies every byte);
# - fi_pingpong (RDM, msg mode) at 1 byte, its smallest: usec/xfer;
# - fi_rma_bw (RDM) at 1 MiB, window 64 like fastmsg's: `-o write` and
#   `-o writedata` (fastmsg's ring writes are fi_writedata on a provider
#   that does not place writes in order, as tcp;ofi_rxm); MB/sec = 1e6 B/s
#   as fastmsg's; the client's line (it waits for each window's
#   completions);
# - examples/net_overhead: empty extract with 4 shm queues alone, and with
#   the same 4 queues + 3 ofi rings (FASTMSG_NET=ofi, 4 ranks).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
PROV=${FI_PROVIDER:-tcp;ofi_rxm}
FMRUN=target/release/fmrun
PP=target/release/examples/pingpong
NO=target/release/examples/net_overhead
RMA_BW=target/fabtests/fi_rma_bw
command -v fi_pingpong >/dev/null || { echo "fi_pingpong not found (apt-get install libfabric-bin)"; exit 1; }
[ -x "$FMRUN" ] && [ -x "$PP" ] && [ -x "$NO" ] || { echo "build the release binaries first (see the header)"; exit 1; }
[ -x "$RMA_BW" ] || { echo "$RMA_BW not built: scripts/fabtests-build.sh (see its header)"; exit 1; }

port=$((47600 + RANDOM % 1000))
next_port() { port=$((port + 1)); }

fi_pp() { # size iterations -> usec/xfer
    local server
    next_port
    fi_pingpong -p "$PROV" -e rdm -I "$2" -S "$1" -B "$port" >/dev/null 2>&1 &
    server=$!
    sleep 0.5
    timeout 60 fi_pingpong -p "$PROV" -e rdm -I "$2" -S "$1" -P "$port" 127.0.0.1 2>&1 |
        awk '$1 ~ /^[0-9]/ { print $7 }'
    wait "$server" || true
}

rma_bw() { # op size iterations -> MB/sec (client)
    local server
    next_port
    timeout 60 "$RMA_BW" -p "$PROV" -e rdm -o "$1" -S "$2" -I "$3" -W 64 -b="$port" \
        -s 127.0.0.1 >/dev/null 2>&1 &
    server=$!
    sleep 0.5
    timeout 60 "$RMA_BW" -p "$PROV" -e rdm -o "$1" -S "$2" -I "$3" -W 64 -b="$port" \
        127.0.0.1 2>&1 | awk '$1 ~ /^[0-9]/ { print $5 }'
    wait "$server" || true
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "nan" }'; }

echo "# provider $PROV, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
printf '%-6s %10s %10s %10s %10s %10s %9s %9s\n' round fm_0B_us fipp_1B_us fm_1M_MBps \
    write_MBps wdata_MBps shm4_ns ofi_ns
C1="" C2="" C3="" C4="" C5="" C6="" C7=""
for r in $(seq 1 "$ROUNDS"); do
    fm=$(FASTMSG_NET=ofi FI_PROVIDER="$PROV" "$FMRUN" -n 2 "$PP" --sizes 0,1048576 \
        --max-size 1048576 --runs 3 --json 2>/dev/null)
    fm_lat=$(echo "$fm" | grep '"size":0,' | sed 's/.*"one_way_ns_mean":\([0-9.eE+-]*\).*/\1/')
    fm_bw=$(echo "$fm" | grep '"size":1048576' | sed 's/.*"bandwidth_mb_s":\([0-9.eE+-]*\).*/\1/')
    fi_lat=$(fi_pp 1 2000)
    w=$(rma_bw write 1048576 1280)
    wd=$(rma_bw writedata 1048576 1280)
    no=$(FI_PROVIDER="$PROV" "$NO" --iters 2000000 --runs 5 2>/dev/null)
    shm4=$(echo "$no" | sed -n 's/^shm, 4 ranks.* \([0-9.]*\) ns.*/\1/p')
    ofi=$(echo "$no" | sed -n 's/.*ofi 3 rings.* \([0-9.]*\) ns.*/\1/p')
    fm_lat_us=$(awk -v a="$fm_lat" 'BEGIN { printf "%.1f", a / 1000 }')
    printf '%-6s %10s %10s %10.0f %10.0f %10.0f %9s %9s\n' "$r" "$fm_lat_us" "${fi_lat:-nan}" \
        "${fm_bw:-nan}" "${w:-nan}" "${wd:-nan}" "${shm4:-nan}" "${ofi:-nan}"
    C1="$C1 $fm_lat_us" C2="$C2 ${fi_lat:-}" C3="$C3 ${fm_bw:-}" C4="$C4 ${w:-}"
    C5="$C5 ${wd:-}" C6="$C6 ${shm4:-}" C7="$C7 ${ofi:-}"
done
m1=$(echo "$C1" | median) m2=$(echo "$C2" | median) m3=$(echo "$C3" | median)
m4=$(echo "$C4" | median) m5=$(echo "$C5" | median) m6=$(echo "$C6" | median)
m7=$(echo "$C7" | median)
printf '%-6s %10s %10s %10.0f %10.0f %10.0f %9s %9s\n' median "$m1" "$m2" "$m3" "$m4" "$m5" "$m6" "$m7"
awk -v a="$m1" -v b="$m2" -v c="$m3" -v d="$m4" -v e="$m5" -v f="$m6" -v g="$m7" 'BEGIN {
    printf "# 0 B one-way: %.2fx fi_pingpong (target <= 1.1)\n", a / b
    printf "# 1 MiB bandwidth: %.2fx fi_rma_bw write, %.2fx writedata (target >= 0.9)\n", c / d, c / e
    printf "# empty poll, 4 shm queues + 3 ofi rings: %.2fx shm alone (target <= 2)\n", g / f
}'
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
