#!/usr/bin/env bash
# Issue 27's "under load" goal: allreduce and broadcast of 8 B over shared memory, rwin against Open MPI
# (ob1/vader) in the same run, with one CPU-bound process per core beside the job (stress-ng --cpu
# $(nproc)), as a runtime computes beside its communication; rounds interleaved. Prints csv.
#   bench/coll_under_load.sh [BUILD_DIR=build] [ROUNDS=3]     env: N (calls, 20000), NPS ("2 4")
# 4 ranks on 2 cores plus 2 hogs take minutes per round (both tools: ms per allreduce).
set -u
B=${1:-build} ROUNDS=${2:-3} N=${N:-20000}
ORTE=(--allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed --mca oob_tcp_if_include lo --mca osc ^rdma --mca pml ob1 --mca btl vader,self)
stress-ng --cpu "$(nproc)" --timeout 900 >/dev/null 2>&1 & hog=$!
trap 'kill $hog 2>/dev/null' EXIT
sleep 1
echo "round,tool,np,coll,size,iters,p50_us,avg_us"
for r in $(seq 1 "$ROUNDS"); do
  for np in ${NPS:-2 4}; do
    UCX_TLS=posix,sysv,self timeout 300 "$B/bin/rwinrun" -n $np -- "$B/bin/rwin-perf" -t allreduce,broadcast -s 8 -n "$N" -w 200 2>/dev/null |
      awk -v r=$r -v np=$np '$1 == "[0]" && $6 == "|" && $3 ~ /^[0-9]+$/ {print r ",rwin," np "," $2 "," $3 "," $5 "," $7 "," $8}'
    timeout 300 mpirun "${ORTE[@]}" -np $np "$B/bin/rwin_mpi_collectives" -t allreduce,broadcast -s 8 -n "$N" -w 200 2>/dev/null |
      sed 's/^\[0\] //' | awk -v r=$r -v np=$np '$5 == "|" && $2 ~ /^[0-9]+$/ {print r ",mpi," np "," $1 "," $2 "," $4 "," $6 "," $7}'
  done
done
