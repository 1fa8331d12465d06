#!/usr/bin/env bash
# RWIN_TCP_PARK=1 (the default) against 0, interleaved, ROUNDS rounds over loopback: put_lat, notify_lat
# and get_lat at 8 B and 4 KiB (rwin-perf over own tcp), and the busy-poll ping-pong plain and with its
# sockets in an epoll set (rwin_tcp_ref pingpong --epoll) in the same rounds.
#   bash bench/results/tcp-park-2026-12-07/ab.sh BUILD_DIR OUT_CSV [ROUNDS]
set -uo pipefail
BIN=$(cd "${1:-build}" && pwd)/bin
OUT=${2:?OUT_CSV}
ROUNDS=${3:-6}
echo "round,kind,size,p50_us" >"$OUT"
for ((r = 1; r <= ROUNDS; r++)); do
  for park in 1 0; do
    RWIN_TCP_PARK=$park RWIN_TRANSPORT=tcp RWIN_IFNAME=lo timeout -s KILL 120 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" \
      -t put_lat,notify_lat,get_lat -s 8,4096 -n 20000 -w 1000 2>&1 |
      awk -v r="$r" -v k="park$park" '/^\[0\] (put|notify|get)_lat /{print r","k"_"$2","$3","$7}' >>"$OUT"
  done
  timeout -s KILL 60 "$BIN/rwin_tcp_ref" pingpong 8,4096 20000 | awk -F, -v r="$r" '{print r","$1","$2","$3}' >>"$OUT"
  timeout -s KILL 60 "$BIN/rwin_tcp_ref" pingpong 8,4096 20000 --epoll | awk -F, -v r="$r" '{print r","$1","$2","$3}' >>"$OUT"
done
