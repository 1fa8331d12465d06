#!/usr/bin/env bash
# The A/B of "no allocation per call or per poll round" (bench/RESULTS.md, 2026-12-05 20:1x UTC).
# OLD = a build of 0983ddd (before), NEW = a build of 927b9f1; rounds interleaved old/new, 2 ranks, shm.
OLD=${1:?OLD build dir} NEW=${2:?NEW build dir}
for r in 1 2 3 4 5 6 7; do for v in old new; do b=$OLD; [[ $v == new ]] && b=$NEW
  UCX_TLS=posix,sysv,self $b/bin/rwinrun -n 2 -- $b/bin/rwin-perf -t allreduce,allgather,reduce_scatter,all_to_all,broadcast \
    -s 8,64 -n 20000 -w 100 --csv 2>/dev/null | sed 's/^\[0\] //' | grep -v "^test" | sed "s/^/$r,$v,2,/"
done; done > coll.csv
/usr/bin/python3 "$(dirname "$0")/../coll-inline-2026-12-05/sum.py" coll.csv
