#!/bin/bash
# A/B of builds on rwin-perf's pair tests over rwin's own tcp (loopback), every variant once per round,
# with a busy-poll TCP ping-pong of 512 KiB (rwin_tcp_ref) before and after each round: this VM has
# slow spells (the ping-pong 3-4x slower for seconds to minutes), and absum.py reports medians over
# all rounds and over the rounds whose ping-pong stayed fast (< 80 us both times).
#   REF=<dir with rwin_tcp_ref> ITERS=1000 TESTS=put_lat ab.sh ROUNDS SIZES name:dir[:ENV=V,ENV=V] ...
# (dir: bin/rwin-perf, bin/rwinrun, core/librwin.so.0 of one build). Output: csv on stdout
# (round, ping-pong us, variant, test, size, p50 us, MiB/s).
rounds=$1 sizes=$2; shift 2
refrun(){ "$REF/rwin_tcp_ref" pingpong 524288 200 | awk -F, '{print $3}'; }
for r in $(seq 1 "$rounds"); do
  ref1=$(refrun); tmp=$(mktemp)
  for spec in "$@"; do
    IFS=: read -r name d envs <<<"$spec"
    e=(); [[ -n $envs ]] && IFS=, read -ra e <<<"$envs"
    env "${e[@]}" RWIN_TRANSPORT=tcp LD_LIBRARY_PATH="$d/core" timeout -s KILL 120 "$d/bin/rwinrun" -n 2 -- \
      "$d/bin/rwin-perf" -n "${ITERS:-2000}" -s "$sizes" -t "${TESTS:-put_lat}" --csv 2>/dev/null | grep -v "test,size" |
      awk -F, -v r="$r" -v n="$name" '{print r",REF,"n","substr($1,5)","$2","$7","$10}' >>"$tmp"
  done
  ref2=$(refrun); ref=$(echo "$ref1 $ref2" | awk '{print ($1>$2)?$1:$2}')
  sed "s/,REF,/,$ref,/" "$tmp"; rm -f "$tmp"
done
