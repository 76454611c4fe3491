#!/usr/bin/env bash
# Two nodes for real on one machine, and fastmsg's multi-host rank
# programs under every launcher, with nothing exported.
#
# The "nodes" are network namespaces, each with its own UTS namespace
# (host names node1 and node2) and mount namespace (a private /tmp and a
# hosts file naming head, node1 and node2, bind-mounted over /etc/hosts
# there only), joined by veth pairs to a bridge in a third namespace, the
# head (10.77.0.254; node1 10.77.0.1, node2 10.77.0.2). The launchers run
# on the head; their daemons run on the nodes:
#   - Slurm: slurmctld on the head, one slurmd per node (each takes its
#     node name from its host name), munged shared; `srun -N 2 -n 4
#     --mpi=pmix` and `--mpi=pmi2` of the storm, ping-pong and
#     barrier/allreduce programs (tests/net_hosts.rs) and the collectives
#     (handlers/tests/net_collectives.rs), and an `sbatch --nodes=2` script;
#   - Open MPI: `mpirun --host node1:2,node2:2` with an rsh agent that
#     enters the named node's namespaces instead of ssh: an orted per node;
#   - MPICH: `mpiexec -hosts node1:2,node2:2` with the same agent (Hydra's
#     rsh launcher): a Hydra proxy per node, PMI-1 to the ranks.
# Then the start-up time of an 8-rank job (4 per node) under each, beside
# MPI_Init + MPI_Barrier of scripts/mpi_init_time.c under the same launcher
# (Open MPI's, MPICH's under mpiexec), the median of RUNS runs of the
# slowest rank's time from launch (printed as a table).
#
# Needs root, iproute2, util-linux (unshare, nsenter); each part skips,
# saying why, when its tools are missing (slurm-wlm and munge; openmpi-bin
# and libopenmpi-dev; mpich). Every job runs under `timeout`; the
# namespaces, daemons and files go when the script exits (trap), also on
# failure. Exit status: 0 if every job that ran passed.
#
#   scripts/two-nodes.sh                 # builds the test binaries first
#   TWO_NODES_KEEP=1 scripts/two-nodes.sh   # keep the directory (logs)
#   TWO_NODES_RUNS=5 scripts/two-nodes.sh   # start-up runs per launcher (3)
#   TWO_NODES_ONLY="slurm ompi mpich timing" scripts/two-nodes.sh   # parts
# The binaries can be given instead of built: FM_NET_HOSTS, FM_NET_COLL,
# FM_TWO_NODES (paths of the net_hosts, net_collectives and two_nodes
# test executables).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

say() { echo "two-nodes: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "skipped: needs root (namespaces, daemons)"; exit 0; }
for t in ip unshare nsenter timeout; do
    command -v "$t" >/dev/null || { say "skipped: no $t (apt-get install iproute2 util-linux)"; exit 0; }
done
ONLY=${TWO_NODES_ONLY:-slurm ompi mpich timing}
RUNS=${TWO_NODES_RUNS:-3}
LIMIT=${TWO_NODES_LIMIT:-180}
part() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# The rank programs (default features: PMIx is loaded at run time).
if [ -z "${FM_NET_HOSTS:-}" ] || [ -z "${FM_NET_COLL:-}" ] || [ -z "${FM_TWO_NODES:-}" ]; then
    build_log=$(mktemp)
    nice cargo test --workspace --test net_hosts --test net_collectives --test two_nodes \
        --no-run 2>&1 | tee "$build_log" >&2
    exe() { sed -n "s/.*Executable tests\/$1.rs (\(.*\))$/\1/p" "$build_log" | tail -1; }
    FM_NET_HOSTS=$(realpath "$(exe net_hosts)")
    FM_NET_COLL=$(realpath "$(exe net_collectives)")
    FM_TWO_NODES=$(realpath "$(exe two_nodes)")
    rm -f "$build_log"
fi
for b in "$FM_NET_HOSTS" "$FM_NET_COLL" "$FM_TWO_NODES"; do
    [ -x "$b" ] || { say "no test binary $b"; exit 1; }
done

D=$(mktemp -d /var/tmp/fm-two-nodes.XXXXXX)
chmod 755 "$D"
TAG=$$
NS_HEAD=fm2n-$TAG-head
NS_1=fm2n-$TAG-node1
NS_2=fm2n-$TAG-node2
pids=()
holders=()
cleanup() {
    local rc=$?
    set +e
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
    done
    # Whatever still runs inside the namespaces (a stray rank, orted, a
    # slurmstepd), then the namespace holders.
    for ns in "$NS_HEAD" "$NS_1" "$NS_2"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            case " ${holders[*]} " in *" $p "*) ;; *) kill -KILL "$p" 2>/dev/null ;; esac
        done
    done
    for p in "${holders[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for ns in "$NS_HEAD" "$NS_1" "$NS_2"; do ip netns del "$ns" 2>/dev/null; done
    if [ "${TWO_NODES_KEEP:-0}" = 1 ] || [ $rc != 0 ]; then
        say "logs in $D"
    else
        rm -rf "$D"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the head and the two nodes ----
