#!/usr/bin/env bash
# rwin-perf's collective tests (issue 12) on 3 ranks at 2 small sizes, shared memory: every test's
# exact result check must say "ok" (no timing is asserted). Also a non-default dtype / op / mode.
#   perf_collectives_smoke.sh BIN_DIR
set -uo pipefail
BIN=${1:?usage: perf_collectives_smoke.sh BIN_DIR}
[[ -x $BIN/rwin-perf ]] || { echo "rwin-perf not built: skipped"; exit 77; }
export UCX_TLS=posix,sysv,self UCX_LOG_LEVEL=fatal
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run() {  # name min-rows args...
  local name=$1 want=$2; shift 2
  if ! "$BIN/rwinrun" -n 3 --timeout 240 -- "$BIN/rwin-perf" -s 8,12K -n 6 -w 2 --min-iters 3 --no-pin \
      --timeout-ms 60000 --label smoke "$@" -o "$tmp/$name.csv" --csv >"$tmp/$name.log" 2>&1; then
    echo "FAIL $name: rwin-perf exited non-zero"; cat "$tmp/$name.log"; fail=1; return
  fi
  local rows bad
  rows=$(tail -n +2 "$tmp/$name.csv" | wc -l)
  bad=$(tail -n +2 "$tmp/$name.csv" | awk -F, '$15 != "ok" && $3 != "barrier"' | wc -l)
  if [[ $rows -lt $want || $bad -ne 0 ]]; then
    echo "FAIL $name: $rows rows (want >= $want), $bad not ok"; cat "$tmp/$name.csv"; fail=1
  else
    echo "ok   $name ($rows rows)"
  fi
}
run all 11 -t allreduce,allgather,reduce_scatter,all_to_all,broadcast,barrier
run ring_i32_max 4 -t allreduce,reduce_scatter --dtype i32 --op max --mode ring
run mesh_bf16 2 -t allreduce --dtype bf16 --mode mesh
# --small-iters (OSU's convention, collectives_side_by_side.sh): at least N calls at <= 8 KiB only.
run small_iters 2 -t allreduce --small-iters 9
if [[ -s $tmp/small_iters.csv ]]; then
  got=$(tail -n +2 "$tmp/small_iters.csv" | awk -F, '{printf "%s:%s ", $8, $10}')
  [[ $got == "8:9 12288:6 " ]] || { echo "FAIL small_iters: size:iters $got (want 8:9 12288:6)"; fail=1; }
fi
exit $fail
