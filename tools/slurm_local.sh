#!/usr/bin/env bash
# A one-node Slurm cluster in a directory, for testing job arrays without a real cluster.
#   tools/slurm_local.sh check        exit 0 if the Slurm daemons and clients are installed, else 77
#   tools/slurm_local.sh start DIR    write DIR/slurm.conf, start slurmctld and slurmd, wait (30 s
#                                     at most) until the node is idle; prints the line to eval:
#                                     export SLURM_CONF=DIR/slurm.conf
#   tools/slurm_local.sh stop DIR     stop the two daemons started in DIR (by their pid files)
# Needs Debian's slurmctld, slurmd and slurm-client (22.05 in bookworm), which still ship
# auth/none, so no munge daemon is needed. No systemd: the daemons fork into the background and
# write their pid files into DIR. Everything (state, spool, logs) stays in DIR; the node is this
# host, reached at 127.0.0.1, with all its CPUs; the ports are picked free at start. Run as root
# (what CI does) or as any user (the daemons then run as that user and can only run its jobs).
set -euo pipefail

need=(slurmctld slurmd sbatch sinfo squeue scontrol)

check() {
  local b
  for b in "${need[@]}"; do
    command -v "$b" >/dev/null 2>&1 || { echo "slurm_local: $b not installed" >&2; return 77; }
  done
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local dir=$1 host user cpus p1 p2 i
  check || exit $?
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  case "$dir" in *[[:space:]]*) echo "slurm_local: DIR must not contain spaces" >&2; exit 2 ;; esac
  host=$(hostname -s)
  user=$(id -un)
  cpus=$(nproc)
  # Two consecutive free ports, starting from a place that depends on this shell's pid.
  p1=$((20000 + ($$ % 20000) * 2))
  for i in $(seq 1 200); do
    p2=$((p1 + 1))
    if port_free "$p1" && port_free "$p2"; then break; fi
    p1=$((20000 + (p1 - 20000 + 2) % 40000))
  done
  mkdir -p "$dir/state" "$dir/spool/$host" "$dir/log"
  cat >"$dir/slurm.conf" <<EOF
# Written by tools/slurm_local.sh: a one-node test cluster.
ClusterName=igentest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
AuthType=auth/none
CredType=cred/none
SlurmUser=$user
SlurmdUser=$user
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" >"$dir/log/slurmctld.start" 2>&1 || {
    cat "$dir/log/slurmctld.start" "$dir/log/slurmctld.log" >&2 2>/dev/null; exit 1; }
  slurmd -f "$SLURM_CONF" >"$dir/log/slurmd.start" 2>&1 || {
    cat "$dir/log/slurmd.start" "$dir/log/slurmd.log" >&2 2>/dev/null; stop "$dir"; exit 1; }
  for i in $(seq 1 60); do
    if [ "$(sinfo -h -N -o %t 2>/dev/null | head -1)" = idle ]; then
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.5
  done
  echo "slurm_local: the node did not come up in 30 s; sinfo says: $(sinfo -h -N -o '%t %E' 2>&1)" >&2
  tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
  stop "$dir"
  exit 1
}

stop() {
  local dir=$1 f pid i
  for f in slurmd slurmctld; do
    [ -f "$dir/$f.pid" ] || continue
    pid=$(cat "$dir/$f.pid")
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
      for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$dir/$f.pid"
  done
}

case "${1:-}" in
  check) check ;;
  start) [ $# -eq 2 ] || { echo "usage: $0 start DIR" >&2; exit 2; }; start "$2" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
