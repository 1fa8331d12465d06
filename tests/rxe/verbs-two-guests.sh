#!/usr/bin/env bash
# verbs-two-guests.sh <build>/bin
#
# End-to-end check of the raw-verbs transport between two machines: two qemu guests, each with its
# own Soft-RoCE rxe0, joined by a private link (tests/rxe/run-in-guest.sh, RWIN_RXE_NODES=2). Rank 0
# runs in guest 0 and serves the bootstrap on its IP, rank 1 runs in guest 1; ring_shift moves
# data through the core in put and get mode over RC queue pairs whose packets cross the link (a
# single guest only exercises rxe's local loopback, which needs neither a routable GID nor a
# correct GRH). Exit 0 when both modes pass on both ranks.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(cd "${1:?usage: verbs-two-guests.sh <build>/bin}" && pwd -P)
[ -x "$bin/ring_shift" ] || { echo "verbs-two-guests: $bin/ring_shift not built" >&2; exit 2; }
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
  for mode in put get; do
    # 2 MiB of f32 per rank and iteration: several chunks per transfer at ~10 MB/s between guests.
    timeout 300 "$0" --mode $mode --size 524288 --dtype f32 --iters 2 || exit $?
    export RWIN_ROOT=$root:29518   # a fresh port: the first job'"'"'s may linger in TIME_WAIT
  done
' "$bin/ring_shift"
