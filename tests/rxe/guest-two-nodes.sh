#!/usr/bin/env bash
# Runs INSIDE each of two soft-RoCE guests (RWIN_RXE_NODES=2): a 2-rank ring shift across the two
# guests' rxe0 devices, one rank per guest; rank 0 (node 0) serves the bootstrap store.
set -uo pipefail
BIN=${1:?usage: guest-two-nodes.sh BIN_DIR}
node=${RWIN_RXE_NODE:?} root_ip=$([[ $node == 0 ]] && echo "$RWIN_RXE_IP" || echo "$RWIN_RXE_PEER_IP")
export RWIN_TRANSPORT=verbs RWIN_RANK=$node RWIN_NRANKS=2 RWIN_ROOT=$root_ip:29517 RWIN_STARTUP_TIMEOUT_MS=120000
for mode in put get; do
  for elems in 1 1000003; do
    "$BIN/ring_shift" --mode $mode --size $elems --iters 2 || { echo "node $node: ring $mode $elems FAILED"; exit 1; }
  done
done
echo "node $node: two-node ring shifts OK"
