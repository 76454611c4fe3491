#!/bin/bash
# Reproduces audit24 finding "close-flush-60s": over the network (TCP), a
# rank held in a debugger (or SIGSTOPped) for more than 60 s inside `close`
# — after the close barrier, before its flush — makes every other rank's
# `close` fail with
#   close: connection to rank 1: flush at close failed: no answer in 60s
# although rank 1 is alive and resumes normally (RmaTransport::quiesce's
# hard-coded 60 s, src/endpoint/mod.rs `close`).
#
# Fixed: `close` now waits for a live peer's flush however long, and says
# so after FASTMSG_CLOSE_WARN (10 s) and at each doubling; run after the fix
# (rank 1 held 65 s) it prints "not reproduced" and every rank ends ok.
#
# Usage (from the repository root): scripts/repro/close-flush-60s.sh [HOLD_S]
# Needs gdb. Takes HOLD_S (default 65) + ~10 s. Exit 0 = bug reproduced.
set -u
HOLD=${1:-65}
cd "$(dirname "$0")/../.."
cargo build --quiet --bin fmrun --test audit || exit 2
BIN=$(ls -t target/debug/deps/audit-* | grep -v '\.d$' | head -1)
DIR=$(mktemp -d /tmp/fm-close-flush.XXXX)
export FASTMSG_TEST_DIR=$DIR FASTMSG_TEST_ROUNDS=5 FASTMSG_TEST_CLOSE_NAP=1:1500
target/debug/fmrun --tag-output -n 3 --net tcp "$BIN" audit_rank_program --exact --nocapture \
    --test-threads 1 >"$DIR/out" 2>&1 &
JOB=$!
for _ in $(seq 1 500); do [ -s "$DIR/pid-1" ] && break; sleep 0.02; done
PID=$(cat "$DIR/pid-1")
# Rank 1 stops at the start of its close flush (its close barrier is done),
# held as a user at a breakpoint would hold it, then resumes.
LINE=$(grep -n "self.flush_round += 1" src/transport/rma/mod.rs | cut -d: -f1)
timeout $((HOLD + 60)) gdb -p "$PID" -batch -ex "break src/transport/rma/mod.rs:$LINE" \
    -ex continue -ex "shell sleep $HOLD" -ex delete -ex detach >"$DIR/gdb" 2>&1
wait $JOB
grep -h "AUDIT" "$DIR/out"
if grep -q "no answer in 60s" "$DIR/out"; then
    echo "REPRODUCED: a live rank held ${HOLD}s in close was reported as a failed connection"
    exit 0
fi
echo "not reproduced"
exit 1
