#!/usr/bin/env bash
# Runs every libFuzzer harness of BUILD_DIR (tests/fuzz/CMakeLists.txt, `ninja fuzzers`) for a
# bounded time over a copy of its checked-in seed corpus (tests/fuzz/corpus/<target>; the copy
# keeps what the run discovers out of the source tree). Fails on any crash, leak, timeout or
# broken property; the input that failed is kept under BUILD_DIR/fuzz-artifacts/.
#   usage: tests/fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET
set -uo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS_PER_TARGET}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS_PER_TARGET}
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/bin"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

targets=()
for c in "$here"/corpus/*/; do targets+=("$(basename "$c")"); done
# fuzz_one TARGET: one harness over its corpus copy; its verdict line in $tmp/TARGET.verdict.
fuzz_one() {
  local t=$1 exe="$bin/${1}_fuzz" seeds log rc runs after crash reason
  if [[ ! -x "$exe" ]]; then
    echo "FAIL $t: $exe missing (ninja -C $build fuzzers)" >"$tmp/$t.verdict"
    return
  fi
  mkdir -p "$tmp/$t"
  cp "$here/corpus/$t"/* "$tmp/$t/"
  seeds=$(find "$tmp/$t" -type f | wc -l)
  log="$artifacts/$t.log"
  # -timeout: one input running > 10 s is a hang; -rss_limit_mb bounds memory; one job per target,
  # and as many targets at a time as there are cores, so each target gets a core for the time asked.
  "$exe" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" "$tmp/$t" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  after=$(find "$tmp/$t" -type f | wc -l)
  if [[ $rc -eq 0 ]]; then
    echo "PASS $t: ${runs:-?} runs in ${seconds} s, corpus $seeds -> $after inputs" >"$tmp/$t.verdict"
  else
    crash=$(ls -t "$artifacts/$t-"* 2>/dev/null | head -1)
    reason=$(grep -m1 -E "ERROR: |property failed|runtime error" "$log" || tail -1 "$log")
    echo "FAIL $t: exit $rc: $reason; input ${crash:-?}; log $log" >"$tmp/$t.verdict"
  fi
}
jobs=${RWIN_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
  fuzz_one "$t" &
done
wait
passed=0
failed=0
for t in "${targets[@]}"; do
  v=$(cat "$tmp/$t.verdict" 2>/dev/null || echo "FAIL $t: no verdict (the runner died)")
  echo "$v"
  if [[ $v == PASS* ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
