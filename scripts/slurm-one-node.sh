#!/usr/bin/env bash
# A one-node Slurm brought up for one run, then `srun --mpi=pmix -n 4` and
# `srun --mpi=pmi2 -n 4` of fastmsg's multi-host rank programs: the
# storm, ping-pong and barrier/allreduce of tests/net_hosts.rs and the
# collectives of handlers/tests/net_collectives.rs, four ranks split into
# two "hosts" by FASTMSG_HOST, the TCP transport forced, nothing exported
# (no FASTMSG_ROOT, no FASTMSG_SECRET: PMIx or PMI-2 carries the wire-up).
#
# Needs root and Debian's slurm-wlm, munge (and libpmix2, which slurm-wlm's
# PMIx plugin brings). Everything lives
# in a fresh temporary directory: its own munge key and socket, its own
# slurm.conf on ports nobody listens on. munged, slurmctld and slurmd run
# in the foreground, started here; they are stopped by their pids when the
# script exits (also on failure). Exit status: 0 if every job passed.
#
#   scripts/slurm-one-node.sh            # builds the test binaries first
#   SLURM_KEEP=1 scripts/slurm-one-node.sh   # keep the directory (logs)
#   scripts/slurm-one-node.sh CMD ARGS…      # then also run CMD (srun, sbatch
#                                            # --wait …) against this Slurm, timed
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "slurm-one-node: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (slurmd and munged run as root here)"
for t in munged slurmctld slurmd srun sinfo; do
    command -v "$t" >/dev/null || die "no $t (apt-get install slurm-wlm munge)"
done

# The rank programs (every build speaks PMIx, loading it at run time).
build_log=$(mktemp)
nice cargo test --workspace --test net_hosts --test net_collectives \
    --no-run 2>&1 | tee "$build_log" >&2
exe() { sed -n "s/.*Executable tests\/$1.rs (\(.*\))$/\1/p" "$build_log" | tail -1; }
NET_HOSTS=$(realpath "$(exe net_hosts)")
NET_COLL=$(realpath "$(exe net_collectives)")
rm -f "$build_log"
[ -x "$NET_HOSTS" ] && [ -x "$NET_COLL" ] || die "test binaries not found in cargo's output"

D=$(mktemp -d -t fm-slurm.XXXXXX)
chmod 755 "$D"
pids=()
stop() {
    local rc=$?
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    if [ "${SLURM_KEEP:-0}" = 1 ] || [ $rc != 0 ]; then
        echo "slurm-one-node: logs in $D" >&2
    else
        rm -rf "$D"
    fi
    exit $rc
}
trap stop EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'
}
HOST=$(hostname -s)
CPUS=$(nproc)
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
mkdir -p "$D/spool-$HOST"
. scripts/slurm-conf.sh
start_munged "$D" || die "munged did not start (see $D/munged.log)"
write_slurm_conf "$D" fmtest "$HOST" "$HOST" "$CPUS" \
    "SlurmctldPort=$CTLD_PORT" "SlurmdPort=$SLURMD_PORT"
slurmctld -D -i >"$D/slurmctld.err" 2>&1 &
pids+=($!)
slurmd -D >"$D/slurmd.err" 2>&1 &
pids+=($!)

# Wait for the node to be idle.
for _ in $(seq 150); do
    state=$(sinfo -h -n "$HOST" -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.2
done
[ "$state" = idle ] || die "node $HOST is ${state:-unknown}, not idle (see $D/*.log)"
echo "slurm-one-node: Slurm up on $HOST ($CPUS CPUs); mpi plugins: $(srun --mpi=list 2>&1 | tr -s '\n ' ' ')" >&2

failed=0
# run NAME MPI BINARY TEST [VAR=VALUE...]: four ranks, two per "host".
run() {
    local name=$1 mpi=$2 bin=$3 test=$4
    shift 4
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    env -u FASTMSG_ROOT -u FASTMSG_SECRET -u FASTMSG_RANK -u FASTMSG_HOST \
        FMTEST_LAUNCHED="srun-$mpi" FASTMSG_NET=tcp FASTMSG_TIMEOUT=30 "$@" \
        timeout 300 srun --mpi="$mpi" -O -n 4 -t 5 \
        sh -c 'FASTMSG_HOST=fmhost$(( ${PMIX_RANK:-$SLURM_PROCID} / 2 )) exec "$0" "$@"' \
        "$bin" "$test" --exact --nocapture --test-threads 1 >"$D/$name.out" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    if [ $rc = 0 ] && [ "$(grep -c '^test result: ok. 1 passed' "$D/$name.out")" = 4 ]; then
        printf 'slurm-one-node: %-28s ok   %6.2f s\n' "$name" "$(awk "BEGIN{print $t1 - $t0}")"
    else
        printf 'slurm-one-node: %-28s FAIL (rc %s)\n' "$name" "$rc"
        tail -30 "$D/$name.out" | sed 's/^/    /'
        failed=1
    fi
}

for mpi in pmix pmi2; do
    for s in storm pingpong collective; do
        run "$mpi-$s" $mpi "$NET_HOSTS" net_rank_program FASTMSG_TEST_SCENARIO=$s
    done
    : > "$D/arrivals"
    run $mpi-collectives $mpi "$NET_COLL" net_coll_rank \
        FASTMSG_TEST_SCENARIO=collectives FMTEST_ARRIVALS="$D/arrivals"
done

# An extra command from the arguments, against this Slurm (SLURM_CONF).
if [ $# -gt 0 ] && [ $failed = 0 ]; then
    t0=$(date +%s.%N)
    rc=0
    env -u FASTMSG_ROOT -u FASTMSG_SECRET timeout 300 "$@" || rc=$?
    t1=$(date +%s.%N)
    printf 'slurm-one-node: `%s`: exit %s, %.3f s wall\n' "$*" "$rc" "$(awk "BEGIN{print $t1 - $t0}")"
    [ $rc = 0 ] || failed=1
fi
exit $failed
