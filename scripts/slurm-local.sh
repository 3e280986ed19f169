#!/usr/bin/env bash
# A local Slurm on this machine (one slurmctld, one or more slurmd), for the tests and for trying
# job arrays out.
#
#   scripts/slurm-local.sh start [--nodes N]   install (Debian packages, if missing), configure, start
#                                              N slurmd (default 1), wait until every node is idle
#   scripts/slurm-local.sh status   sinfo and squeue; exit 0 only if this script's daemons are running
#   scripts/slurm-local.sh stop     stop every slurmd, slurmctld and (if this script started it) munged
#
# Debian/Ubuntu, as root. The config is /etc/slurm/slurm.conf and cgroup.conf (Slurm's default
# paths, so sbatch, squeue, scontrol find them without SLURM_CONF); one not written by this script is
# never overwritten. State, logs and pid files: /var/spool/slurm-local, /var/log/slurm-local,
# /run/slurm-local. Environment: SLURM_LOCAL_TIMEOUT (seconds to wait for the nodes, default 30).
#
# Nodes: one node is named after the host; N > 1 nodes are local1..localN, all on this host
# (`slurmd -N NAME`, a Port= each, %n in the spool, pid and log paths), of two node types by
# Features: odd nodes "type-a", even nodes "type-b" (one node: both). Each node offers the host's
# CPUs and memory, so N nodes share one host's cores: never a speed-up.
# Cgroups: where the machine has the v1 hierarchies Slurm's cgroup/v1 plugin asks for (cpuacct,
# memory, freezer, cpuset, devices), each job step is tracked and accounted in its own cgroup
# (proctrack/cgroup, task/cgroup, jobacct_gather/cgroup); else, or when slurmd does not come up
# with them, the plain plugins (proctrack/linuxproc, task/none, jobacct_gather/linux). The status
# line says which are on.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
CGROUP_CONF=/etc/slurm/cgroup.conf
MARK="# Written by lenet-levels scripts/slurm-local.sh; it rewrites this file on start."
RUN=/run/slurm-local
SPOOL=/var/spool/slurm-local
LOGS=/var/log/slurm-local
CTLD_PID=$RUN/slurmctld.pid
NODES_FILE=$RUN/nodes        # the nodes this script started, one a line
PLUGINS_FILE=$RUN/plugins    # which plugins are on, for the status line
MUNGE_OURS=$RUN/munged.ours  # present when this script started munged (so stop stops it)
MUNGE_PID=/run/munge/munged.pid
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-30}
PACKAGES=(slurmctld slurmd slurm-client munge)
FIRST_PORT=17001

say() { echo "slurm-local: $*"; }
die() { echo "slurm-local: ERROR: $*" >&2; exit 1; }

alive() {  # alive PIDFILE: the pid in the file names a running process
    local pid
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

slurmd_pidfile() { echo "$RUN/slurmd-$1.pid"; }  # slurmd_pidfile NODE

started_nodes() { if [[ -s $NODES_FILE ]]; then cat "$NODES_FILE"; fi; }

running() {
    local node any=0
    alive "$CTLD_PID" || return 1
    for node in $(started_nodes); do
        alive "$(slurmd_pidfile "$node")" || return 1
        any=1
    done
    ((any))
}

node_names() {  # node_names COUNT
    local i
    if (($1 == 1)); then
        hostname -s
        return
    fi
    for ((i = 1; i <= $1; i++)); do echo "local$i"; done
}

node_features() {  # node_features INDEX(from 1) COUNT
    if (($2 == 1)); then
        echo "type-a,type-b"
    elif (($1 % 2)); then
        echo "type-a"
    else
        echo "type-b"
    fi
}

cgroups_usable() {  # the v1 hierarchies Slurm's cgroup/v1 plugins ask for are mounted
    local c
    for c in cpuacct memory freezer cpuset devices; do
        awk -v c="$c" '$3 == "cgroup" && ("," $4 ",") ~ ("," c ",") {found = 1} END {exit !found}' /proc/mounts ||
            return 1
    done
}

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts daemons); try: sudo $0 ${1:-start}"
}

install_packages() {
    local missing=() cmd
    for cmd in slurmctld slurmd sbatch munged; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    command -v apt-get >/dev/null 2>&1 ||
        die "missing ${missing[*]} and no apt-get here: install Slurm (slurmctld slurmd sbatch) and munge yourself"
    say "installing ${PACKAGES[*]} (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/tmp/slurm-local-apt.log 2>&1; then
        apt-get update -qq >>/tmp/slurm-local-apt.log 2>&1 || true
        apt-get install -y --no-install-recommends "${PACKAGES[@]}" >>/tmp/slurm-local-apt.log 2>&1 ||
            { tail -n 20 /tmp/slurm-local-apt.log >&2; die "apt-get install ${PACKAGES[*]} failed (log: /tmp/slurm-local-apt.log)"; }
    fi
}

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    if munge_works; then
        say "munged already running"
        return 0
    fi
    install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile=/etc/munge/munge.key --force
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock "$MUNGE_PID"
    runuser -u munge -- munged --pid-file="$MUNGE_PID" || die "munged did not start; see /var/log/munge/munged.log"
    : >"$MUNGE_OURS"
    local i
    for ((i = 0; i < 50; i++)); do
        munge_works && return 0
        sleep 0.1
    done
    tail -n 20 /var/log/munge/munged.log >&2 || true
    die "munged started but munge -n | unmunge fails"
}