cat > "$D/hosts" <<EOF
127.0.0.1 localhost
10.77.0.254 head
10.77.0.1 node1
10.77.0.2 node2
EOF
ip netns add "$NS_HEAD"
ip -n "$NS_HEAD" link set lo up
ip -n "$NS_HEAD" link add br0 type bridge
ip -n "$NS_HEAD" addr add 10.77.0.254/24 dev br0
ip -n "$NS_HEAD" link set br0 up
for i in 1 2; do
    ns=$(eval echo "\$NS_$i")
    ip netns add "$ns"
    ip link add "f${TAG}h$i" type veth peer name "f${TAG}n$i"
    ip link set "f${TAG}h$i" netns "$NS_HEAD"
    ip link set "f${TAG}n$i" netns "$ns"
    ip -n "$ns" link set "f${TAG}n$i" name eth0
    ip -n "$ns" addr add "10.77.0.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$NS_HEAD" link set "f${TAG}h$i" master br0 up
done
declare -A HOLDER
for name in head node1 node2; do
    case $name in head) ns=$NS_HEAD ;; node1) ns=$NS_1 ;; node2) ns=$NS_2 ;; esac
    # nsenter execs unshare, which execs sh, which execs sleep: $! is the
    # process that holds the node's namespaces. (Not `ip netns exec`: it
    # mounts the namespace's own sysfs over /sys, which hides the cgroup
    # tree slurmd needs.)
    nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private sh -c \
        "hostname $name && mount --bind '$D/hosts' /etc/hosts && mount -t tmpfs -o mode=1777 tmpfs /tmp && touch '$D/$name.ready' && exec sleep 100000" &
    HOLDER[$name]=$!
    disown $!
    holders+=($!)
    echo $! > "$D/$name.pid"
done
for name in head node1 node2; do
    for _ in $(seq 100); do [ -e "$D/$name.ready" ] && break; sleep 0.05; done
    [ -e "$D/$name.ready" ] || { say "node $name did not come up"; exit 1; }
done
# on NODE CMD…: run CMD inside NODE's namespaces.
on() {
    local n=$1
    shift
    nsenter -t "${HOLDER[$n]}" --net --uts --mount -- "$@"
}
[ "$(on node2 hostname)" = node2 ] || { say "node2's host name is $(on node2 hostname)"; exit 1; }
[ "$(on node1 getent hosts node2 | awk '{print $1}')" = 10.77.0.2 ] || { say "node1 does not resolve node2"; exit 1; }
say "nodes up: head 10.77.0.254, node1 10.77.0.1, node2 10.77.0.2"

# The agent Open MPI and Hydra start their daemons with, instead of ssh:
# `enter [options] HOST COMMAND…` runs COMMAND in HOST's namespaces.
cat > "$D/enter" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1
shift
[ -r "$D/\$host.pid" ] || { echo "enter: no node \$host" >&2; exit 255; }
exec nsenter -t "\$(cat "$D/\$host.pid")" --net --uts --mount -- sh -c "\$*"
EOF
chmod 755 "$D/enter"

