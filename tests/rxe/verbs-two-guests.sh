#!/usr/bin/env bash
# verbs-two-guests.sh <build>/bin
#
# End-to-end check of the raw-verbs transport between two machines: two qemu guests, each with its
# own Soft-RoCE rxe0, joined by a private link (tests/rxe/run-in-guest.sh, RWIN_RXE_NODES=2). Rank 0
# runs in guest 0 and serves the bootstrap on its IP, rank 1 runs in guest 1; ring_shift moves
# data through the core in put and get mode over RC queue pairs whose packets cross the link (a
# single guest only exercises rxe's local loopback, which needs neither a routable GID nor a
# correct GRH). Then the same link drops 5% of the frames each guest sends (netem): RC must recover
# every lost request, response and ack by retransmission, and rwin-perf's put_bw (16 puts, then a
# quiet whose flush is a zero-length RDMA READ) makes the responders replay retransmitted READs: the
# case that failed a QP while the flush read carried rkey 0 (tests/rxe/DEFECTS.md). Exit 0 when every
# phase passes on both ranks.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(cd "${1:?usage: verbs-two-guests.sh <build>/bin}" && pwd -P)
for t in ring_shift rwin-perf; do [ -x "$bin/$t" ] || { echo "verbs-two-guests: $bin/$t not built" >&2; exit 2; }; done
# The guest shares the current directory and the build tree (bin's parent: librwin is found through
# ring_shift's RUNPATH there), wherever they are; a build under /tmp is hidden by the guest's tmpfs
# unless shared.
# The root is a guest's IP, not loopback: the job needs a key, the same in both guests.
key=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
RWIN_RXE_SHARE=$(dirname "$bin")${RWIN_RXE_SHARE:+$'\n'$RWIN_RXE_SHARE} RWIN_RXE_NODES=2 \
  exec "$here/run-in-guest.sh" bash -c "export RWIN_JOB_KEY=$key"'
  set -uo pipefail
  if [ "$RWIN_RXE_NODE" = 0 ]; then root=$RWIN_RXE_IP; else root=$RWIN_RXE_PEER_IP; fi
  export RWIN_RANK=$RWIN_RXE_NODE RWIN_NRANKS=2 RWIN_ROOT=$root:29517 RWIN_TRANSPORT=verbs
  export RWIN_IB_DEVICE=$RWIN_RXE_DEV RWIN_STARTUP_TIMEOUT_MS=60000 RWIN_TIMEOUT_MS=60000
  port=29517
  for mode in put get; do
    # 2 MiB of f32 per rank and iteration: several chunks per transfer at ~10 MB/s between guests.
    timeout 300 "$0" --mode $mode --size 524288 --dtype f32 --iters 2 || exit $?
    port=$((port + 1)); export RWIN_ROOT=$root:$port   # a fresh port: the last job'"'"'s may linger in TIME_WAIT
  done
  tc qdisc add dev eth0 root netem loss 5% || { echo "verbs-two-guests: netem not available" >&2; exit 3; }
  echo "verbs-two-guests: node $RWIN_RXE_NODE drops 5% of the frames it sends (netem)"
  # Messages of at most 4 packets: RC retransmits a message from its first lost packet, and a
  # 64-packet write gets through 5% loss whole in only 4% of tries, so 7 retries run out by design.
  # Ack timeout 67 ms (14; perftest'"'"'s): at the default 1.07 s every loss costs a second.
  RWIN_IB_TIMEOUT=14 timeout 300 "$1" -t put_bw,get_lat -s 8,4096 -n 400 -w 20 --batches 2 --transport verbs \
    --no-pin || exit $?
  hc=/sys/class/infiniband/$RWIN_RXE_DEV/ports/1/hw_counters
  echo "verbs-two-guests: node $RWIN_RXE_NODE: $(tc -s qdisc show dev eth0 | grep -o "dropped [0-9]*" | cut -d" " -f2) frames dropped," \
    "$(cat $hc/duplicate_request) duplicate requests answered, $(cat $hc/completer_retry_err) retry timeouts"
' "$bin/ring_shift" "$bin/rwin-perf"
