#!/bin/bash
# allreduce over UCX tcp: bruck / ring / mesh forced by the tuning files beside this script, and Open MPI,
# interleaved in every round (bench/RESULTS.md 2026-12-05 "Allreduce over tcp: where Bruck stops paying").
#   bash bench/results/allreduce-crossover-2026-12-05/run.sh            (run1: 4K..64K, 4 and 8 ranks, 3 rounds)
#   ROUNDS=5 NPS="8 6 4" SIZES=16K,32K,64K ALGOS="bruck ring" bash ...   (run2)
B=${BIN:-build/bin}; OUT=${OUT:-/tmp/ar/out}; HERE=$(cd "$(dirname "$0")" && pwd); mkdir -p $OUT
ORTE=(--allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed --mca oob_tcp_if_include lo --mca osc ^rdma)
COMMON=(-t allreduce -s ${SIZES:-4K,8K,16K,32K,64K} -n ${ITERS:-200} -w 5 --dtype f32 --op sum)
for r in $(seq 1 ${ROUNDS:-3}); do
 for np in ${NPS:-4 8}; do
  tr=tcp; envs=(UCX_TLS=tcp UCX_NET_DEVICES=lo); btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  for a in ${ALGOS:-bruck ring mesh}; do
   env "${envs[@]}" RWIN_COLL_TUNING=$HERE/$a.json $B/rwinrun -n $np --timeout 300 -- $B/rwin-perf "${COMMON[@]}" --label $tr -o $OUT/${a}_${tr}_${np}_r$r.csv --csv >/dev/null 2>&1 || echo "$a fail $np"
  done
  timeout 300 mpirun "${ORTE[@]}" -np $np "${btl[@]}" $B/rwin_mpi_collectives "${COMMON[@]}" --transport $tr -o $OUT/mpi_${tr}_${np}_r$r.csv >/dev/null 2>&1 || echo "mpi fail $np"
 done
done