failed=0
# check NAME LOG RANKS: the job's log holds RANKS passed rank programs.
check() {
    local name=$1 log=$2 want=$3 rc=$4 secs=$5
    local got
    # Ranks share the log, so libtest's lines may interleave; this piece
    # of its summary is written whole, once per passed rank.
    got=$(grep -o '\. 1 passed; 0 failed' "$log" | wc -l || true)
    if [ "$rc" = 0 ] && [ "$got" = "$want" ]; then
        printf 'two-nodes: %-34s ok   %6.2f s\n' "$name" "$secs" >&2
        # Rank 0's report (FASTMSG_VERBOSE_ENV=1): its host and wire-up.
        grep -oE 'fastmsg [0-9.]+: rank 0 of .*|^wire-up between hosts.*' "$log" | sed 's/^/    /' >&2 || true
    else
        printf 'two-nodes: %-34s FAIL (rc %s, %s of %s ranks passed)\n' "$name" "$rc" "$got" "$want" >&2
        tail -40 "$log" | sed 's/^/    /' >&2
        failed=1
    fi
}
# job NAME LAUNCHER-COMMAND…: run on the head, bounded, logged, timed.
job() {
    local name=$1
    shift
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    on head timeout -k 5 "$LIMIT" "$@" >"$D/$name.out" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    JOB_RC=$rc
    JOB_SECS=$(awk "BEGIN{print $t1 - $t0}")
}
# The rank programs: NAME BINARY TEST SCENARIO.
PROGRAMS=(
    "storm $FM_NET_HOSTS net_rank_program storm"
    "pingpong $FM_NET_HOSTS net_rank_program pingpong"
    "collective $FM_NET_HOSTS net_rank_program collective"
    "collectives $FM_NET_COLL net_coll_rank collectives"
)
TEST_ARGS=(--exact --nocapture --test-threads 1)

# ---- Slurm ----
slurm_ok=0
if part slurm || part timing; then
    missing=""
    for t in munged slurmctld slurmd srun sbatch sinfo; do command -v $t >/dev/null || missing="$missing $t"; done
    if [ -n "$missing" ]; then
        say "Slurm skipped: no$missing (apt-get install slurm-wlm munge)"
    else
        . scripts/slurm-conf.sh
        start_munged "$D" || say "munged did not start (see $D/munged.log)"
        write_slurm_conf "$D" fm2n head "node[1-2]" 4 SlurmdParameters=config_overrides
        mkdir -p "$D/spool-node1" "$D/spool-node2"
        on head slurmctld -D -i >"$D/slurmctld.err" 2>&1 &
        pids+=($!)
        on node1 slurmd -D >"$D/slurmd-node1.err" 2>&1 &
        pids+=($!)
        on node2 slurmd -D >"$D/slurmd-node2.err" 2>&1 &
        pids+=($!)
        state=""
        for _ in $(seq 150); do
            state=$(on head sinfo -h -o %t 2>/dev/null | sort -u | tr '\n' ' ' || true)
            [ "$state" = "idle " ] && [ "$(on head sinfo -h -N -o %N | sort -u | wc -l)" = 2 ] && break
            sleep 0.2
        done
        if [ "$state" = "idle " ]; then
            slurm_ok=1
            say "Slurm up: slurmctld on head, slurmd on node1 and node2 ($(on head sinfo -h -N -o '%N:%t' | tr '\n' ' '))"
        else
            say "Slurm did not come up (nodes: ${state:-unknown}); logs in $D"
            tail -n 5 "$D"/slurm*.log >&2 || true
            failed=1
        fi
    fi
fi
if part slurm && [ $slurm_ok = 1 ]; then
    for mpi in pmix pmi2; do
        for p in "${PROGRAMS[@]}"; do
            read -r pname bin test scenario <<<"$p"
            : > "$D/arrivals"
            job "srun-$mpi-$pname" env FASTMSG_VERBOSE_ENV=1 FMTEST_LAUNCHED="srun-$mpi" FASTMSG_TEST_SCENARIO=$scenario \
                FMTEST_ARRIVALS="$D/arrivals" \
                srun --mpi=$mpi -N 2 -n 4 --ntasks-per-node=2 -t 5 "$bin" "$test" "${TEST_ARGS[@]}"
            check "srun --mpi=$mpi -N 2 -n 4 $pname" "$D/srun-$mpi-$pname.out" 4 $JOB_RC "$JOB_SECS"
        done
    done
    # A batch job on two nodes: the script runs on node1, its steps on both.
    cat > "$D/job.sbatch" <<EOF
