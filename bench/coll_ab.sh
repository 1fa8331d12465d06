#!/usr/bin/env bash
# Interleaved A/B of rwin's small collectives between two builds over shared memory: per round, OLD's
# rwin-perf then NEW's, every collective at SIZES; prints p50 and average new / old
# (bench/results/coll-inline-2026-12-05/sum.py). Used by the A/B records under bench/results/.
#   bench/coll_ab.sh OLD_BUILD NEW_BUILD OUT_CSV [NP=2] [SIZES=8,16] [ROUNDS=7] [ITERS=20000]
set -eu
old=${1:?usage: coll_ab.sh OLD_BUILD NEW_BUILD OUT_CSV [NP] [SIZES] [ROUNDS] [ITERS]}
new=${2:?usage: coll_ab.sh OLD_BUILD NEW_BUILD OUT_CSV [NP] [SIZES] [ROUNDS] [ITERS]}
csv=${3:?usage: coll_ab.sh OLD_BUILD NEW_BUILD OUT_CSV [NP] [SIZES] [ROUNDS] [ITERS]}
np=${4:-2} sizes=${5:-8,16} rounds=${6:-7} iters=${7:-20000}
for r in $(seq 1 "$rounds"); do
  for v in old new; do
    b=$old
    [[ $v == new ]] && b=$new
    UCX_TLS=posix,sysv,self "$b/bin/rwinrun" -n "$np" -- "$b/bin/rwin-perf" \
      -t allreduce,allgather,reduce_scatter,all_to_all,broadcast -s "$sizes" -n "$iters" -w 100 --csv 2>/dev/null |
      sed 's/^\[0\] //' | grep -v "^test" | sed "s/^/$r,$v,$np,/"
  done
done >"$csv"
/usr/bin/python3 "$(dirname "$0")/results/coll-inline-2026-12-05/sum.py" "$csv"
