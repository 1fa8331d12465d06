#!/bin/bash
# coll_ab.sh ROUNDS NP OLD NEW > out.csv: collectives over own tcp at NP ranks (rwin-perf -n 300, 8 B-1 MiB), OLD then NEW within each round (dirs as in ../tcp-tail-read-2026-12-07/ab.sh). Columns: round,O|N,coll,size,p50_us.
R=$1 np=$2 old=$3 new=$4
for r in $(seq 1 $R); do
  for v in O N; do
    d=$old; [[ $v == N ]] && d=$new
    RWIN_TRANSPORT=tcp LD_LIBRARY_PATH=$d/core timeout -s KILL 300 $d/bin/rwinrun -n $np -- $d/bin/rwin-perf -n 300 -s 8,4K,64K,1M \
      -t allreduce,allgather,reduce_scatter,all_to_all,broadcast,barrier --csv 2>/dev/null | grep -v ',coll,' |
      awk -F, -v r="$r" -v n=$v '{print r","n","$3","$8","$11}'
  done
done
