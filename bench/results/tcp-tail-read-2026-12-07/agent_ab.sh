#!/bin/bash
# agent_ab.sh ROUNDS OLD NEW > out.csv: the agent's passive server over own tcp (rwin-agent-perf
# --transport tcp --progress-thread, 200 iterations, up to 16 MiB), the two builds alternated within each
# round (OLD first), a 512 KiB ping-pong per round (ref, as in ab.sh) and a 1 s stream of 1, 4 and 16 MiB writes.
# Columns: round,ref,variant,op,bytes,MiB/s (op stream: the stream).
R=$1 old=$2 new=$3
echo "round,ref,variant,op,bytes,mibs"
for r in $(seq 1 "$R"); do
  ref=$("$new/bin/rwin_tcp_ref" pingpong 524288 200 | awk -F, '{print $3}')
  for s in 1048576 4194304 16777216; do
    "$new/bin/rwin_tcp_ref" stream $s 1 | awk -F, -v r="$r" -v ref="$ref" '{print r","ref",stream,stream,"$2","$5}'
  done
  for v in O N; do
    d=$old; [[ $v == N ]] && d=$new
    LD_LIBRARY_PATH=$d/core timeout -s KILL 200 "$d/bin/rwin-agent-perf" --transport tcp --progress-thread --max-bytes 16M \
      --iters 200 --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
r, ref, v = sys.argv[1:4]
for b in json.load(sys.stdin)["bandwidth"]:
    for op in ("put", "get"):
        n, mibs = b["bytes"], b[op + "_MiBps"]
        print(f"{r},{ref},{v},{op},{n},{mibs:.1f}")' "$r" "$ref" "$v"
  done
done
