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

# Namespaces left by an earlier run that was SIGKILLed (netns-ring.sh names them rwin-<its pid>-h<i>
# and rwin-<its pid>-br): remove those whose creator is gone, so they cannot pile up on a CI host.
for ns in $(ip netns list | awk '{print $1}' | grep -E '^rwin-[0-9]+-(h[0-9]+|br)$'); do
  pid=${ns#rwin-}
  pid=${pid%%-*}
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "multinode_netns: removing stale namespace $ns (its script, pid $pid, is gone)"
    ip netns del "$ns"
  fi
done

# ctest kills a script at 600 s with SIGKILL, which no trap survives: stop at 540 s with SIGTERM
# instead, so netns-ring.sh still removes its namespaces. A healthy run takes about a minute.
export RWIN_NETNS_TIMEOUT=${RWIN_NETNS_TIMEOUT:-60}
timeout -s TERM -k 30 540 bash "$HERE/../multinode/netns-ring.sh" "$BIN_DIR"
rc=$?
((rc == 124)) && echo "multinode_netns: stopped after 540 s (runs hung; see the failures above)"
exit "$rc"
