# Sourced by scripts/slurm-one-node.sh and scripts/two-nodes.sh: a
# throw-away Slurm's munged and slurm.conf, all files under one directory.
#
#   start_munged DIR            # its own key and socket; appends its pid to `pids`
#   write_slurm_conf DIR CLUSTER CTLD_HOST NODES CPUS [LINE...]
#       # writes DIR/slurm.conf (exports SLURM_CONF): root daemons, munge
#       # auth through DIR/munge.sock, state, spool (DIR/spool-<node>),
#       # pid and log files in DIR, no accounting, nodes NODES with CPUS
#       # CPUs each in one oversubscribed partition `fm`; LINEs are added.

start_munged() {
    local d=$1
    dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none
    chmod 400 "$d/munge.key"
    munged --foreground --force --key-file="$d/munge.key" --socket="$d/munge.sock" \
        --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munge.seed" \
        >"$d/munged.err" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [ -S "$d/munge.sock" ] && return 0; sleep 0.05; done
    return 1
}

write_slurm_conf() {
    local d=$1 cluster=$2 ctld=$3 nodes=$4 cpus=$5
    shift 5
    mkdir -p "$d/state"
    export SLURM_CONF="$d/slurm.conf"
    {
        cat <<EOF
ClusterName=$cluster
SlurmctldHost=$ctld
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge.sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool-%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
MpiDefault=none
NodeName=$nodes CPUs=$cpus State=UNKNOWN
PartitionName=fm Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
        for line in "$@"; do echo "$line"; done
    } >"$SLURM_CONF"
}
