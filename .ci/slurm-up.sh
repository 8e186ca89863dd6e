#!/usr/bin/env bash
# Bring up a one-node Slurm (munged, slurmctld, slurmd) for the tests, as root, without
# systemd. Usage: .ci/slurm-up.sh DIR. Installs Debian's slurm-wlm and munge when missing,
# keeps all state under DIR, writes DIR/slurm.conf (export SLURM_CONF=DIR/slurm.conf to use
# it) and DIR/pids (stop them with .ci/slurm-down.sh DIR). Daemons listen on 127.0.0.1 only.
# Exit 0 once the node is idle; non-zero (with the reason on stderr) when it cannot be.
set -euo pipefail
dir=$(realpath -m "${1:?usage: slurm-up.sh DIR}")
mkdir -p "$dir/ctld" "$dir/spool"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "slurm-up: not root, cannot apt-get install slurm-wlm munge" >&2; exit 3; }
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
: > "$dir/pids"

# munge: the package's key (created if missing); socket, pid and log in /run/munge, which
# the munge user owns (DIR may be a folder it cannot enter)
install -d -o munge -g munge -m 0755 /run/munge
key=/etc/munge/munge.key
if [ ! -s "$key" ]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
    chown munge:munge "$key"; chmod 0400 "$key"
fi
socket=/run/munge/munge.socket.2
munge_ok() { munge -n -S "$socket" 2>/dev/null | unmunge -S "$socket" >/dev/null 2>&1; }
if ! munge_ok; then
    rm -f "$socket" /run/munge/munged.pid
    runuser -u munge -- munged --foreground --key-file="$key" --socket="$socket" \
        --pid-file=/run/munge/munged.pid --log-file=/run/munge/munged.log \
        --seed-file=/run/munge/munged.seed > "$dir/munged.out" 2>&1 &
    echo "$!" >> "$dir/pids"
    for _ in $(seq 50); do munge_ok && break; sleep 0.1; done
    munge_ok || { echo "slurm-up: munged did not start: $(tail -n 3 "$dir/munged.out")" >&2; exit 5; }
    cat /run/munge/munged.pid >> "$dir/pids"  # munged itself (runuser's child), to check
fi

host=$(hostname -s)
node=$(slurmd -C | head -n1)
cat > "$dir/slurm.conf" <<CONF
ClusterName=simrun-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -D -f "$SLURM_CONF" > "$dir/slurmctld.out" 2>&1 &
echo "$!" >> "$dir/pids"
slurmd -D -f "$SLURM_CONF" > "$dir/slurmd.out" 2>&1 &
echo "$!" >> "$dir/pids"
deadline=$((SECONDS + 20))
while [ "$SECONDS" -lt "$deadline" ]; do
    state=$(timeout 3 sinfo -h -o %T 2>/dev/null || true)
    [ "$state" = idle ] && { echo "slurm-up: node idle (SLURM_CONF=$SLURM_CONF)"; exit 0; }
    sleep 0.1
done
echo "slurm-up: the node did not become idle (state '${state:-none}'); see $dir/*.log" >&2
tail -n 5 "$dir"/slurmctld.log "$dir"/slurmd.log >&2 || true
exit 4
