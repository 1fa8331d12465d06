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
cleanup() {
  local ns p
  for ns in "$S" "$C"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$S" && ip netns add "$C" || exit 1
ip -n "$S" link add rwpa0 type veth peer name rwpa1 netns "$C" || exit 1
ip -n "$S" addr add 10.77.201.1/24 dev rwpa0 && ip -n "$C" addr add 10.77.201.2/24 dev rwpa1 || exit 1
for ns in "$S" "$C"; do ip -n "$ns" link set lo up; done
ip -n "$S" link set rwpa0 up && ip -n "$C" link set rwpa1 up || exit 1
for _ in $(seq 100); do  # UCX refuses an interface without carrier
  ip -n "$S" link show rwpa0 | grep -q LOWER_UP && ip -n "$C" link show rwpa1 | grep -q LOWER_UP && break
  sleep 0.1
done
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
