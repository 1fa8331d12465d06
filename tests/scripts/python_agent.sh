#!/usr/bin/env bash
# The Python tests that make their own processes instead of running under rwinrun:
# rwin.Agent (issue 15): tests/python/test_agent.py (independent processes meeting at run time: two,
# three, stale descriptors, a peer killed mid-transfer, passive servers served by the progress thread,
# bad arguments); rwin.Context(store=...) (issue 25): tests/python/test_store.py (the caller's socket
# store, workers forked first, one killed and named through fail_peer; a dict store's refusals); rwin.Domain
# (issue 25): tests/python/test_domain.py (examples/python/domain_job.py, the binding's calls and refusals).
# ctest runs it on the host over UCX tcp on loopback, over shared memory and over rwin's own tcp transport;
# tests/rxe/guest-suite.sh runs it inside the soft-RoCE guest with the second argument `verbs`
# (AGENT_TEST_TRANSPORT=verbs: every agent of the file over verbs on the guest's rxe device).
# Skips (exit 77) when the build has no Python package or the package has no rwin.Agent.
#   bash tests/scripts/python_agent.sh build/bin            # UCX tcp + shared memory + rwin's tcp
#   bash tests/scripts/python_agent.sh build/bin verbs      # verbs (where a device exists: the guest)
set -u
bin=${1:?usage: python_agent.sh BIN_DIR [ucx|verbs]}
which=${2:-ucx}
[[ $which == ucx || $which == verbs ]] || { echo "python_agent: second argument '$which': expected ucx or verbs" >&2; exit 2; }
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
# Per run: ~10 s on the host; ~2 min in a TCG guest (rxe moves ~40 MB/s there), 3x that for a loaded host.
secs=170
[[ $which == verbs ]] && secs=${RWIN_AGENT_PYTEST_TIMEOUT:-420}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
names=()
start() {  # start NAME ENV...: one pytest run in the background, its output and status kept in $tmp
  local i=${#names[@]}
  names+=("$1")
  shift
  (env "$@" timeout "$secs" "$py" -m pytest tests/python/test_agent.py tests/python/test_store.py tests/python/test_domain.py -q \
     -p no:cacheprovider >"$tmp/$i.out" 2>&1; echo $? >"$tmp/$i.rc") &
}
verdicts() {  # every run's verdict, in the order started: passes when every test passed (none skipped), no sanitizer spoke
  wait
  local i out rc ok
  for i in "${!names[@]}"; do
    out=$(<"$tmp/$i.out") rc=$(<"$tmp/$i.rc") ok=0
    [[ $rc -eq 124 ]] && echo "test_agent.py over ${names[i]}: timed out after $secs s"
    [[ $rc -eq 0 ]] && grep -qE '^[0-9]+ passed in ' <<<"$out" && ! grep -q skipped <<<"$out" &&
      rwin_sanitizer_clean "$out" && ok=1
    rwin_verdict "$ok" "test_agent.py + test_store.py + test_domain.py over ${names[i]}: $(grep -m1 -oE '[0-9]+ passed in [0-9.]+s' <<<"$out")" \
      "test_agent.py + test_store.py + test_domain.py over ${names[i]} (status $rc)" 80 "$out"
  done
}
if [[ $which == verbs ]]; then
  start "verbs (${AGENT_TEST_IB_DEVICE:-first device})" AGENT_TEST_TRANSPORT=verbs
else
  # The three transports at once: each run is mostly process start-up and waits on its own
  # processes (their agents listen on ephemeral ports), so two cores serve three runs in ~half the
  # time one after another took (59 s in the CI tier's release ctest).
  start "UCX tcp (lo)" AGENT_TEST_TRANSPORT= UCX_TLS=tcp UCX_NET_DEVICES=lo
  start "UCX shared memory" AGENT_TEST_TRANSPORT= UCX_TLS=${RWIN_AGENT_SHM_TLS:-posix,sysv,cma,self}
  start "rwin's own tcp (lo)" AGENT_TEST_TRANSPORT=tcp RWIN_IFNAME=lo
fi
verdicts
echo "python_agent: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
