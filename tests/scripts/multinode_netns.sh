#!/usr/bin/env bash
# ctest wrapper: ring shift across >= 3 network-namespace "hosts" (tests/multinode/netns-ring.sh).
# usage: multinode_netns.sh BIN_DIR
# Skips (exit 0, "skipped: ...") only when this process may not create network namespaces, i.e. it
# is not root / lacks CAP_SYS_ADMIN; every other problem is a failure.
set -uo pipefail
BIN_DIR=${1:?usage: multinode_netns.sh BIN_DIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

probe="rwin-probe-$$"
if ! err=$(ip netns add "$probe" 2>&1); then
  if [[ $err == *"ermission denied"* || $err == *"peration not permitted"* ]]; then
    echo "skipped: cannot create network namespaces here ($err); run as root to test multi-host"
    exit 0
  fi
  echo "multinode_netns: 'ip netns add' failed: $err" >&2
  exit 1
fi
ip netns del "$probe"

# 60 s per run keeps the 6 runs (put/get x 3 sizes) inside ctest's 600 s script timeout.
export RWIN_NETNS_TIMEOUT=${RWIN_NETNS_TIMEOUT:-60}
exec bash "$HERE/../multinode/netns-ring.sh" "$BIN_DIR"
