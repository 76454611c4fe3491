#!/usr/bin/env bash
# Instructions per message of the shared-memory self-send paths, from
# callgrind (repeatable to the instruction, unlike times on a busy host).
#
#   scripts/instr-per-message.sh BIN [BIN ...]
#
# BIN is a release build of examples/overhead (e.g. one from main, one
# from a branch: `cargo build --release -p fastmsg-examples --example
# overhead`, then copy target/release/examples/overhead aside). For each
# BIN and path it runs callgrind at two iteration counts and prints
# (instructions(big) - instructions(small)) / (messages(big) -
# messages(small)), so start-up and teardown cancel out:
# - fn-burst 0 B: bursts of 32 self-sends then one extract
#   (messages = iters / 128 * 32), as in BENCHMARKS.md;
# - fn 64 B and fn 0 B: one self-send + extract per iteration
#   (messages = iters / 4), as in BENCHMARKS.md's small-payload table.
set -euo pipefail
instr() { # BIN ARGS... -> total instructions of the run
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>&1
    awk '/^summary:/ { print $2 }' "$out"
    rm -f "$out"
}
per_msg() { # BIN SMALL BIG MSGS_SMALL MSGS_BIG ARGS...
    local bin=$1 small=$2 big=$3 ms=$4 mb=$5
    shift 5
    local a b
    a=$(instr "$bin" --runs 1 --iters "$small" "$@")
    b=$(instr "$bin" --runs 1 --iters "$big" "$@")
    awk -v a="$a" -v b="$b" -v ms="$ms" -v mb="$mb" 'BEGIN { printf "%.1f", (b - a) / (mb - ms) }'
}
printf '%-40s %14s %14s %14s\n' binary "fn-burst 0 B" "fn 0 B" "fn 64 B"
for bin in "$@"; do
    burst=$(per_msg "$bin" 40000 80000 $((40000 / 128 * 32)) $((80000 / 128 * 32)) --only fn-burst)
    fn0=$(per_msg "$bin" 40000 80000 $((40000 / 4)) $((80000 / 4)) --only fn)
    fn64=$(per_msg "$bin" 40000 80000 $((40000 / 4)) $((80000 / 4)) --only fn --size 64)
    printf '%-40s %14s %14s %14s\n' "$bin" "$burst" "$fn0" "$fn64"
done
