#!/usr/bin/env bash
# RWIN_TCP_PARK=1 against 0 between two netns hosts joined by a veth (bench/lib/two_hosts.sh),
# interleaved, ROUNDS rounds: put_lat, notify_lat and get_lat at 8 B and 4 KiB. Root.
#   bash bench/results/tcp-park-2026-12-07/netns.sh BUILD_DIR OUT_CSV [ROUNDS]
set -uo pipefail
BIN=$(cd "${1:-build}" && pwd)/bin
OUT=${2:?OUT_CSV}
ROUNDS=${3:-5}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
source "$HERE/lib/two_hosts.sh"
two_hosts_up tcp_park 10.77.43 || exit 1
tmp=$(mktemp -d)
echo "round,kind,size,p50_us" >"$OUT"
for ((r = 1; r <= ROUNDS; r++)); do
  for park in 1 0; do
    two_hosts_rwin_perf "$tmp/r${r}_p$park.csv" "$tmp/log" $((29700 + r * 2 + park)) \
      "-t put_lat,notify_lat,get_lat -s 8,4096 -n 20000 -w 1000 --csv" RWIN_TCP_PARK=$park ||
      echo "round $r park $park failed (rc $?)" >&2
    awk -F, -v r="$r" -v k="park$park" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      { s = $c["size"]; if (s == 4096) s = "4K"; print r "," k "_" $c["test"] "," s "," $c["p50_us"] }' \
      "$tmp/r${r}_p$park.csv" >>"$OUT"
  done
done
rm -rf "$tmp"
