#!/usr/bin/env bash
# A single-node SLURM cluster on localhost, for the SLURM tests and CI (Debian, root):
#   bash workflow/scripts/local_slurm.sh start    # install if needed, configure, start, wait until idle
#   bash workflow/scripts/local_slurm.sh stop
#   bash workflow/scripts/local_slurm.sh status
# Idempotent. The node declares one fake A100 (gres file = an empty regular file) so that CI can
# prove that the workflow's GPU tag reaches sbatch; the jobs themselves run on the CPU.
# Accounting is off (no slurmdbd), so the profile queries job status with squeue.
set -euo pipefail

CONF_DIR=/etc/slurm
STATE=/var/lib/icmlrepro-slurm
HOST=$(hostname -s)

install() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
  fi
}

configure() {
  mkdir -p "$CONF_DIR" "$STATE/spool/ctld" "$STATE/spool/d" "$STATE/log"
  : > "$STATE/fake-a100"   # gres File= must name a regular file, or the node drains
  local cpus mem
  cpus=$(nproc)
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  mem=$(( mem > 2048 ? mem - 1024 : mem ))   # leave a margin for the daemons
  cat > "$STATE/slurm.conf.new" <<CONF
ClusterName=icmlrepro
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SchedulerType=sched/backfill
GresTypes=gpu
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} Gres=gpu:a100:1 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=${HOST} Name=gpu Type=a100 File=$STATE/fake-a100" > "$CONF_DIR/gres.conf"
  if ! cmp -s "$STATE/slurm.conf.new" "$CONF_DIR/slurm.conf"; then
    mv "$STATE/slurm.conf.new" "$CONF_DIR/slurm.conf"
    stop_daemons   # both daemons must read the same slurm.conf
  else
    rm -f "$STATE/slurm.conf.new"
  fi
}

stop_daemons() {
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
  for _ in $(seq 50); do { pgrep -x slurmd || pgrep -x slurmctld; } >/dev/null || break; sleep 0.1; done
}

start() {
  install
  mkdir -p /run/munge && chown munge:munge /run/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || /usr/sbin/create-munge-key -f; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
  configure
  pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
  pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
  for _ in $(seq 120); do
    state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
    case "$state" in
      idle|mixed|allocated) echo "slurm: node $HOST $state"; return 0 ;;
      *drain*|down*) scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
    esac
    sleep 0.5
  done
  echo "slurm: node $HOST did not become idle (state: ${state:-none}); see $STATE/log" >&2
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop_daemons; echo "slurm: stopped" ;;
  status) sinfo; squeue ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
