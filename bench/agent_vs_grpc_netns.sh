#!/usr/bin/env bash
# bench/agent_vs_grpc.py between two network-namespace hosts (root): the server half in rwpa-<pid>-s
# (10.77.201.1, veth rwpa0), the client half in rwpa-<pid>-c (10.77.201.2, rwpa1), UCX tcp over the
# veth pair, gRPC over the same link. Namespaces are removed on exit, error and signals.
#   sudo bash bench/agent_vs_grpc_netns.sh [BUILD_DIR] [agent_vs_grpc.py client args...]
#   e.g. sudo bash bench/agent_vs_grpc_netns.sh build --label netns-thread --server-progress thread
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd) || exit 2
shift || true
py=${RWIN_PYTHON:-/usr/bin/python3}
[[ $(id -u) -eq 0 ]] || { echo "agent_vs_grpc_netns.sh: needs root (ip netns)" >&2; exit 2; }
S=rwpa-$$-s C=rwpa-$$-c
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rwin-agent-grpc-netns.XXXXXX")
NETNS_SELF=agent_vs_grpc_netns.sh
source "$here/../tests/lib/netns.sh"
cleanup() {
  netns_cleanup  # kills what still runs in the namespaces, then deletes them
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
netns_add "$S" && netns_add "$C" || exit 1
netns_link "$S" rwpa0 10.77.201.1/24 "$C" rwpa1 10.77.201.2/24 || exit 1
netns_wait_carrier "$S" rwpa0 "$C" rwpa1  # UCX refuses an interface without carrier (waits at most 10 s)
envs=(PYTHONPATH="$build/python" PYTHONDONTWRITEBYTECODE=1 UCX_TLS=tcp)
# the server needs the client's --sizes (its tensor's capacity): pass it through
sizes=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [[ ${args[i]} == --sizes ]] && sizes=(--sizes "${args[i + 1]}"); done
mkfifo "$tmp/ready"
ip netns exec "$S" env "${envs[@]}" UCX_NET_DEVICES=rwpa0 timeout 1200 "$py" "$here/agent_vs_grpc.py" --role server \
  --host 10.77.201.1 "${sizes[@]}" > "$tmp/ready" &
server=$!
read -r -t 60 word addr < "$tmp/ready" || { echo "agent_vs_grpc_netns.sh: the server did not start" >&2; exit 1; }
[[ $word == READY ]] || { echo "agent_vs_grpc_netns.sh: unexpected server line: $word $addr" >&2; exit 1; }
cat "$tmp/ready" > /dev/null &  # keep the server's stdout drained
ip netns exec "$C" env "${envs[@]}" UCX_NET_DEVICES=rwpa1 timeout 1200 "$py" "$here/agent_vs_grpc.py" --role client \
  --host 10.77.201.2 --server "$addr" "$@"
rc=$?
wait "$server" || rc=1
exit $rc