#!/bin/sh
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --time=5
export FMTEST_LAUNCHED=srun-pmix
export FASTMSG_TEST_SCENARIO=storm
srun --mpi=pmix "$FM_NET_HOSTS" net_rank_program --exact --nocapture --test-threads 1
EOF
    job sbatch-storm sbatch --wait -o "$D/sbatch-storm.log" "$D/job.sbatch"
    cat "$D/sbatch-storm.log" >>"$D/sbatch-storm.out" 2>/dev/null || true
    check "sbatch --nodes=2 (srun --mpi=pmix) storm" "$D/sbatch-storm.out" 4 $JOB_RC "$JOB_SECS"
fi

# ---- Open MPI ----
OMPI=(mpirun.openmpi --allow-run-as-root --mca plm_rsh_agent "$D/enter"
      --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24
      --bind-to none)
ompi_ok=0
if part ompi || part timing; then
    if command -v mpirun.openmpi >/dev/null; then ompi_ok=1; else say "Open MPI skipped: no mpirun.openmpi (apt-get install openmpi-bin)"; fi
fi
if part ompi && [ $ompi_ok = 1 ]; then
    for p in "${PROGRAMS[@]}"; do
        read -r pname bin test scenario <<<"$p"
        : > "$D/arrivals"
        job "mpirun-$pname" "${OMPI[@]}" --host node1:2,node2:2 -n 4 \
            -x FASTMSG_VERBOSE_ENV=1 -x FMTEST_LAUNCHED=mpirun -x FASTMSG_TEST_SCENARIO=$scenario -x FMTEST_ARRIVALS="$D/arrivals" \
            "$bin" "$test" "${TEST_ARGS[@]}"
        check "mpirun --host node1:2,node2:2 $pname" "$D/mpirun-$pname.out" 4 $JOB_RC "$JOB_SECS"
    done
fi

# ---- MPICH ----
HYDRA=(mpiexec.hydra -launcher rsh -launcher-exec "$D/enter")
mpich_ok=0
if part mpich || part timing; then
    if command -v mpiexec.hydra >/dev/null; then mpich_ok=1; else say "MPICH skipped: no mpiexec.hydra (apt-get install mpich)"; fi
fi
if part mpich && [ $mpich_ok = 1 ]; then
    for p in "${PROGRAMS[@]}"; do
        read -r pname bin test scenario <<<"$p"
        : > "$D/arrivals"
        job "mpiexec-$pname" env FASTMSG_VERBOSE_ENV=1 FMTEST_LAUNCHED=mpiexec-pmi1 FASTMSG_TEST_SCENARIO=$scenario \
            FMTEST_ARRIVALS="$D/arrivals" \
            "${HYDRA[@]}" -hosts node1:2,node2:2 -n 4 "$bin" "$test" "${TEST_ARGS[@]}"
        check "mpiexec -hosts node1:2,node2:2 $pname" "$D/mpiexec-$pname.out" 4 $JOB_RC "$JOB_SECS"
    done
fi

