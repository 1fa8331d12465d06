#!/usr/bin/env bash
# Every tool's command line (tools/cli.h, CLI11): --help exits 0 and shows the usage, --version
# prints "<tool> <project version>" and exits 0, an unknown option and a malformed number or size
# exit 2 with a message that names the option and the text. No rank is started: the parse fails
# before any rendezvous (nothing here sets RWIN_*).
#   tools_cli.sh BIN_DIR
set -u
bin=${1:?usage: tools_cli.sh BIN_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
# The one place the version lives: project(rwin VERSION x.y.z) in the top CMakeLists.txt.
version=$(sed -n 's/^project(rwin VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ -n $version ]] || { echo "FAIL tools_cli: no project(rwin VERSION ...) in $src/CMakeLists.txt"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset RWIN_RANK RWIN_NRANKS RWIN_ROOT RWIN_JOB_KEY
pass=0 fail=0
bad() { echo "FAIL tools_cli: $*"; fail=$((fail + 1)); }

# Tools of the build (bench tools only with RWIN_BUILD_BENCH=ON).
tools=(rwinrun ring_shift rwin-info)
for t in rwin-perf rwin-accumulate-bw rwin_tcp_ref; do
  if [[ -x $bin/$t ]]; then tools+=("$t"); else echo "note: $t not built, not checked"; fi
done

for t in "${tools[@]}"; do
  "$bin/$t" --help >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -ne 0 ]]; then bad "$t --help: exit status $rc, want 0"
  elif ! grep -q "^Usage: $t " "$tmp/out"; then bad "$t --help: no usage line on stdout: $(head -3 "$tmp/out")"
  elif ! grep -q -- "--version" "$tmp/out"; then bad "$t --help does not list --version"
  else pass=$((pass + 1)); fi

  "$bin/$t" --version >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [[ $rc -ne 0 ]]; then bad "$t --version: exit status $rc, want 0"
  elif [[ "$(cat "$tmp/out")" != "$t $version" ]]; then bad "$t --version printed '$(cat "$tmp/out")', want '$t $version'"
  else pass=$((pass + 1)); fi
done

# expect_usage TOOL WANT ARGS...: exit status 2, stderr's first line "TOOL: ..." containing WANT.
expect_usage() {
  local t=$1 want=$2
  shift 2
  [[ -x $bin/$t ]] || return 0
  timeout 60 "$bin/$t" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then bad "$t $*: exit status $rc, want 2 (stderr: $(head -2 "$tmp/err"))"
  elif ! head -1 "$tmp/err" | grep -qF -- "$t: "; then bad "$t $*: message not prefixed '$t: ': $(head -2 "$tmp/err")"
  elif ! head -1 "$tmp/err" | grep -qF -- "$want"; then bad "$t $*: message does not name '$want': $(head -2 "$tmp/err")"
  elif [[ -s $tmp/out ]]; then bad "$t $*: printed on stdout: $(head -2 "$tmp/out")"
  else pass=$((pass + 1)); fi
}

for t in "${tools[@]}"; do
  expect_usage "$t" "--no-such-flag" --no-such-flag
done

# Sizes and counts: the strict forms of bootstrap/parse_number.h (digits, optional K/M/G suffix).
expect_usage rwinrun "--np: '10abc'" -n 10abc true
expect_usage rwinrun "--timeout: '5s'" -n 1 --timeout 5s true
expect_usage ring_shift "--size: '10abc'" --size 10abc
expect_usage ring_shift "--size: ' 10'" --size " 10"
expect_usage ring_shift "--iters: '0x3'" --iters 0x3
expect_usage ring_shift "--iters: '+3'" --iters +3
expect_usage ring_shift "--seconds: '5s'" --seconds 5s
expect_usage ring_shift "--seconds: '-0'" --seconds -0
expect_usage ring_shift "--dtype: " --dtype f128
expect_usage ring_shift "--mode: " --mode scatter
expect_usage rwin-perf "-s: '10abc'" -s 10abc
expect_usage rwin-perf "-s: '1.5K'" -s 8,1.5K
expect_usage rwin-perf "-s: size 12 is not a positive multiple of 8" -s 12
expect_usage rwin-perf "--chunk: '64KB'" --chunk 64KB
expect_usage rwin-perf "--max-bytes: '-1'" --max-bytes -1
expect_usage rwin-perf "-n: '1x'" -n 1x
expect_usage rwin-perf "-O: '010x'" -O 010x
expect_usage rwin-perf "--skew: " --skew 12
expect_usage rwin-perf "-t: unknown test 'put_latency'" -t put_latency
expect_usage rwin-perf "--op: " --op avg
expect_usage rwin-perf "choose one of --csv and --json" --csv --json
expect_usage rwin-accumulate-bw "--sizes: '10abc'" --sizes 4K,10abc
expect_usage rwin-accumulate-bw "--seconds: 'inf'" --seconds inf
expect_usage rwin_tcp_ref "WRITE_BYTES: '10abc'" stream 10abc
expect_usage rwin_tcp_ref "SIZES: '10abc'" pingpong 8,10abc
expect_usage rwin_tcp_ref "ITERS: '-5'" pingpong 8 -5

# A value that is accepted still means what it meant: 1K elements are 1024 (the summary says so).
out=$(UCX_TLS=posix,sysv,self timeout 120 "$bin/rwinrun" -n 2 -- "$bin/ring_shift" --size 1K --iters 1 2>&1)
if grep -q "x 1024 f32 x 1 iters .*all ranks OK" <<<"$out"; then pass=$((pass + 1))
else bad "ring_shift --size 1K --iters 1: $(tail -3 <<<"$out")"; fi

echo "tools_cli: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
