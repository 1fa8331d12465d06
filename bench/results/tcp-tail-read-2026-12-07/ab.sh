#!/bin/bash
# ab.sh ROUNDS OLD NEW > out.csv: the builds before (OLD) and after (NEW) a change over rwin's own tcp
# (loopback), alternated within each round (OLD, NEW). OLD and NEW are directories with bin/rwin-perf,
# bin/rwinrun, bin/rwin_tcp_ref and core/librwin.so.0 of one build. Each round: a 512 KiB busy-poll
# ping-pong (its p50 in column `ref`: this VM's slow spells read as > 80 us), a 1 s TCP stream of 64 KiB
# and of 1 MiB writes, then per build put_bw and get_bw blocking and --nbi (64 KiB-1 MiB, 2000
# iterations) and put_lat/get_lat (8 B-1 MiB, 1000). Columns: round,ref,variant,test,size,p50_us,MiB/s.
R=$1 old=$2 new=$3
echo "round,ref,variant,test,size,p50,mibs"
for r in $(seq 1 "$R"); do
  ref=$("$new/bin/rwin_tcp_ref" pingpong 524288 200 | awk -F, '{print $3}')
  for s in 65536 1048576; do
    "$new/bin/rwin_tcp_ref" stream $s 1 | awk -F, -v r="$r" -v ref="$ref" '{print r","ref",stream,stream,"$2",0,"$5}'
  done
  for v in O N; do
    d=$old; [[ $v == N ]] && d=$new
    for extra in "" "--nbi"; do
      RWIN_TRANSPORT=tcp LD_LIBRARY_PATH=$d/core timeout -s KILL 120 "$d/bin/rwinrun" -n 2 -- "$d/bin/rwin-perf" -n 2000 -s 64K,256K,1M -t put_bw,get_bw $extra --csv 2>/dev/null |
        grep -v test,size | awk -F, -v r="$r" -v ref="$ref" -v n=$v -v x="$extra" '{t=substr($1,5); if (x!="") sub("_bw","_nbi",t); print r","ref","n","t","$2","$7","$10}'
    done
    RWIN_TRANSPORT=tcp LD_LIBRARY_PATH=$d/core timeout -s KILL 120 "$d/bin/rwinrun" -n 2 -- "$d/bin/rwin-perf" -n 1000 -s 8,64K,256K,1M -t put_lat,get_lat --csv 2>/dev/null |
      grep -v test,size | awk -F, -v r="$r" -v ref="$ref" -v n=$v '{print r","ref","n","substr($1,5)","$2","$7","$10}'
  done
done
