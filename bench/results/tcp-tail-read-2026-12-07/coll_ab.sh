#!/bin/bash
# coll_ab.sh ROUNDS OLD NEW > out.csv: 2 ranks over own tcp, OLD and NEW alternated within each round
# (OLD first): rwin-perf -n 200 (collectives' csv after the rank prefix: coll column 3, size 8, p50 11) allreduce, allgather, reduce_scatter, all_to_all, broadcast at 64 KiB,
# 1 MiB, 4 MiB, and ring_shift at 1, 4, 16 MiB. Columns: round,variant,test,size,p50_us.
R=$1 old=$2 new=$3
echo "round,variant,test,size,p50"
for r in $(seq 1 "$R"); do
  for v in O N; do
    d=$old; [[ $v == N ]] && d=$new
    RWIN_TRANSPORT=tcp LD_LIBRARY_PATH=$d/core timeout -s KILL 300 "$d/bin/rwinrun" -n 2 -- "$d/bin/rwin-perf" -n 200 -s 64K,1M,4M \
      -t allreduce,allgather,reduce_scatter,all_to_all,broadcast --csv 2>/dev/null | grep -v ',coll,' |
      awk -F, -v r="$r" -v n=$v '{print r","n","$3","$8","$11}'
    RWIN_TRANSPORT=tcp LD_LIBRARY_PATH=$d/core timeout -s KILL 300 "$d/bin/rwinrun" -n 2 -- "$d/bin/rwin-perf" -n 200 -s 1M,4M,16M \
      -t ring_shift --csv 2>/dev/null | grep -v test,size | awk -F, -v r="$r" -v n=$v '{print r","n","substr($1,5)","$2","$7}'
  done
done