# The installed version, from the daemon (sinfo --version needs a config to exist).
slurm_version() { slurmd -V | awk '{print $2}'; }

version_ge() {  # version_ge A B: A >= B, for dotted numbers
    [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1) == "$2" ]]
}

check_ours() {  # check_ours FILE: absent, or written by this script
    if [[ -e $1 ]] && ! grep -qxF "$MARK" "$1"; then
        die "$1 exists and was not written by this script; move it away to use the local Slurm"
    fi
}

write_conf() {  # write_conf COUNT CGROUPS(yes|no) [WHY NOT]
    local count=$1 cgroups=$2 why=${3:-}
    check_ours "$CONF"
    check_ours "$CGROUP_CONF"
    local host shape version cpus realmem depend plugins nodes="" i
    local -a names
    host=$(hostname -s)
    # e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
    shape=$(slurmd -C | head -n 1)
    [[ $shape == NodeName=* ]] || die "slurmd -C printed no NodeName line: $shape"
    shape=${shape#* }
    cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$shape")
    realmem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$shape")
    [[ -n $cpus && -n $realmem ]] || die "cannot read CPUs/RealMemory from: $shape"
    mapfile -t names < <(node_names "$count")
    for ((i = 1; i <= count; i++)); do
        nodes+="NodeName=${names[i - 1]} "
        ((count == 1)) || nodes+="NodeHostname=$host NodeAddr=127.0.0.1 Port=$((FIRST_PORT + i - 1)) "
        nodes+="$shape Features=$(node_features "$i" "$count") State=UNKNOWN"$'\n'
    done
    if [[ $cgroups == yes ]]; then
        plugins="ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
# Each step's CPU time and memory read from its own cgroup; OverMemoryKill kills a step above its --mem.
JobAcctGatherType=jobacct_gather/cgroup"
    else
        plugins="ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# jobacct_gather/linux polls each step's RSS; OverMemoryKill kills a step above its --mem.
JobAcctGatherType=jobacct_gather/linux"
    fi
    version=$(slurm_version)
    # A job's start after an event (a submission, a job's end, a dependency met) waits for the next
    # scheduling pass, by default at most one each batch_sched_delay=3 s: a test waits on dozens of
    # such starts in a row, on a cluster too small to need the batching.
    # kill_invalid_depend moved from SchedulerParameters to DependencyParameters in Slurm 20.11.
    if version_ge "$version" 20.11; then
        depend="DependencyParameters=kill_invalid_depend
SchedulerParameters=batch_sched_delay=0"
    else
        depend="SchedulerParameters=kill_invalid_depend,batch_sched_delay=0"
    fi
    install -d -m 0755 "$(dirname "$CONF")"
    cat >"$CONF.tmp" <<EOF
$MARK
# Slurm $version, $count node(s), all on $host.
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
MailProg=/bin/true
$plugins
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job without --mem gets one CPU's share of the memory (the default is the whole node,
# which would run one job at a time).
DefMemPerCPU=$((realmem / cpus))
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
$depend
ReturnToService=2
# Finished jobs stay visible to scontrol for 10 minutes (no slurmdbd, so no sacct).
MinJobAge=600
KillWait=5
# A node whose slurmd stops answering is DOWN after this (its jobs requeued where they allow it).
SlurmdTimeout=30
# Small, as on a site with a limit: a class of a dozen is split into several arrays.
MaxArraySize=10
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d-%n
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
${nodes}PartitionName=debug Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$CGROUP_CONF.tmp" <<EOF
$MARK
CgroupPlugin=cgroup/v1
# Tracking and accounting only: the nodes share one host's cores and memory.
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
    mv "$CONF.tmp" "$CONF"
    chmod 0644 "$CONF"
    if [[ $cgroups == yes ]]; then
        mv "$CGROUP_CONF.tmp" "$CGROUP_CONF"
        chmod 0644 "$CGROUP_CONF"
        echo "cgroups on (cgroup/v1: proctrack/cgroup, task/cgroup, jobacct_gather/cgroup)" >"$PLUGINS_FILE"
    else
        rm -f "$CGROUP_CONF.tmp"
        echo "cgroups off (${why:-no v1 cgroup hierarchies}; proctrack/linuxproc, task/none," \
            "jobacct_gather/linux)" >"$PLUGINS_FILE"
    fi
    printf '%s\n' "${names[@]}" >"$NODES_FILE"
}

node_states() { timeout 5 sinfo -h -N -o %T 2>/dev/null | tr '\n' ' ' || true; }

wait_idle() {  # wait_idle COUNT: every node idle (or running jobs)
    local deadline=$((SECONDS + TIMEOUT)) states="" up
    while ((SECONDS < deadline)); do
        states=$(node_states)
        up=$(tr ' ' '\n' <<<"$states" | grep -cE '^(idle|mixed|allocated)$' || true)
        ((up == $1)) && return 0
        sleep 0.5
    done
    echo "slurm-local: ERROR: $1 node(s) not idle after ${TIMEOUT}s (sinfo states: '${states:-no answer}')" >&2
    local log
    for log in "$LOGS/slurmctld.log" "$LOGS"/slurmd-*.log; do
        echo "--- tail of $log" >&2
        tail -n 15 "$log" >&2 2>/dev/null || true
    done
    return 1
}

launch() {  # launch COUNT CGROUPS [WHY NOT]: configure, start the daemons, wait for the nodes
    local node
    write_conf "$@"
    slurmctld || { tail -n 15 "$LOGS/slurmctld.log" >&2 || true; return 1; }
    for node in $(started_nodes); do
        install -d -m 0755 "$SPOOL/d-$node"
        slurmd -N "$node" || { tail -n 15 "$LOGS/slurmd-$node.log" >&2 || true; return 1; }
    done
    wait_idle "$1"
}

start() {
    need_root start
    local count=1
    if [[ ${1:-} == --nodes ]]; then
        count=${2:-}
        [[ $count =~ ^[1-9][0-9]?$ ]] || die "--nodes: expected a whole number from 1 to 99, found '${2:-}'"
    elif [[ -n ${1:-} ]]; then
        die "start: unknown option '$1' (expected --nodes N)"
    fi
    if running; then
        say "already running ($(started_nodes | wc -l) node(s), slurmctld pid $(<"$CTLD_PID")); nothing to do"
        return 0
    fi
    local t0=$SECONDS
    install_packages
    # Half-started leftovers go first.
    stop_daemons quiet
    install -d -m 0755 "$RUN" "$SPOOL/ctld" "$LOGS"
    start_munge
    if ! cgroups_usable; then
        launch "$count" no || { stop_daemons quiet; die "Slurm did not come up; daemons stopped"; }
    elif ! launch "$count" yes; then
        say "Slurm did not come up with its cgroup plugins; starting it without them"
        stop_daemons quiet
        launch "$count" no "slurmd did not come up with cgroup/v1, see $LOGS" ||
            { stop_daemons quiet; die "Slurm did not come up; daemons stopped"; }
    fi
    say "running: $count node(s) [$(node_states)], $(<"$PLUGINS_FILE"), config $CONF, logs $LOGS," \
        "started in $((SECONDS - t0)) s"
}

stop_pidfile() {  # stop_pidfile NAME PIDFILE [quiet]: TERM, wait up to 10 s, then KILL
    local name=$1 file=$2 pid i
    if ! alive "$file"; then
        rm -f "$file"
        return 1
    fi
    pid=$(<"$file")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        say "$name (pid $pid) killed with SIGKILL"
    fi
    rm -f "$file"
    [[ ${3:-} == quiet ]] || say "stopped $name (pid $pid)"
}

stop_daemons() {  # every slurmd this script's config names (any pid file), then slurmctld
    local any=0 file
    for file in "$RUN"/slurmd-*.pid "$RUN"/slurmd.pid; do
        [[ -e $file ]] || continue
        stop_pidfile "$(basename "$file" .pid)" "$file" "${1:-}" && any=1
    done
    stop_pidfile slurmctld "$CTLD_PID" "${1:-}" && any=1
    ((any)) || [[ ${1:-} == quiet ]] || say "slurmd and slurmctld were not running"
}

stop() {
    need_root stop
    stop_daemons
    rm -f "$NODES_FILE" "$PLUGINS_FILE"
    if [[ -e $MUNGE_OURS ]]; then
        stop_pidfile munged "$MUNGE_PID" || true
        rm -f "$MUNGE_OURS"
    fi
}

status() {
    if running; then
        say "running: slurmctld pid $(<"$CTLD_PID"), slurmd on $(started_nodes | tr '\n' ' ')," \
            "$(<"$PLUGINS_FILE"), config $CONF"
        timeout 10 sinfo -N -o "%N %T %f %c %m" || true
        timeout 10 squeue || true
        return 0
    fi
    say "not running"
    return 3
}

case ${1:-} in
    start) start "${@:2}" ;;
    stop) stop ;;
    status) status ;;
    *)
        echo "usage: $0 start [--nodes N] | stop | status" >&2
        exit 2
        ;;
esac
