#!/usr/bin/env bash
# The tensor service across two "hosts" that are network namespaces on this machine (root): the server
# in rwpa-<pid>-s (10.77.200.1 on veth rwpa0), CLIENTS clients in rwpa-<pid>-c (10.77.200.2), UCX tcp
# over the veth (TRANSPORT=tcp: rwin's own sockets, bound where each agent's control socket listens).
# The namespaces (and the veth pair inside them) are deleted on exit, error and signals.
#   sudo bash examples/tensor_service/run_netns.sh [BUILD_DIR]   env: CLIENTS (2), ROUNDS (10), ELEMENTS, TRANSPORT
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 2
py=${RWIN_PYTHON:-/usr/bin/python3}
[[ $(id -u) -eq 0 ]] || { echo "run_netns.sh: needs root (ip netns)" >&2; exit 2; }
CLIENTS=${CLIENTS:-2} ROUNDS=${ROUNDS:-10} ELEMENTS=${ELEMENTS:-262144}
S=rwpa-$$-s C=rwpa-$$-c
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rwin-tensor-netns.XXXXXX")
NETNS_SELF=run_netns.sh
source "$root/tests/lib/netns.sh"
cleanup() {
  netns_cleanup  # kills what still runs in the namespaces, then deletes them
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_add "$S" && netns_add "$C" || exit 1
netns_link "$S" rwpa0 10.77.200.1/24 "$C" rwpa1 10.77.200.2/24 || exit 1
netns_wait_carrier "$S" rwpa0 "$C" rwpa1  # UCX refuses an interface without carrier (waits at most 10 s)
envs=(PYTHONPATH="$build/python" PYTHONDONTWRITEBYTECODE=1 UCX_TLS=tcp)
source "$here/launch.sh"
SERVER_PREFIX=(ip netns exec "$S" env "${envs[@]}" UCX_NET_DEVICES=rwpa0)
CLIENT_PREFIX=(ip netns exec "$C" env "${envs[@]}" UCX_NET_DEVICES=rwpa1)
fail=0
tensor_service_launch run_netns.sh 10.77.200.1 10.77.200.2 || fail=1
if ((fail)); then echo "tensor_service (netns): FAILED" >&2; exit 1; fi
echo "tensor_service (netns): OK ($CLIENTS clients in $C x $ROUNDS rounds, server in $S at $addr, transport ${TRANSPORT:-ucx})"
