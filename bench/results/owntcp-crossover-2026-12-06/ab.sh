#!/bin/bash
# The defaults now against the old ones, interleaved: "old" sets RWIN_COLL_BRUCK_MAX=64K and
# RWIN_ALLREDUCE_MESH_MAX=8K explicitly, which switches off the measured rules that apply only while
# those knobs are unset (core/src/collectives/tuning.cpp) and leaves the table as it was before them.
#   bash bench/results/owntcp-crossover-2026-12-06/ab.sh      (OUT, ROUNDS, NPS, SIZES)
B=${BIN:-build/bin}; HERE=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-$HERE/ab}; mkdir -p $OUT
COMMON=(-t allreduce,reduce_scatter -s ${SIZES:-4K,8K,16K,64K} -n ${ITERS:-100} -w 5 --dtype f32)
for r in $(seq 1 ${ROUNDS:-3}); do
 for tr in own ucx; do
  if [[ $tr == own ]]; then E="RWIN_TRANSPORT=tcp RWIN_IFNAME=lo"; else E="RWIN_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo"; fi
  for np in ${NPS:-4 8}; do
   env $E $B/rwinrun -n $np -- $B/rwin-perf "${COMMON[@]}" --label $tr -o $OUT/new_${tr}_${np}_r$r.csv --csv >/dev/null 2>&1 || echo "new $tr $np fail"
   env $E RWIN_COLL_BRUCK_MAX=64K RWIN_ALLREDUCE_MESH_MAX=8K $B/rwinrun -n $np -- $B/rwin-perf "${COMMON[@]}" --label $tr \
     -o $OUT/old_${tr}_${np}_r$r.csv --csv >/dev/null 2>&1 || echo "old $tr $np fail"
  done
 done
done
