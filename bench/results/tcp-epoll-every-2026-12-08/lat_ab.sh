#!/bin/bash
# lat_ab.sh ROUNDS OLD NEW > lat_ab.csv: per round an 8 B busy-poll TCP ping-pong (p50 one way, column ref), then
# put_lat and get_lat 8 B over own tcp (rwin-perf -n 20000) of OLD and NEW, alternated, the order swapped each round.
# OLD and NEW hold bin/rwin-perf, bin/rwinrun, bin/rwin_tcp_ref and core/librwin.so.0 of one build.
R=$1 old=$2 new=$3
echo "round,ref,variant,test,size,p50"
for r in $(seq 1 "$R"); do
  ref=$("$new/bin/rwin_tcp_ref" pingpong 8 20000 | awk -F, '{print $3}')
  order="O N"; (( r % 2 )) && order="N O"
  for v in $order; do
    d=$old; [[ $v == N ]] && d=$new
    RWIN_TRANSPORT=tcp LD_LIBRARY_PATH=$d/core timeout -s KILL 120 "$d/bin/rwinrun" -n 2 -- "$d/bin/rwin-perf" -n 20000 -s 8 -t put_lat,get_lat --csv 2>/dev/null |
      grep -v test,size | awk -F, -v r="$r" -v ref="$ref" -v n=$v '{print r","ref","n","substr($1,5)","$2","$7}'
  done
done
