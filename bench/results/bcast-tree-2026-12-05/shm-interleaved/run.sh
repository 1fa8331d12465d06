#!/bin/bash
# Broadcast, tree (built-in) vs direct (forced by ../direct.json) vs Open MPI, interleaved in every round
# (bench/RESULTS.md 2026-12-05 "Broadcast by binomial tree"). Run from the checkout:
#   NPS="8 4" TRS=shm bash bench/results/bcast-tree-2026-12-05/shm-interleaved/run.sh
B=${BIN:-build/bin}; OUT=${OUT:-/tmp/treecmp}; DIRECT=$(cd "$(dirname "$0")/.." && pwd)/direct.json; mkdir -p $OUT
ORTE=(--allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed --mca oob_tcp_if_include lo --mca osc ^rdma)
COMMON=(-t broadcast -s ${SIZES:-8,64,512,4K} -n ${ITERS:-300} -w 5 --dtype f32 --op sum)
for r in 1 2 3 4 5; do
 for np in ${NPS:-4 8}; do
  for tr in ${TRS:-tcp shm}; do
   envs=(UCX_TLS=posix,sysv,self); [[ $tr == tcp ]] && envs=(UCX_TLS=tcp UCX_NET_DEVICES=lo)
   btl=(--mca pml ob1 --mca btl vader,self); [[ $tr == tcp ]] && btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
   env "${envs[@]}" RWIN_COLL_TUNING=$DIRECT $B/rwinrun -n $np --timeout 300 -- $B/rwin-perf "${COMMON[@]}" --label $tr -o $OUT/direct_${tr}_${np}_r$r.csv --csv >/dev/null 2>&1 || echo "direct fail $tr $np"
   env "${envs[@]}" $B/rwinrun -n $np --timeout 300 -- $B/rwin-perf "${COMMON[@]}" --label $tr -o $OUT/tree_${tr}_${np}_r$r.csv --csv >/dev/null 2>&1 || echo "tree fail $tr $np"
   timeout 300 mpirun "${ORTE[@]}" -np $np "${btl[@]}" $B/rwin_mpi_collectives "${COMMON[@]}" --transport $tr -o $OUT/mpi_${tr}_${np}_r$r.csv >/dev/null 2>&1 || echo "mpi fail $tr $np"
  done
 done
done
