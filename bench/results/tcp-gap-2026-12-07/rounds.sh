#!/usr/bin/env bash
# rwin's own tcp put + notify + wait at 8 B against the busy-poll ping-pong, plain and with its sockets
# in an epoll set nobody waits on (rwin_tcp_ref pingpong --epoll), interleaved, ROUNDS rounds.
#   bash bench/results/tcp-gap-2026-12-07/rounds.sh BUILD_DIR OUT_CSV [ROUNDS]
set -uo pipefail
BIN=$(cd "${1:-build}" && pwd)/bin
OUT=${2:?OUT_CSV}
ROUNDS=${3:-5}
echo "round,kind,size,p50_us" >"$OUT"
for ((r = 1; r <= ROUNDS; r++)); do
  RWIN_TRANSPORT=tcp RWIN_IFNAME=lo timeout -s KILL 120 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -t put_lat,notify_lat \
    -s 8 -n 20000 -w 1000 2>&1 | awk -v r="$r" '/^\[0\] (put|notify)_lat /{print r",rwin_"$2","$3","$7}' >>"$OUT"
  timeout -s KILL 60 "$BIN/rwin_tcp_ref" pingpong 8 20000 | awk -F, -v r="$r" '{print r","$1","$2","$3}' >>"$OUT"
  timeout -s KILL 60 "$BIN/rwin_tcp_ref" pingpong 8 20000 --epoll | awk -F, -v r="$r" '{print r","$1","$2","$3}' >>"$OUT"
done
