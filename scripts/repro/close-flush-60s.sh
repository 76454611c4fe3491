#!/bin/bash
# A live rank held in a debugger inside `close` is waited for, not failed.
# Over the network (TCP), rank 1 of a 3-rank job is stopped by gdb at the
# start of its close flush (after the close barrier) for HOLD_S seconds,
# longer than any fixed time-out would allow, then resumed. Every rank
# must then end ok; the waiting ranks warn after FASTMSG_CLOSE_WARN (10 s)
# and at each doubling. A peer's close failing with "no answer in 60s"
# is the defect this checks for.
#
# Usage (from the repository root): scripts/repro/close-flush-60s.sh [HOLD_S]
# Needs gdb. Takes HOLD_S (default 65) + ~10 s. Exit 0: the peers waited;
# exit 1: a live rank held in close was reported as a failed connection.
set -u
HOLD=${1:-65}
cd "$(dirname "$0")/../.."
command -v gdb >/dev/null || { echo "needs gdb"; exit 2; }
cargo build --quiet --bin fmrun --test audit || exit 2
BIN=$(ls -t target/debug/deps/audit-* | grep -v '\.d$' | head -1)
DIR=$(mktemp -d -t fm-close-flush.XXXX)
export FASTMSG_TEST_DIR=$DIR FASTMSG_TEST_ROUNDS=5 FASTMSG_TEST_CLOSE_NAP=1:1500
target/debug/fmrun --tag-output -n 3 --net tcp "$BIN" audit_rank_program --exact --nocapture \
    --test-threads 1 >"$DIR/out" 2>&1 &
JOB=$!
for _ in $(seq 1 500); do [ -s "$DIR/pid-1" ] && break; sleep 0.02; done
PID=$(cat "$DIR/pid-1")
# Rank 1 stops at the start of its close flush (its close barrier is done),
# held as a user at a breakpoint would hold it, then resumes.
LINE=$(grep -n "self.flush_round += 1" src/transport/rma/mod.rs | cut -d: -f1)
[ -n "$LINE" ] || { echo "the close flush was not found in src/transport/rma/mod.rs"; exit 2; }
timeout $((HOLD + 60)) gdb -p "$PID" -batch -ex "break src/transport/rma/mod.rs:$LINE" \
    -ex continue -ex "shell sleep $HOLD" -ex delete -ex detach >"$DIR/gdb" 2>&1
wait $JOB
RC=$?
grep -q "Breakpoint 1," "$DIR/gdb" || { echo "rank 1 never stopped at the flush: nothing checked (see $DIR/gdb)"; exit 2; }
grep -h "AUDIT" "$DIR/out"
if grep -q "no answer in 60s" "$DIR/out"; then
    echo "FAILED: a live rank held ${HOLD}s in close was reported as a failed connection"
    exit 1
fi
if [ "$RC" != 0 ]; then
    echo "FAILED: the job ended with status $RC (output in $DIR)"
    exit 1
fi
echo "ok: the peers waited for the rank held ${HOLD}s in close"
exit 0
