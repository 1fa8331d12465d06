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
    --batches 5 $flags 2>/dev/null | sed "s/^/rwin $transport${flags:+ $flags}${RWIN_LABEL:-}: /" | grep -vE "\] *\[1\]|: \[1\]"
}

# Issue 23's goals, small messages: rwin's 8 B put + notify one way (put_lat) against ib_write_lat's
# one-way latency, and rwin's 8 B put rate (put_bw: 16 puts then a quiet, each put a blocking call)
# against ib_write_bw -s 8 with a post list of 16 and a CQE per 16 WRs (perftest's way of driving a
# NIC); --counters shows what rwin asked of the device for it.
small() {
  perftest ib_write_lat -s 8 -n 2000
  perftest ib_write_bw -s 8 -n 20000 -l 16 -Q 16
  RWIN_TRANSPORT=verbs "$BIN/rwinrun" -n 2 --timeout 600 -- "$BIN/rwin-perf" -t put_lat,put_bw,notify_lat -s 8 -n 2000 \
    -w 100 --batches 5 --counters 2>&1 | grep -E "(put_lat|put_bw|notify_lat) |counters" | sed "s/^/rwin verbs: /"
}

for round in $(seq 1 "$ROUNDS"); do
  echo "=== round $round"
  small
  perftest ib_write_bw -s $size -n 300
  perftest ib_read_bw -s $size -n 300
  perftest ib_atomic_lat -n 1000
  rwin verbs put_bw,get_bw,notify_lat
  rwin verbs put_bw,get_bw --nbi
  UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=$dev:1 rwin ucx put_bw,get_bw,notify_lat
  # Striping (issue 23, item 3): 4 QPs per peer against perftest's 4 QPs (-q 4), and both devices when
  # the guest has rxe1 (bench/rxe/compare.sh boots it with RWIN_RXE_NICS=2).
  perftest ib_write_bw -s $size -n 300 -q 4
  RWIN_LABEL=" 4 qps" RWIN_VERBS_QPS_PER_PEER=4 rwin verbs put_bw,get_bw
  [[ -n ${RWIN_RXE_DEV2:-} ]] && RWIN_LABEL=" rxe0+rxe1" RWIN_IB_HCA=$dev,$RWIN_RXE_DEV2 rwin verbs put_bw,get_bw
done
