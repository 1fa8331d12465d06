#!/usr/bin/env bash
# Interleaved A/B of two builds' collectives at 16 KiB-1 MiB over shared memory, UCX tcp and rwin's own
# tcp, 2 ranks: per round and transport, OLD's rwin-perf then NEW's. Prints the csv on stdout.
#   run.sh OLD_BUILD NEW_BUILD [ROUNDS=5] [SIZES=16K,64K,256K,1M] [ITERS=300]
set -eu
old=$1 new=$2 rounds=${3:-5} sizes=${4:-16K,64K,256K,1M} iters=${5:-300}
echo "round,build,transport,coll,size,count,iters,p50_us,avg_us"
for r in $(seq 1 "$rounds"); do
  for tr in shm ucxtcp owntcp; do
    case $tr in
      shm) envs=(UCX_TLS=posix,sysv,self) ;;
      ucxtcp) envs=(UCX_TLS=tcp UCX_NET_DEVICES=lo) ;;
      owntcp) envs=(RWIN_TRANSPORT=tcp RWIN_IFNAME=lo) ;;
    esac
    for v in old new; do
      b=$old; [[ $v == new ]] && b=$new
      env "${envs[@]}" timeout 300 "$b/bin/rwinrun" -n 2 -- "$b/bin/rwin-perf" \
        -t allreduce,allgather,reduce_scatter,all_to_all,broadcast -s "$sizes" -n "$iters" -w 20 2>/dev/null |
        awk -v r="$r" -v v="$v" -v tr="$tr" '$1 == "[0]" && $6 == "|" && $3 ~ /^[0-9]+$/ {print r "," v "," tr "," $2 "," $3 "," $4 "," $5 "," $7 "," $8}'
    done
  done
done
