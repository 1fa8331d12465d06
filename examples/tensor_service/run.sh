#!/usr/bin/env bash
# The tensor service on one host: a server and CLIENTS clients (default 2, in parallel) over loopback,
# UCX tcp unless UCX_TLS says otherwise. Exit 0 when every client printed OK and the server exited 0.
#   bash examples/tensor_service/run.sh [BUILD_DIR]        (default: build)
#   env: CLIENTS, ROUNDS (10), ELEMENTS (262144 float32), UCX_TLS (tcp), UCX_NET_DEVICES (lo with tcp)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 2
py=${RWIN_PYTHON:-/usr/bin/python3}
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1
export UCX_TLS=${UCX_TLS:-tcp}
[[ $UCX_TLS == tcp ]] && export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
CLIENTS=${CLIENTS:-2} ROUNDS=${ROUNDS:-10} ELEMENTS=${ELEMENTS:-262144}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rwin-tensor-service.XXXXXX")
source "$here/launch.sh"
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
tensor_service_launch run.sh || fail=1
if ((fail)); then echo "tensor_service: FAILED" >&2; exit 1; fi
echo "tensor_service: OK ($CLIENTS clients x $ROUNDS rounds, UCX_TLS=$UCX_TLS)"
