#!/usr/bin/env bash
# Installs SLURM and munge from Debian's packages and starts a single-node cluster on
# this machine (controller and compute node in one), for the SLURM tests.
# Idempotent: a cluster that already answers is left running. Needs root.
#   bash scripts/start_slurm_cluster.sh && srun -n 2 hostname
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

HOST=$(hostname)
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))

# munge: one key, daemon run as the munge user
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged
fi

install -d /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
NEW_CONF=$(mktemp)
cat > "${NEW_CONF}" <<CONF
ClusterName=mmfix
SlurmctldHost=${HOST}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
# A generic "gpu" resource without devices, so that 2.x tools/slurm_train.sh (which always
# asks for --gres=gpu:N) schedules on this CPU-only node; tasks run on the CPU.
GresTypes=gpu
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=30
NodeName=${HOST} CPUs=${CPUS} RealMemory=${MEM_MB} Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

if cmp -s "${NEW_CONF}" /etc/slurm/slurm.conf && timeout 10 srun -n 1 --quiet true >/dev/null 2>&1; then
    rm -f "${NEW_CONF}"
    echo "slurm: cluster already running with this configuration"
    exit 0
fi
mv "${NEW_CONF}" /etc/slurm/slurm.conf
chmod 0644 /etc/slurm/slurm.conf
# slurmd counts a gpu gres only with files behind it; plain files do (task/none uses no cgroups).
install -d /var/lib/slurm-fake-gpus
for i in 0 1 2 3 4 5 6 7; do touch "/var/lib/slurm-fake-gpus/gpu${i}"; done
cat > /etc/slurm/gres.conf <<CONF
NodeName=${HOST} Name=gpu File=/var/lib/slurm-fake-gpus/gpu[0-7]
CONF

pkill -x slurmctld 2>/dev/null || true
pkill -x slurmd 2>/dev/null || true
sleep 1
# -c: start from a clean slate. A controller restarted on the saved state brings back the
# jobs of whatever ran before (an earlier test run killed part-way), which keep the one node
# ALLOCATED and every srun below waiting for it; this cluster is ours, its old jobs are not.
/usr/sbin/slurmctld -c
/usr/sbin/slurmd -c

for _ in $(seq 1 60); do
    if timeout 10 srun -n 2 --quiet hostname >/dev/null 2>&1; then
        echo "slurm: single-node cluster up on ${HOST} (${CPUS} CPUs)"
        exit 0
    fi
    scontrol update NodeName="${HOST}" State=RESUME >/dev/null 2>&1 || true
    scontrol update NodeName="${HOST}" State=UNDRAIN >/dev/null 2>&1 || true
    sleep 1
done
echo "slurm: the cluster did not come up; logs:" >&2
tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