# ---- start-up time, 2 nodes x 4 ranks ----
if part timing; then
    # slowest NAME CMD…: RUNS runs; the median over runs of the slowest
    # rank's "startup-ms" (launch to after start/MPI_Init and a barrier).
    slowest() {
        local name=$1
        shift
        local r vals=""
        for r in $(seq "$RUNS"); do
            local t0
            t0=$(date +%s%N)
            rc=0
            on head timeout -k 5 "$LIMIT" env FMTEST_T0="$t0" "$@" >"$D/time-$name-$r.out" 2>&1 || rc=$?
            local n
            # Ranks share the log: their lines may interleave, each
            # "startup-ms RANK MS" is written whole.
            grep -oE 'startup-ms [0-9]+ [0-9.]+' "$D/time-$name-$r.out" >"$D/time-$name-$r.ms" || true
            n=$(wc -l <"$D/time-$name-$r.ms")
            if [ $rc != 0 ] || [ "$n" != 8 ]; then
                say "timing $name run $r failed (rc $rc, $n of 8 ranks)"
                tail -15 "$D/time-$name-$r.out" | sed 's/^/    /' >&2
                echo "failed"
                return
            fi
            vals="$vals $(awk '{ if ($3 > m) m = $3 } END { print m }' "$D/time-$name-$r.ms")"
        done
        echo "$vals" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ a[NR] = $1 } END { printf "%.0f ms (runs:", a[int((NR + 1) / 2)]; for (i = 1; i <= NR; i++) printf " %.0f", a[i]; printf ")" }'
    }
    FM_START=("$FM_TWO_NODES" startup_rank "${TEST_ARGS[@]}")
    ompi_c=""; mpich_c=""
    if command -v mpicc.openmpi >/dev/null; then
        mpicc.openmpi -O2 -o "$D/mpi_init_ompi" scripts/mpi_init_time.c && ompi_c="$D/mpi_init_ompi"
    fi
    if command -v mpicc.mpich >/dev/null; then
        mpicc.mpich -O2 -o "$D/mpi_init_mpich" scripts/mpi_init_time.c && mpich_c="$D/mpi_init_mpich"
    fi
    rows=()
    if [ $slurm_ok = 1 ]; then
        for mpi in pmix pmi2; do
            f=$(slowest "srun-$mpi-fastmsg" srun --mpi=$mpi -N 2 -n 8 -t 5 "${FM_START[@]}")
            m="n/a"
            # Debian's Open MPI speaks PMIx only ("not built with SLURM's
            # PMI support" under --mpi=pmi2): MPICH beside PMI-2.
            if [ $mpi = pmix ] && [ -n "$ompi_c" ]; then
                m="$(slowest "srun-$mpi-ompi" srun --mpi=$mpi -N 2 -n 8 -t 5 "$ompi_c") (Open MPI)"
            elif [ $mpi = pmi2 ] && [ -n "$mpich_c" ]; then
                m="$(slowest "srun-$mpi-mpich" srun --mpi=$mpi -N 2 -n 8 -t 5 "$mpich_c") (MPICH)"
            fi
            rows+=("srun --mpi=$mpi -N 2 -n 8|$f|$m")
        done
    fi
    if [ $ompi_ok = 1 ]; then
        f=$(slowest mpirun-fastmsg "${OMPI[@]}" --host node1:4,node2:4 -n 8 -x FMTEST_T0 "${FM_START[@]}")
        m="n/a"
        [ -n "$ompi_c" ] && m="$(slowest mpirun-ompi "${OMPI[@]}" --host node1:4,node2:4 -n 8 -x FMTEST_T0 "$ompi_c") (Open MPI)"
        rows+=("mpirun --host node1:4,node2:4 -n 8|$f|$m")
    fi
    if [ $mpich_ok = 1 ]; then
        f=$(slowest mpiexec-fastmsg "${HYDRA[@]}" -hosts node1:4,node2:4 -n 8 "${FM_START[@]}")
        m="n/a"
        [ -n "$mpich_c" ] && m="$(slowest mpiexec-mpich "${HYDRA[@]}" -hosts node1:4,node2:4 -n 8 "$mpich_c") (MPICH)"
        rows+=("mpiexec -hosts node1:4,node2:4 -n 8|$f|$m")
    fi
    echo
    echo "start-up, 2 nodes x 4 ranks: launch to after start (MPI_Init) and a barrier, slowest rank, median of $RUNS"
    printf '| %-36s | %-34s | %-44s |\n' launcher "fastmsg (start + barrier)" "MPI_Init + MPI_Barrier"
    for r in "${rows[@]}"; do
        IFS='|' read -r a b c <<<"$r"
        printf '| %-36s | %-34s | %-44s |\n' "$a" "$b" "$c"
        case "$b" in failed*) failed=1 ;; esac
    done
fi
exit $failed
