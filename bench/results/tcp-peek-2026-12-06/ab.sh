#!/bin/bash
# Interleaved A/B over own tcp: "old" = /work/build-old (a copy of the build before, rpath patched), "new" = /work/main/build,
# then the busy-poll ping-pong; csv: round,variant,test,p50_us,avg_us (old avg of the ping-pongs is a round trip: rwin-perf before 32a8ebb).
rounds=${1:-5}; tests=${TESTS:-put_lat,notify_lat,get_lat}
for r in $(seq $rounds); do
 for v in old new; do
  b=/work/main/build; [[ $v == old ]] && b=/work/build-old
  env RWIN_TRANSPORT=tcp RWIN_IFNAME=lo $b/bin/rwinrun -n 2 --timeout 120 -- $b/bin/rwin-perf -t $tests -s ${SIZE:-8} -n ${N:-20000} -w 1000 --csv 2>/dev/null | sed 's/^\[0\] //' | grep -v '^test,' | awk -F, -v v="$v" -v r=$r '{print r","v","$1","$(NF-13)","$(NF-11)}'
 done
 /work/main/build/bin/rwin_tcp_ref pingpong 8 20000 | awk -F, -v r=$r '{print r",pp,pingpong,"$3","$4}'
done
