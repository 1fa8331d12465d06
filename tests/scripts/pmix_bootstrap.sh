#!/usr/bin/env bash
# The PMIx bootstrap (bootstrap/pmix.h) under Open MPI's mpirun, which runs a PMIx server, with every
# RWIN_* variable removed from the environment; and the rule that a process seeing launcher variables
# for more than one rank never runs as a job of 1.
#   (a) mpirun -np 4 ring_shift --mode put|get, no RWIN_* variable (auto picks PMIx): OK on every rank
#   (b) the same with RWIN_BOOTSTRAP=pmix
#   (c) one rank kill -9'd under mpirun: a survivor names it, and mpirun exits non-zero (no hang);
#       a rank that never arrives: the PMIx fence ends at RWIN_STARTUP_TIMEOUT_MS, saying so
#   (d) fake launcher variables (OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=1; PMIX_RANK=1
#       PMIX_NAMESPACE=x) without mpirun or RWIN_ROOT: refused naming them, never a job-of-1 OK
#   (e) RWIN_BOOTSTRAP=bogus and RWIN_BOOTSTRAP=pmix without a server: clear errors; a server that
#       accepts and never answers: PMIx_Init ends at RWIN_STARTUP_TIMEOUT_MS, saying so
#   (f) the Python package under mpirun -np 2 (when it was built)
# Everything stays on loopback (--mca oob_tcp_if_include lo, UCX_NET_DEVICES=lo).
#   bash tests/scripts/pmix_bootstrap.sh build/bin
set -uo pipefail
bin=${1:?usage: pmix_bootstrap.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
ring=$bin/ring_shift
command -v mpirun >/dev/null || { echo "FAIL pmix_bootstrap: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
[[ -x $ring ]] || { echo "FAIL pmix_bootstrap: $ring not built" >&2; exit 1; }
tmp=$(mktemp -d)
mpirun_pid=
cleanup() {
  # Only the mpirun this script started; mpirun ends its own ranks on SIGTERM.
  if [[ -n $mpirun_pid ]]; then kill -TERM "$mpirun_pid" 2>/dev/null; wait "$mpirun_pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL pmix_bootstrap: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok   pmix_bootstrap: $*"; }

# Every RWIN_* variable of the caller's environment is removed (env -u), so nothing but PMIx can
# tell a rank its root.
unset_rwin=()
for v in $(compgen -e | grep '^RWIN_'); do unset_rwin+=(-u "$v"); done
as_root=()
[[ $(id -u) == 0 ]] && as_root=(--allow-run-as-root)
mpirun_cmd=(mpirun "${as_root[@]}" --oversubscribe --tag-output --mca oob_tcp_if_include lo --mca btl self,vader
  -x UCX_TLS=tcp -x UCX_NET_DEVICES=lo)

# run_ok NAME NP MPIRUN_ARGS...: mpirun's exit 0 and an OK line from every rank.
run_ok() {
  local name=$1 np=$2 log="$tmp/run.log" rc r bad=()
  shift 2
  env "${unset_rwin[@]}" timeout 120 "${mpirun_cmd[@]}" -np "$np" "$@" >"$log" 2>&1
  rc=$?
  ((rc == 124)) && bad+=("timed out (120 s)")
  ((rc != 0 && rc != 124)) && bad+=("mpirun exit $rc")
  for ((r = 0; r < np; r++)); do
    grep -Eq "^\[[0-9]+,$r\]<stdout>:.*\bOK\b" "$log" || bad+=("rank $r printed no OK")
  done
  if ((${#bad[@]} == 0)); then
    pass "$name"
  else
    fail "$name: $(IFS=";"; echo "${bad[*]}")"
    tail -n 30 "$log" | sed 's/^/  | /' >&2
  fi
}

# (a), (b)
for mode in put get; do
  run_ok "mpirun -np 4, no RWIN_* variable, --mode $mode" 4 "$ring" --mode "$mode" --size 100003
  run_ok "mpirun -np 4, RWIN_BOOTSTRAP=pmix, --mode $mode" 4 -x RWIN_BOOTSTRAP=pmix "$ring" --mode "$mode" --size 100003
done

# (c) kill -9 of rank 2 while the ranks shift: the survivors learn it from the store's leases and
# name it before mpirun tears the job down (mpirun aborts a job whose process died by a signal).
ready=$tmp/ready
env "${unset_rwin[@]}" timeout 120 "${mpirun_cmd[@]}" -np 4 "$ring" --mode put --size 100000 --iters 1000000 \
  --seconds 100 --ready-file "$ready" >"$tmp/kill.log" 2>&1 &
mpirun_pid=$!
for _ in $(seq 1 600); do [[ -e $ready ]] && break; sleep 0.1; done
victim=
if [[ -e $ready ]]; then
  # mpirun starts the ranks itself (one node): its children, rank 2 by OMPI_COMM_WORLD_RANK.
  for _ in $(seq 1 50); do
    for pid in $(pgrep -P "$(pgrep -P "$mpirun_pid" -x mpirun || echo "$mpirun_pid")"); do
      grep -qx 'OMPI_COMM_WORLD_RANK=2' <<<"$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null)" && victim=$pid
    done
    [[ -n $victim ]] && break
    sleep 0.1
  done
fi
if [[ -z $victim ]]; then
  fail "kill: no rank became ready or rank 2's process was not found"
  tail -n 20 "$tmp/kill.log" | sed 's/^/  | /' >&2
else
  sleep 1 # into the put/notify/wait rounds
  kill -9 "$victim"
  wait "$mpirun_pid"
  rc=$?
  mpirun_pid=
  bad=()
  ((rc == 124)) && bad+=("mpirun did not end within 120 s")
  ((rc == 0)) && bad+=("mpirun exited 0 after rank 2 was killed")
  grep -Eq '^\[[0-9]+,[013]\]<stderr>:.*peer 2 failed' "$tmp/kill.log" || bad+=("no survivor named peer 2")
  grep -Eq '<stdout>:OK' "$tmp/kill.log" && bad+=("a rank printed OK")
  if ((${#bad[@]} == 0)); then
    pass "kill -9 of rank 2 (pid $victim): a survivor named it, mpirun exit $rc"
  else
    fail "kill: $(IFS=";"; echo "${bad[*]}")"
    tail -n 30 "$tmp/kill.log" | sed 's/^/  | /' >&2
  fi
fi

# (c2) the start-up deadline: rank 1 is a program that never reaches the bootstrap (sleep), so rank 0's
# PMIx fence ends at RWIN_STARTUP_TIMEOUT_MS with an error saying so, and mpirun ends the job.
env "${unset_rwin[@]}" RWIN_STARTUP_TIMEOUT_MS=2000 timeout 120 "${mpirun_cmd[@]}" -x RWIN_STARTUP_TIMEOUT_MS \
  -np 1 "$ring" --mode put : -np 1 sleep 100 >"$tmp/fence.log" 2>&1
rc=$?
if ((rc != 0 && rc != 124)) && grep -q '^\[[0-9]*,0\]<stderr>:.*PMIx_Fence timed out after 2 s (the start-up timeout, RWIN_STARTUP_TIMEOUT_MS=2000)' "$tmp/fence.log" \
  && ! grep -q '<stdout>:OK' "$tmp/fence.log"; then
  pass "a rank that never arrives: rank 0's fence ends at the start-up timeout (mpirun exit $rc)"
else
  fail "start-up timeout (mpirun exit $rc)"
  tail -n 20 "$tmp/fence.log" | sed 's/^/  | /' >&2
fi

# refused NAME EXPECTED... -- ENV...: ring_shift alone (no mpirun) fails, prints no OK, and its error
# contains every EXPECTED text.
refused() {
  local name=$1 out rc missing=()
  shift
  local want=()
  while [[ $1 != -- ]]; do want+=("$1"); shift; done
  shift
  # PMIx variables of an outer launcher must not leak in either.
  out=$(env "${unset_rwin[@]}" $(compgen -e | grep -E '^(PMIX_|OMPI_|PMI_|SLURM_)' | sed 's/^/-u /') "$@" \
    timeout 60 "$ring" --mode put 2>&1)
  rc=$?
  ((rc == 0)) && missing+=("exit 0")
  ((rc == 124)) && missing+=("timed out")
  grep -q '\bOK\b' <<<"$out" && missing+=("printed OK")
  for w in "${want[@]}"; do grep -qF -- "$w" <<<"$out" || missing+=("no '$w'"); done
  if ((${#missing[@]} == 0)); then
    pass "$name: refused"
  else
    fail "$name: $(IFS=";"; echo "${missing[*]}"): $out"
  fi
}

# (d)
refused "fake Open MPI job of 4" "OMPI_COMM_WORLD_RANK=1" "OMPI_COMM_WORLD_SIZE=4" "RWIN_ROOT" "job of 1" -- \
  OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=1
refused "fake PMIx client" "PMIX_NAMESPACE=x" "PMIX_RANK=1" "PMIx_Init failed" "job of 1" -- PMIX_RANK=1 PMIX_NAMESPACE=x
refused "fake PMIx client under RWIN_BOOTSTRAP=tcp" "PMIX_NAMESPACE=x" "PMIX_RANK=1" "refusing to run as a job of 1" -- \
  PMIX_RANK=1 PMIX_NAMESPACE=x RWIN_BOOTSTRAP=tcp
# (e)
refused "RWIN_BOOTSTRAP=bogus" "RWIN_BOOTSTRAP='bogus'" "expected pmix, tcp or auto" -- RWIN_BOOTSTRAP=bogus
refused "RWIN_BOOTSTRAP=pmix without a server" "RWIN_BOOTSTRAP=pmix" "no PMIx server is advertised" \
  "PMIX_SERVER_URI" -- RWIN_BOOTSTRAP=pmix
# A "server" that accepts and never answers (PMIx_Init itself would wait for ever): the start-up
# timeout ends it, naming PMIx_Init and the address (a listening socket on loopback, nothing else).
silent_dir=$(mktemp -d)
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1] + "/port", "w").write(str(s.getsockname()[1]))
time.sleep(120)' "$silent_dir" &
silent_pid=$!
for _ in $(seq 100); do [[ -s $silent_dir/port ]] && break; sleep 0.05; done
silent_uri="silent.0;tcp4://127.0.0.1:$(cat "$silent_dir/port")"
refused "a PMIx server that never answers" "PMIx_Init did not return within 2000 ms" \
  "RWIN_STARTUP_TIMEOUT_MS" "PMIX_SERVER_URI41=$silent_uri" -- RWIN_BOOTSTRAP=pmix RWIN_STARTUP_TIMEOUT_MS=2000 \
  PMIX_NAMESPACE=silent PMIX_RANK=0 PMIX_SERVER_URI41="$silent_uri" PMIX_SERVER_URI4="$silent_uri"
kill "$silent_pid" 2>/dev/null
wait "$silent_pid" 2>/dev/null
rm -rf "$silent_dir"

# A singleton stays a job of 1.
out=$(env "${unset_rwin[@]}" $(compgen -e | grep -E '^(PMIX_|OMPI_|PMI_|SLURM_)' | sed 's/^/-u /') \
  timeout 60 "$ring" --mode put 2>&1)
if [[ $? == 0 ]] && grep -q "1 ranks .*all ranks OK" <<<"$out"; then pass "no launcher: a job of 1"; else fail "singleton: $out"; fi

# (f) Python: rank and size from PMIx. Each rank writes its own file (mpirun's --tag-output may split
# one line of two ranks' output).
pydir=$bin/../python
py=${RWIN_PYTHON:-/usr/bin/python3}
if compgen -G "$pydir/rwin/_rwin*.so" >/dev/null && [[ -x $py ]]; then
  log=$tmp/python.log
  # A sanitizer build's module needs its runtime preloaded into the (uninstrumented) interpreter, whose
  # own allocations LSan would report (as tests/scripts/python_pytest.sh does).
  san_x=()
  so=$(ls "$pydir"/rwin/_rwin*.so | head -1)
  # Not `ldd | grep -q`: under pipefail grep's early exit can SIGPIPE ldd and turn a match into a miss.
  if grep -q libasan <<<"$(ldd "$so")"; then
    san_x=(-x "LD_PRELOAD=$(ldd "$so" | awk '/lib(a|ub)san/ {print $3}' | paste -sd:)" -x PYTHONMALLOC=malloc
           -x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
  fi
  env "${unset_rwin[@]}" timeout 120 "${mpirun_cmd[@]}" -np 2 -x PYTHONPATH="$pydir" -x PYTHONDONTWRITEBYTECODE=1 \
    "${san_x[@]}" -x "PMIX_TEST_OUT=$tmp/py" "$py" -c 'import os, rwin
for i in range(2):  # two Contexts in a row: two rendezvous in one PMIx session
    with rwin.Context() as c:
        c.barrier()
        with open(os.environ["PMIX_TEST_OUT"] + "." + str(c.rank), "a") as f:
            f.write(f"PY {i} {c.rank} {c.nranks}\n")' >"$log" 2>&1
  rc=$?
  want0=$'PY 0 0 2\nPY 1 0 2' want1=$'PY 0 1 2\nPY 1 1 2'
  if [[ $rc == 0 && $(cat "$tmp/py.0" 2>/dev/null) == "$want0" && $(cat "$tmp/py.1" 2>/dev/null) == "$want1" ]]; then
    pass "python under mpirun -np 2: ranks 0 and 1 of 2, two Contexts in a row"
  else
    fail "python under mpirun (exit $rc): rank 0 wrote '$(cat "$tmp/py.0" 2>/dev/null)', rank 1 '$(cat "$tmp/py.1" 2>/dev/null)'"
    tail -n 20 "$log" | sed 's/^/  | /' >&2
  fi
else
  echo "note pmix_bootstrap: no Python package in $pydir: python case not run"
fi

if ((failures > 0)); then echo "pmix_bootstrap: FAILED ($failures)"; exit 1; fi
echo "pmix_bootstrap: all passed"
