#!/usr/bin/env bash
# The flake ledger (issue 24): runs one test command N times, optionally under CPU load and/or inside
# the soft-RoCE guest, and counts passes and failures.
#
#   tests/ledger.sh [-n N] [--load K] [--guest] [--timeout S] [--tail L] [--keep-going] -- CMD [ARGS...]
#
#   -n N          runs (default 20)
#   --load K      K CPU hogs for the whole ledger: stress-ng --cpu K if installed, else K busy loops;
#                 started here and always killed on exit (also when this script is killed: pdeathsig)
#   --guest       all N runs inside ONE soft-RoCE guest (tests/rxe/run-in-guest.sh, booted once; the
#                 load, if any, runs inside the guest too)
#   --timeout S   per-run bound (default 600 s): a run past it is killed and counted as a failure
#   --tail L      lines of the first failure's output shown (default 40)
#   --stop-first  stop at the first failure (default: run all N)
#
# Prints one line per run, the first failure's output tail, then
#   "ledger: P passed, F failed of N runs (load: ...)" ; exit 0 only if nothing failed.
# Example (the figures recorded in tests/README.md):
#   tests/ledger.sh -n 20 --load 2 -- build/bin/rwin_mp_tests \
#     --gtest_filter='Transports/Contract.OtherPeersKeepWorkingWhenOneDies/ucx_tcp'
set -uo pipefail
n=20 load=0 guest=0 per_run=600 tail_lines=40 stop_first=0
args=("$@")
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --guest) guest=1; shift ;;
    --timeout) per_run=$2; shift 2 ;;
    --tail) tail_lines=$2; shift 2 ;;
    --stop-first) stop_first=1; shift ;;
    --) shift; break ;;
    *) echo "ledger: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "usage: tests/ledger.sh [-n N] [--load K] [--guest] [--timeout S] [--tail L] -- CMD..." >&2; exit 2; }
[[ $n =~ ^[0-9]+$ && $load =~ ^[0-9]+$ && $per_run =~ ^[0-9]+$ ]] || { echo "ledger: -n, --load, --timeout take numbers" >&2; exit 2; }

if [[ $guest == 1 && "${RWIN_IN_GUEST:-}" != 1 ]]; then
  # Again inside the guest, without --guest; the guest's own deadline covers every run.
  rest=(); for a in "${args[@]}"; do [[ $a == --guest ]] || rest+=("$a"); done
  cd "$(dirname "$0")/.." || exit 2
  RWIN_RXE_TIMEOUT=${RWIN_RXE_TIMEOUT:-$((n * per_run + 120))} exec tests/rxe/run-in-guest.sh bash tests/ledger.sh "${rest[@]}"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rwin-ledger.XXXXXX") || exit 2
hogs=()
cleanup() {
  local p
  for p in "${hogs[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
  for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM

load_desc=none
if [[ $load -gt 0 ]]; then
  bound=$((n * per_run + 60))   # never outlives the ledger, even if the trap does not run
  if command -v stress-ng >/dev/null; then
    setsid setpriv --pdeathsig KILL stress-ng --cpu "$load" --timeout "$bound" --quiet >/dev/null 2>&1 &
    hogs+=($!); load_desc="stress-ng --cpu $load"
  else
    for ((i = 0; i < load; i++)); do
      setsid setpriv --pdeathsig KILL timeout "$bound" bash -c 'while :; do :; done' &
      hogs+=($!)
    done
    load_desc="$load busy loops"
  fi
fi
where=host; [[ "${RWIN_IN_GUEST:-}" == 1 ]] && where="rxe guest"
echo "ledger: $n runs of: $* ($where, load: $load_desc, ${per_run} s bound per run)"

pass=0 fail=0 first=
t_all=$SECONDS
for ((i = 1; i <= n; i++)); do
  t0=$SECONDS
  timeout -k 5 "$per_run" "$@" >"$tmp/run.log" 2>&1 </dev/null
  rc=$?
  if [[ $rc -eq 0 ]]; then
    pass=$((pass + 1)); echo "ledger: run $i/$n PASS ($((SECONDS - t0)) s)"
  else
    fail=$((fail + 1))
    why="exit $rc"; [[ $rc -eq 124 ]] && why="timed out after $per_run s"
    echo "ledger: run $i/$n FAIL: $why ($((SECONDS - t0)) s)"
    [[ -n $first ]] || { first=$i; cp "$tmp/run.log" "$tmp/first-failure.log"; }
    [[ $stop_first == 1 ]] && break
  fi
done
if [[ -n $first ]]; then
  echo "ledger: ---- first failure (run $first), last $tail_lines lines:"
  tail -n "$tail_lines" "$tmp/first-failure.log"
  echo "ledger: ----"
fi
echo "ledger: $pass passed, $fail failed of $((pass + fail)) runs ($where, load: $load_desc, $((SECONDS - t_all)) s)"
[[ $fail -eq 0 ]]
