#!/usr/bin/env bash
# Barrier and allreduce latency across two "hosts": two network namespaces
# made here (a veth pair, addresses assigned inside them; nothing else is
# addressed), PER_HOST ranks in each; shared memory inside a namespace, TCP
# between them. With --mpi, Open MPI's comparison program (benches/c's
# bench_mpi coll, built by `fmbench baseline coll` into target/fmbench-c)
# runs in the same namespaces right after: mpirun inside the first one,
# its daemon started in the second through `ip netns exec`, each namespace
# given its own host name (unshare --uts) so that Open MPI sees
# two nodes; btl self,vader,tcp (shared memory inside a node, TCP across),
# ranks 0..PER-1 in the first namespace as with fastmsg.
# Needs root. Build first:
#   cargo build --release -p fastmsg --bin fmrun -p fastmsg-examples --example collectives
# Usage: examples/netns-collectives.sh [--mpi] PER_HOST [collectives args…]
#   e.g. examples/netns-collectives.sh --mpi 2 --elems 1 --iters 10000
# FASTMSG_WAIT (spin|yield|sleep|auto) in the environment reaches the ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
MPI=0
if [ "${1:-}" = --mpi ]; then MPI=1; shift; fi
PER=${1:?ranks per host}; shift
T=target/release
id=$$
A=fmcoll${id}a B=fmcoll${id}b
AGENT=$(mktemp /tmp/fmcoll-agent.XXXXXX)
cleanup() {
    ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true
    rm -f "$AGENT" "${S:-}"
}
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add "fmc${id}a" type veth peer name "fmc${id}b"
ip link set "fmc${id}a" netns "$A"; ip link set "fmc${id}b" netns "$B"
ip -n "$A" addr add 10.253.0.1/24 dev "fmc${id}a"; ip -n "$B" addr add 10.253.0.2/24 dev "fmc${id}b"
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set "fmc${id}a" up; ip -n "$B" link set "fmc${id}b" up
# The secret goes in a file only we can read, never on a command line.
S=$(umask 077; mktemp)
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$S"
J=nscoll$id
echo "# fastmsg: $PER + $PER ranks in namespaces $A, $B (TCP between them)"
ip netns exec "$B" $T/fmrun -n "$PER" --size $((2 * PER)) --rank-offset "$PER" \
    --root 10.253.0.1:17998 --secret-file "$S" --job "$J" --host-id hostB \
    $T/examples/collectives "$@" >/dev/null &
ip netns exec "$A" $T/fmrun -n "$PER" --size $((2 * PER)) --rank-offset 0 \
    --root 10.253.0.1:17998 --secret-file "$S" --job "$J" --host-id hostA \
    $T/examples/collectives "$@"
wait
if [ "$MPI" = 1 ]; then
    BIN=${CARGO_TARGET_DIR:-target}/fmbench-c
    # Open MPI's rsh launcher calls "$AGENT host command…": start the
    # daemon in namespace B under its own host name.
    cat >"$AGENT" <<EOF
#!/bin/sh
shift
exec ip netns exec $B unshare --uts sh -c "hostname fmcollB; \$*"
EOF
    chmod +x "$AGENT"
    # Yield when idle once ranks outnumber this machine's cores (both
    # namespaces share them), as `fmbench baseline over` does.
    YIELD=0; [ $((2 * PER)) -gt "$(nproc)" ] && YIELD=1
    echo "# Open MPI: $PER + $PER ranks in the same namespaces (btl self,vader,tcp)"
    ip netns exec "$A" unshare --uts sh -c "hostname fmcollA; exec mpirun --allow-run-as-root \
        --host fmcollA:$PER,fmcollB:$PER -np $((2 * PER)) --map-by slot --bind-to none \
        --mca plm_rsh_agent $AGENT --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include 10.253.0.0/24 --mca btl_tcp_if_include 10.253.0.0/24 \
        --mca pml ob1 --mca btl self,vader,tcp --mca mpi_yield_when_idle $YIELD \
        $BIN/bench_mpi coll 3 10000"
fi
