#!/usr/bin/env bash
# pingpong between two "hosts": two network namespaces made here (a veth
# pair, addresses assigned inside them; nothing else is addressed), one rank
# in each, over the TCP transport. Needs root. Build first:
#   cargo build --release --workspace --examples --bins
# Usage: examples/netns-pingpong.sh [pingpong args…]   (e.g. --max-size 1048576)
set -euo pipefail
cd "$(dirname "$0")/.."
T=target/release
id=$$
A=fmbench${id}a B=fmbench${id}b
cleanup() { rm -f "${S:-}"; ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add "fmb${id}a" type veth peer name "fmb${id}b"
ip link set "fmb${id}a" netns "$A"; ip link set "fmb${id}b" netns "$B"
ip -n "$A" addr add 10.252.0.1/24 dev "fmb${id}a"; ip -n "$B" addr add 10.252.0.2/24 dev "fmb${id}b"
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set "fmb${id}a" up; ip -n "$B" link set "fmb${id}b" up
# The secret goes in a file only we can read, never on a command line.
S=$(umask 077; mktemp)
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$S"
J=nsbench$id
ip netns exec "$B" $T/fmrun -n 1 --size 2 --rank-offset 1 --root 10.252.0.1:17999 \
    --secret-file "$S" --job "$J" --host-id hostB $T/examples/pingpong "$@" &
ip netns exec "$A" $T/fmrun -n 1 --size 2 --rank-offset 0 --root 10.252.0.1:17999 \
    --secret-file "$S" --job "$J" --host-id hostA $T/examples/pingpong "$@"
wait
