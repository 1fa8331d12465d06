#!/bin/bash
# broadcast: direct / tree / chain forced by the tuning files beside this script, Open MPI beside them,
# interleaved in every round, over shared memory and rwin's own tcp (bench/RESULTS.md 2026-12-06).
#   bash bench/results/bcast-crossover-2026-12-06/run.sh        (OUT, ROUNDS, NPS, SIZES, ITERS, TRS)
B=${BIN:-build/bin}; HERE=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-$HERE/raw}; mkdir -p $OUT
ORTE=(--allow-run-as-root --oversubscribe --map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed --mca oob_tcp_if_include lo --mca osc ^rdma)
COMMON=(-t broadcast -s ${SIZES:-64K,256K,1M,4M} -n ${ITERS:-50} -w 3 --dtype f32)
for r in $(seq 1 ${ROUNDS:-2}); do
 for np in ${NPS:-4 8}; do
  for tr in ${TRS:-shm owntcp}; do
   if [[ $tr == shm ]]; then E="UCX_TLS=posix,sysv,self"; btl=(--mca pml ob1 --mca btl vader,self)
   else E="RWIN_TRANSPORT=tcp RWIN_IFNAME=lo"; btl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo); fi
   for a in direct tree chain; do
    env $E RWIN_COLL_TUNING=$HERE/$a.json $B/rwinrun -n $np --timeout 300 -- $B/rwin-perf "${COMMON[@]}" --label $tr \
      -o $OUT/${a}_${tr}_${np}_r$r.csv --csv >/dev/null 2>&1 || echo "$a $tr fail $np"
   done
   timeout 300 mpirun "${ORTE[@]}" -np $np "${btl[@]}" $B/rwin_mpi_collectives "${COMMON[@]}" --transport $tr \
     -o $OUT/mpi_${tr}_${np}_r$r.csv >/dev/null 2>&1 || echo "mpi $tr fail $np"
  done
 done
done
