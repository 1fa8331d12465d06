#!/bin/bash
# Over rwin's own tcp: Bruck against the one-round algorithms (ring allreduce; direct allgather,
# reduce_scatter, all_to_all), forced by the tuning files beside this script, and Open MPI (btl tcp),
# interleaved in every round (bench/RESULTS.md 2026-12-06 "Own tcp: where Bruck stops paying").
#   bash bench/results/owntcp-crossover-2026-12-06/run.sh        (OUT=dir, ROUNDS, NPS, SIZES, ITERS)
#   RWIN_ENV="RWIN_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo" ...: the same over UCX's tcp
B=${BIN:-build/bin}; HERE=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-$HERE/raw}; mkdir -p $OUT
ORTE=(--allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed --mca oob_tcp_if_include lo --mca osc ^rdma)
COMMON=(-t allreduce,allgather,reduce_scatter,all_to_all -s ${SIZES:-8K,16K,32K,64K} -n ${ITERS:-100} -w 5 --dtype f32 --op sum)
for r in $(seq 1 ${ROUNDS:-3}); do
 for np in ${NPS:-4 6 8}; do
  for a in bruck flat; do
   env ${RWIN_ENV:-RWIN_TRANSPORT=tcp RWIN_IFNAME=lo} RWIN_COLL_TUNING=$HERE/$a.json $B/rwinrun -n $np --timeout 300 -- $B/rwin-perf "${COMMON[@]}" \
     --label owntcp -o $OUT/${a}_${np}_r$r.csv --csv >/dev/null 2>&1 || echo "$a fail $np"
  done
  timeout 300 mpirun "${ORTE[@]}" -np $np --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo $B/rwin_mpi_collectives \
    "${COMMON[@]}" --transport owntcp -o $OUT/mpi_${np}_r$r.csv >/dev/null 2>&1 || echo "mpi fail $np"
 done
done
