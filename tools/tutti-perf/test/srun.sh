#!/bin/sh
# Two tutti-perf processes started as srun starts tasks (SLURM_PROCID,
# SLURM_NTASKS, SLURM_LOCALID, step variables, a node list) and without
# NCCL_COMM_ID: they must find the rendezvous as the library's launcher
# reader does (the list's first host, a port from the job and step ids).
set -u
perf=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
unset NCCL_COMM_ID RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT
export SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_JOB_ID=$$ SLURM_STEP_NODELIST=localhost
export SLURM_STEP_TASKS_PER_NODE=2
for r in 0 1; do
  SLURM_PROCID=$r SLURM_LOCALID=$r "$perf" allreduce -b 8 -e 64K -f 16 -n 2 -w 1 >"$dir/out$r" 2>&1 &
  eval "pid$r=\$!"
done
rc=0
wait "$pid0" || rc=1
wait "$pid1" || rc=1
cat "$dir/out0"
echo "--- process 1:"
cat "$dir/out1"
grep -q "2 ranks: 2 processes" "$dir/out0" || rc=1
exit $rc
