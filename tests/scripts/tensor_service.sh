#!/usr/bin/env bash
# examples/tensor_service (issue 15): the server and two clients on one host over UCX tcp and shared
# memory, then across two network-namespace hosts (run_netns.sh; needs root as CI has) over UCX tcp and
# over rwin's own tcp transport.
# Skips (exit 77) when the build has no rwin.Agent in its Python package.
#   bash tests/scripts/tensor_service.sh build/bin
set -u
bin=${1:?usage: tensor_service.sh BIN_DIR}
build=$(cd "$bin/.." && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${RWIN_PYTHON:-/usr/bin/python3}
source "$src/tests/lib/python_env.sh"
rwin_python_asan_env "$build/python" tensor_service   # exported: run.sh's processes inherit it
if ! PYTHONPATH=$build/python "$py" -c "import rwin, grpc; rwin.Agent" 2>/dev/null; then
  echo "tensor_service: SKIPPED: no rwin.Agent in $build/python (or no python3-grpcio)"
  exit 77
fi
unset RWIN_RANK RWIN_NRANKS RWIN_ROOT
fail=0
UCX_TLS=tcp UCX_NET_DEVICES=lo bash "$src/examples/tensor_service/run.sh" "$build" || fail=1
UCX_TLS=${RWIN_AGENT_SHM_TLS:-posix,sysv,cma,self} bash "$src/examples/tensor_service/run.sh" "$build" || fail=1
bash "$src/examples/tensor_service/run_netns.sh" "$build" || fail=1
# The same two hosts over rwin's own tcp transport (docs/TCP.md): agents with no UCX between them.
TRANSPORT=tcp bash "$src/examples/tensor_service/run_netns.sh" "$build" || fail=1
[[ $fail -eq 0 ]] && echo "tensor_service: all runs OK"
exit $fail
