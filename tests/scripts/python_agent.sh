#!/usr/bin/env bash
# rwin.Agent from Python (issue 15): tests/python/test_agent.py (independent processes meeting at run
# time: two, three, stale descriptors, a peer killed mid-transfer, passive servers served by the progress
# thread, bad arguments) over UCX tcp on loopback and over shared memory. Verbs: tests/rxe/guest-suite.sh.
# Skips (exit 77) when the build has no Python package or the package has no rwin.Agent.
#   bash tests/scripts/python_agent.sh build/bin
set -u
bin=${1:?usage: python_agent.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${RWIN_PYTHON:-/usr/bin/python3}
export PYTHONPATH=$bin/../python${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1
unset RWIN_RANK RWIN_NRANKS RWIN_ROOT  # not a job: conftest.py would leave test_agent.py out
source "$src/tests/lib/python_env.sh"
rwin_python_asan_env "$bin/../python" python_agent
if ! "$py" -c "import rwin; rwin.Agent" 2>/dev/null; then
  echo "python_agent: SKIPPED: no rwin.Agent in $bin/../python (pybind11 missing at configure time?)"
  exit 77
fi
cd "$src"
pass=0 fail=0
run() {  # run NAME ENV...: passes when every test passed (none skipped) and no sanitizer spoke
  local name=$1 out rc ok=0
  shift
  out=$(env "$@" timeout 170 "$py" -m pytest tests/python/test_agent.py -q -p no:cacheprovider 2>&1)
  rc=$?
  [[ $rc -eq 0 ]] && grep -qE '^[0-9]+ passed in ' <<<"$out" && ! grep -q skipped <<<"$out" &&
    rwin_sanitizer_clean "$out" && ok=1
  rwin_verdict "$ok" "test_agent.py over $name: $(grep -m1 -oE '[0-9]+ passed in [0-9.]+s' <<<"$out")" \
    "test_agent.py over $name (status $rc)" 80 "$out"
}
run "UCX tcp (lo)" UCX_TLS=tcp UCX_NET_DEVICES=lo
run "UCX shared memory" UCX_TLS=${RWIN_AGENT_SHM_TLS:-posix,sysv,cma,self}
echo "python_agent: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
