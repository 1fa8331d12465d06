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
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
timeout 120 "$py" "$here/server.py" --clients "$CLIENTS" --elements "$ELEMENTS" --ready-file "$tmp/addr" &
server=$!
pids+=("$server")
for _ in $(seq 200); do [[ -s $tmp/addr ]] && break; kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
if [[ ! -s $tmp/addr ]]; then echo "run.sh: the server did not come up (see above)" >&2; exit 1; fi
addr=$(cat "$tmp/addr")
cpids=()
for i in $(seq "$CLIENTS"); do
  timeout 120 "$py" "$here/client.py" --server "$addr" --elements "$ELEMENTS" --rounds "$ROUNDS" --seed "$i" \
    > "$tmp/client$i.out" 2>&1 &
  cpids+=($!)
done
fail=0
for i in $(seq "$CLIENTS"); do
  wait "${cpids[$((i - 1))]}" || fail=1
  cat "$tmp/client$i.out"
  grep -q ": OK job" "$tmp/client$i.out" || fail=1
done
((fail)) && kill "$server" 2>/dev/null  # a failed client never closes its job
wait "$server" || { echo "run.sh: the server exited with status $?" >&2; fail=1; }
pids=()
if ((fail)); then echo "tensor_service: FAILED" >&2; exit 1; fi
echo "tensor_service: OK ($CLIENTS clients x $ROUNDS rounds, UCX_TLS=$UCX_TLS)"
