#!/usr/bin/env bash
# A one-node Slurm on this machine, for the tests and for trying job arrays out.
#
#   scripts/slurm-local.sh start    install (Debian packages, if missing), configure, start, wait for idle
#   scripts/slurm-local.sh status   sinfo and squeue; exit 0 only if this script's daemons are running
#   scripts/slurm-local.sh stop     stop slurmd, slurmctld and (if this script started it) munged
#
# Debian/Ubuntu, as root. The config is /etc/slurm/slurm.conf (Slurm's default path, so sbatch,
# squeue, scontrol find it without SLURM_CONF); one not written by this script is never overwritten.
# State, logs and pid files: /var/spool/slurm-local, /var/log/slurm-local, /run/slurm-local.
# Environment: SLURM_LOCAL_TIMEOUT (seconds to wait for the node to be idle, default 20).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# Written by lenet-levels scripts/slurm-local.sh; it rewrites this file on start."
RUN=/run/slurm-local
SPOOL=/var/spool/slurm-local
LOGS=/var/log/slurm-local
CTLD_PID=$RUN/slurmctld.pid
SLURMD_PID=$RUN/slurmd.pid
MUNGE_OURS=$RUN/munged.ours      # present when this script started munged (so stop stops it)
MUNGE_PID=/run/munge/munged.pid
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-20}
PACKAGES=(slurmctld slurmd slurm-client munge)

say() { echo "slurm-local: $*"; }
die() { echo "slurm-local: ERROR: $*" >&2; exit 1; }

alive() {  # alive PIDFILE: the pid in the file names a running process
    local pid
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

running() { alive "$CTLD_PID" && alive "$SLURMD_PID"; }

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

write_conf() {
    if [[ -e $CONF ]] && ! grep -qxF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script; move it away to use the local Slurm"
    fi
    local host node version cpus realmem depend
    host=$(hostname -s)
    # e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
    node=$(slurmd -C | head -n 1)
    [[ $node == NodeName=* ]] || die "slurmd -C printed no NodeName line: $node"
    node="NodeName=$host ${node#* }"
    cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node")
    realmem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    [[ -n $cpus && -n $realmem ]] || die "cannot read CPUs/RealMemory from: $node"
    version=$(slurm_version)
    # kill_invalid_depend moved from SchedulerParameters to DependencyParameters in Slurm 20.11.
    if version_ge "$version" 20.11; then
        depend="DependencyParameters=kill_invalid_depend"
    else
        depend="SchedulerParameters=kill_invalid_depend"
    fi
    install -d -m 0755 "$(dirname "$CONF")"
    cat >"$CONF.tmp" <<EOF
$MARK
# Slurm $version, one node ($host).
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job without --mem gets one CPU's share of the memory (the default is the whole node,
# which would run one job at a time).
DefMemPerCPU=$((realmem / cpus))
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# jobacct_gather/linux polls each step's RSS; OverMemoryKill kills a step above its --mem.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
$depend
ReturnToService=2
# Finished jobs stay visible to scontrol for 10 minutes (no slurmdbd, so no sacct).
MinJobAge=600
KillWait=5
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
$node State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
    chmod 0644 "$CONF"
}

node_state() { timeout 5 sinfo -h -o %T 2>/dev/null | head -n 1; }

wait_idle() {
    local deadline=$((SECONDS + TIMEOUT)) state=""
    while ((SECONDS < deadline)); do
        state=$(node_state || true)
        case $state in
            idle | mixed | allocated) return 0 ;;
        esac
        sleep 0.5
    done
    echo "slurm-local: ERROR: node not idle after ${TIMEOUT}s (sinfo state: '${state:-no answer}')" >&2
    local log
    for log in "$LOGS/slurmctld.log" "$LOGS/slurmd.log"; do
        echo "--- tail of $log" >&2
        tail -n 15 "$log" >&2 2>/dev/null || true
    done
    return 1
}

start() {
    need_root start
    if running; then
        say "already running (slurmctld pid $(<"$CTLD_PID"), slurmd pid $(<"$SLURMD_PID")); nothing to do"
        return 0
    fi
    local t0=$SECONDS
    install_packages
    # Half-started leftovers (one daemon only) go first.
    stop_daemons quiet
    install -d -m 0755 "$RUN" "$SPOOL/ctld" "$SPOOL/d" "$LOGS"
    start_munge
    write_conf
    slurmctld || { tail -n 15 "$LOGS/slurmctld.log" >&2 || true; die "slurmctld did not start"; }
    slurmd || { tail -n 15 "$LOGS/slurmd.log" >&2 || true; die "slurmd did not start"; }
    if ! wait_idle; then
        stop_daemons quiet
        die "Slurm did not come up; daemons stopped"
    fi
    say "running: node $(hostname -s) $(node_state), config $CONF, logs $LOGS, started in $((SECONDS - t0)) s"
}

stop_pidfile() {  # stop_pidfile NAME PIDFILE: TERM, wait up to 10 s, then KILL
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

stop_daemons() {
    local any=0
    stop_pidfile slurmd "$SLURMD_PID" "${1:-}" && any=1
    stop_pidfile slurmctld "$CTLD_PID" "${1:-}" && any=1
    ((any)) || [[ ${1:-} == quiet ]] || say "slurmd and slurmctld were not running"
}

stop() {
    need_root stop
    stop_daemons
    if [[ -e $MUNGE_OURS ]]; then
        stop_pidfile munged "$MUNGE_PID" || true
        rm -f "$MUNGE_OURS"
    fi
}

status() {
    if running; then
        say "running: slurmctld pid $(<"$CTLD_PID"), slurmd pid $(<"$SLURMD_PID"), config $CONF"
        timeout 10 sinfo || true
        timeout 10 squeue || true
        return 0
    fi
    say "not running"
    return 3
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
