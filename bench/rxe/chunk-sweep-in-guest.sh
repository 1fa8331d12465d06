#!/usr/bin/env bash
# Runs INSIDE a soft-RoCE guest: rwin verbs put bandwidth for chunk size x pipeline depth, next to
# ib_write_bw with its default tx depth (128) and with one message in flight (-t 1).
#   tests/rxe/run-in-guest.sh bash bench/rxe/chunk-sweep-in-guest.sh BIN_DIR
set -uo pipefail
BIN=${1:?usage: chunk-sweep-in-guest.sh BIN_DIR}
dev=${RWIN_RXE_DEV:?run inside tests/rxe/run-in-guest.sh} gid=${RWIN_RXE_GID_INDEX:-1} ip=${RWIN_RXE_IP:?}
for cd in "1M 4" "256K 4" "256K 8" "64K 16" "128K 32"; do
  set -- $cd
  echo "chunk $1 depth $2:"
  RWIN_TRANSPORT=verbs "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -t put_bw -s 1M,8M -n 200 -w 10 --batches 3 \
    --chunk "$1" --depth "$2" 2>/dev/null | grep -E "put_bw"
done
for t in 128 1; do
  ib_write_bw -d "$dev" -x "$gid" -s 1048576 -n 300 -t $t >/dev/null 2>&1 &
  sleep 1
  echo "ib_write_bw tx-depth $t: $(ib_write_bw -d "$dev" -x "$gid" -s 1048576 -n 300 -t $t "$ip" | grep -E '^ *1048576')"
  wait
done
