#!/usr/bin/env bash
# rwinrun: per-rank prefixes on stdout and stderr, environment, partial last lines, usage errors.
set -u
bin=${1:?usage: rwinrun_output.sh BIN_DIR}
rwinrun="$bin/rwinrun"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL rwinrun_output: $*" >&2; exit 1; }

"$rwinrun" -n 3 -- sh -c 'echo "out $RWIN_RANK/$RWIN_NRANKS $RWIN_ROOT"; echo "err $RWIN_RANK" >&2; printf "tail $RWIN_RANK"' \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "3 succeeding ranks gave exit status $rc; stderr: $(cat "$tmp/err")"
for r in 0 1 2; do
  grep -Eq "^\[$r\] out $r/3 127\.0\.0\.1:[0-9]+$" "$tmp/out" || fail "no prefixed stdout line for rank $r: $(cat "$tmp/out")"
  grep -qx "\[$r\] tail $r" "$tmp/out" || fail "partial last line of rank $r not flushed: $(cat "$tmp/out")"
  grep -qx "\[$r\] err $r" "$tmp/err" || fail "no prefixed stderr line for rank $r: $(cat "$tmp/err")"
  grep -q "err" "$tmp/out" && fail "stderr leaked into stdout: $(cat "$tmp/out")"
done
[ "$(grep -c '' "$tmp/out")" -eq 6 ] || fail "expected 6 stdout lines: $(cat "$tmp/out")"
[ "$(cut -d" " -f4 <"$tmp/out" | grep -E ':[0-9]+$' | sort -u | wc -l)" -eq 1 ] || fail "ranks saw different RWIN_ROOT"

# The rest of the environment is kept; --root is passed through.
RWIN_TEST_MARK=kept "$rwinrun" -n 1 --root 127.0.0.1:4242 -- sh -c 'echo "$RWIN_TEST_MARK $RWIN_ROOT"' >"$tmp/out" 2>&1 \
  || fail "--root run failed: $(cat "$tmp/out")"
grep -qx "\[0\] kept 127.0.0.1:4242" "$tmp/out" || fail "environment or --root not passed: $(cat "$tmp/out")"

"$rwinrun" --help >"$tmp/out" 2>&1 || fail "--help exit status $?"
grep -q "usage: rwinrun" "$tmp/out" || fail "--help prints no usage"
for args in "" "-n" "-n 0 true" "-n x true" "-n 2" "--bogus -n 1 true" "-n 1 --timeout -3 true" "-n 1 --root nope true" \
            "-n +2 true" "-n -0 true" "-n 1x true" "-n 4097 true" "-n 1 --timeout 0x10 true" "-n 1 --timeout +5 true" \
            "-n 1 --timeout 5s true" "-n 1 --timeout nan true" "-n 1 --timeout inf true" "-n 1 --root 127.0.0.1:+1 true"; do
  # shellcheck disable=SC2086
  "$rwinrun" $args >"$tmp/out" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "bad usage '$args' gave exit status $rc, want 2"
  grep -q "^rwinrun: " "$tmp/out" || fail "bad usage '$args' printed no message: $(cat "$tmp/out")"
done
echo "PASS rwinrun_output"
