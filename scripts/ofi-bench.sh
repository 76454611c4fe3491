#!/usr/bin/env bash
# fastmsg's libfabric transport beside libfabric's own fi_pingpong on the
# same provider, on the loopback, alternating within one run (issue 12's
# targets: 0-byte one-way <= 1.1x, 1 MiB bandwidth >= 0.9x).
#
#   scripts/ofi-bench.sh [ROUNDS]    (default 3)
#
# Needs libfabric-bin (fi_pingpong) and release builds:
#   cargo build --release --bin fmrun
#   cargo build --release -p fastmsg-examples --features fastmsg/ofi --example pingpong
#
# fastmsg: examples/pingpong over FASTMSG_NET=ofi (one-way = RTT/2, mean of
# a run; bandwidth with 64 messages in flight). fi_pingpong (RDM endpoint,
# msg mode): usec/xfer (one-way) and MB/sec at 1 byte (its smallest) and
# 1 MiB. Each line is one round; compare medians.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
PROV=${FI_PROVIDER:-tcp;ofi_rxm}
FMRUN=target/release/fmrun
PP=target/release/examples/pingpong
command -v fi_pingpong >/dev/null || { echo "fi_pingpong not found (apt-get install libfabric-bin)"; exit 1; }
[ -x "$FMRUN" ] && [ -x "$PP" ] || { echo "build the release binaries first (see the header)"; exit 1; }

fi_pp() { # size iterations port -> "usec/xfer MB/sec"
    local size=$1 iters=$2 port=$3 server
    fi_pingpong -p "$PROV" -e rdm -I "$iters" -S "$size" -B "$port" >/dev/null 2>&1 &
    server=$!
    sleep 0.5
    fi_pingpong -p "$PROV" -e rdm -I "$iters" -S "$size" -P "$port" 127.0.0.1 2>&1 |
        awk '$1 ~ /^[0-9]/ { print $8, $7 }'
    wait "$server" || true
}

echo "# provider $PROV, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "# round  fastmsg_0B_oneway_us  fi_pingpong_1B_oneway_us  fastmsg_1MiB_MBps  fi_pingpong_1MiB_MBps"
for r in $(seq 1 "$ROUNDS"); do
    fm=$(FASTMSG_NET=ofi FI_PROVIDER="$PROV" "$FMRUN" -n 2 "$PP" --sizes 0,1048576 \
        --max-size 1048576 --runs 3 --json 2>/dev/null)
    fm_lat=$(echo "$fm" | grep '"size":0,' | sed 's/.*"one_way_ns_mean":\([0-9.eE+-]*\).*/\1/')
    fm_bw=$(echo "$fm" | grep '"size":1048576' | sed 's/.*"bandwidth_mb_s":\([0-9.eE+-]*\).*/\1/')
    read -r fi_lat _ < <(fi_pp 1 2000 $((47600 + 2 * r)))
    read -r _ fi_bw < <(fi_pp 1048576 200 $((47601 + 2 * r)))
    awk -v r="$r" -v a="$fm_lat" -v b="$fi_lat" -v c="$fm_bw" -v d="$fi_bw" \
        'BEGIN { printf "%-6s %21.1f %25.1f %18.0f %21.0f\n", r, a / 1000, b, c, d }'
done
