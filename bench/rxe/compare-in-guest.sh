#!/usr/bin/env bash
# Runs INSIDE one soft-RoCE guest (bench/rxe/compare.sh boots it): perftest, rwin over the verbs
# transport and rwin over UCX on the same rxe0 device, in the same boot, twice in alternation so
# the noise of a TCG guest on a shared 2-core host shows in the spread.
#   bench/rxe/compare-in-guest.sh BIN_DIR [ROUNDS]
set -uo pipefail
BIN=${1:?usage: compare-in-guest.sh BIN_DIR [ROUNDS]}
ROUNDS=${2:-2}
dev=${RWIN_RXE_DEV:?run inside tests/rxe/run-in-guest.sh} gid=${RWIN_RXE_GID_INDEX:-1} ip=${RWIN_RXE_IP:?}
size=1048576

perftest() {  # perftest TOOL ARGS...: server and client on the same device (loopback through rxe)
  local tool=$1; shift
  "$tool" -d "$dev" -x "$gid" "$@" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  local out
  out=$("$tool" -d "$dev" -x "$gid" "$@" "$ip" 2>&1)
  wait $server
  echo "$out" | awk -v t="$tool" '/^ *[0-9]+ +[0-9]+/ {print "perftest " t ": " $0}'
}
rwin() {  # rwin TRANSPORT TESTS [FLAGS]: two ranks, sizes 8 B (latency) and 1 MiB (bandwidth)
  local transport=$1 tests=$2 flags=${3:-}
  RWIN_TRANSPORT=$transport "$BIN/rwinrun" -n 2 --timeout 600 -- "$BIN/rwin-perf" -t "$tests" -s 8,$size -n 300 -w 20 \
    --batches 5 $flags 2>/dev/null | sed "s/^/rwin $transport${flags:+ $flags}: /" | grep -vE "\] *\[1\]|: \[1\]"
}

for round in $(seq 1 "$ROUNDS"); do
  echo "=== round $round"
  perftest ib_write_bw -s $size -n 300
  perftest ib_read_bw -s $size -n 300
  perftest ib_atomic_lat -n 1000
  rwin verbs put_bw,get_bw,notify_lat
  rwin verbs put_bw,get_bw --nbi
  UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=$dev:1 rwin ucx put_bw,get_bw,notify_lat
done
