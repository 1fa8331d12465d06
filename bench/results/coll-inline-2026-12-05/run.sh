#!/usr/bin/env bash
# The A/B of the message number + inline payload change (bench/RESULTS.md, 2026-12-05 17:5x UTC).
# OLD = a build of 8903e32 (before), NEW = a build of the change; rounds interleaved old/new.
OLD=${1:?OLD build dir} NEW=${2:?NEW build dir}
for r in 1 2 3 4 5 6 7; do for v in old new; do b=$OLD; [[ $v == new ]] && b=$NEW
  UCX_TLS=posix,sysv,self $b/bin/rwinrun -n 2 -- $b/bin/rwin-perf -t allreduce,allgather,reduce_scatter,all_to_all,broadcast \
    -s 8,16 -n 20000 -w 100 --csv 2>/dev/null | sed 's/^\[0\] //' | grep -v "^test" | sed "s/^/$r,$v,2,/"
done; done > coll2.csv
/usr/bin/python3 "$(dirname "$0")/sum.py" coll2.csv
