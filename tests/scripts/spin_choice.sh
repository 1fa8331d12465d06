#!/usr/bin/env bash
# The wait policy's spin window (RWIN_SPIN_US, core/src/context.cpp choose_spin) counts the CPUs the
# ranks on this host may use together, not one rank's own: ranks bound one per core (rwin-perf pins
# rank r to CPU r, as Open MPI binds small jobs; here taskset does it) are not oversubscribed and keep spinning; two ranks
# confined to one CPU are, and yield at once; a value set in the environment wins.
set -u
bin=${1:?usage: spin_choice.sh BIN_DIR}
fail() { echo "FAIL spin_choice: $*" >&2; exit 1; }
export UCX_TLS=posix,sysv,self RWIN_LOG_LEVEL=info
ncpu=$(nproc)
[[ $ncpu -ge 2 ]] || { echo "spin_choice: SKIPPED: needs 2 CPUs, this process may use $ncpu"; exit 77; }
# run PIN PREFIX...: 2 ranks of a short ring shift, rank r bound to CPU r (PIN=per-rank) or both left
# as started (PIN=none); prints their start-up lines, counted.
run() {
  local pin=$1
  shift
  "$@" timeout 60 "$bin/rwinrun" -n 2 -- sh -c \
    "if [ $pin = per-rank ]; then exec taskset -c \$RWIN_RANK \"\$0\" \"\$@\"; else exec \"\$0\" \"\$@\"; fi" \
    "$bin/ring_shift" --mode put --size 64 --iters 2 2>&1 |
    grep -oE 'spin [0-9]+ us \([0-9]+ ranks on [0-9]+ CPUs here\)' | sort | uniq -c
}
expect() {  # expect WHAT OUTPUT LINE: both ranks said LINE
  grep -qF "2 $3" <<<"$2" || fail "$1: expected both ranks to say '$3', got: ${2:-nothing}"
  echo "spin_choice: $1: $3"
}
expect "one CPU per rank (bound)" "$(run per-rank env)" "spin 200 us (2 ranks on 2 CPUs here)"
expect "two ranks on one CPU" "$(run none taskset -c 0)" "spin 0 us (2 ranks on 1 CPUs here)"
expect "RWIN_SPIN_US=50" "$(run per-rank env RWIN_SPIN_US=50)" "spin 50 us (2 ranks on 2 CPUs here)"
