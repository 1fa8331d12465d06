#!/usr/bin/env bash
# rwinrun: per-rank prefixes on stdout and stderr, environment, partial last lines, --no-prefix,
# --output DIR (a file per rank and stream), usage errors.
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

# --no-prefix: the same lines, byte for byte as the ranks wrote them (a partial last line stays partial,
# so another rank's line may follow it on the same line: only whole lines are kept apart).
"$rwinrun" -n 3 --no-prefix -- sh -c 'echo "out $RWIN_RANK"; echo "err $RWIN_RANK" >&2; printf "tail $RWIN_RANK"' \
  >"$tmp/out" 2>"$tmp/err" || fail "--no-prefix run failed: $(cat "$tmp/err")"
grep -q '\[' "$tmp/out" "$tmp/err" && fail "--no-prefix still prefixed: $(cat "$tmp/out" "$tmp/err")"
for r in 0 1 2; do
  grep -q "out $r" "$tmp/out" || fail "--no-prefix: no stdout line of rank $r: $(cat "$tmp/out")"
  grep -qx "err $r" "$tmp/err" || fail "--no-prefix: no stderr line of rank $r: $(cat "$tmp/err")"
  grep -q "tail $r" "$tmp/out" || fail "--no-prefix: partial line of rank $r lost: $(cat "$tmp/out")"
done
[ "$(tr -cd '\n' <"$tmp/out" | wc -c)" -eq 3 ] || fail "--no-prefix added or lost newlines: $(od -c "$tmp/out")"

# --output DIR: DIR/rank.<r>.out and .err hold exactly that rank's output, unprefixed; nothing on ours.
"$rwinrun" -n 3 --output "$tmp/o/d" -- sh -c 'echo "out $RWIN_RANK"; echo "err $RWIN_RANK" >&2; printf "tail $RWIN_RANK"' \
  >"$tmp/out" 2>"$tmp/err" || fail "--output run failed: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "--output: something still went to stdout: $(cat "$tmp/out")"
[ "$(ls "$tmp/o/d" | sort | tr '\n' ' ')" = "rank.0.err rank.0.out rank.1.err rank.1.out rank.2.err rank.2.out " ] ||
  fail "--output made other files: $(ls "$tmp/o/d")"
for r in 0 1 2; do
  [ "$(cat "$tmp/o/d/rank.$r.out")" = "$(printf 'out %s\ntail %s' $r $r)" ] ||
    fail "rank.$r.out holds: $(od -c "$tmp/o/d/rank.$r.out")"
  [ "$(cat "$tmp/o/d/rank.$r.err")" = "err $r" ] || fail "rank.$r.err holds: $(cat "$tmp/o/d/rank.$r.err")"
done
# ... and a failing rank is still named, on rwinrun's own stderr, and ends the job.
"$rwinrun" -n 2 --output "$tmp/o/d" -- sh -c '[ "$RWIN_RANK" = 1 ] && exit 3; sleep 30' >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "--output with a failing rank gave exit status $rc, want 1"
grep -q "^rwinrun: rank 1 (pid [0-9]*) exited with status 3" "$tmp/err" || fail "--output: failure not named: $(cat "$tmp/err")"
# A DIR that cannot be made is refused before anything starts.
: >"$tmp/file"
"$rwinrun" -n 1 --output "$tmp/file" -- true >"$tmp/out" 2>&1 && fail "--output onto a file was accepted"
grep -q "^rwinrun: --output: cannot create directory '$tmp/file'" "$tmp/out" || fail "--output onto a file: $(cat "$tmp/out")"

"$rwinrun" --help >"$tmp/out" 2>&1 || fail "--help exit status $?"
grep -qi "usage: rwinrun" "$tmp/out" || fail "--help prints no usage"
for f in --no-prefix --output; do grep -q -- "$f" "$tmp/out" || fail "--help does not mention $f"; done
grep -q "rank.<r>.out" "$tmp/out" || fail "--help does not name the --output files"
for args in "" "-n" "-n 0 true" "-n x true" "-n 2" "--bogus -n 1 true" "-n 1 --timeout -3 true" "-n 1 --root nope true" \
            "-n +2 true" "-n -0 true" "-n 1x true" "-n 4097 true" "-n 1 --timeout 0x10 true" "-n 1 --timeout +5 true" \
            "-n 1 --timeout 5s true" "-n 1 --timeout nan true" "-n 1 --timeout inf true" "-n 1 --root 127.0.0.1:+1 true"; do
  # shellcheck disable=SC2086
  "$rwinrun" $args >"$tmp/out" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "bad usage '$args' gave exit status $rc, want 2"
  grep -q "^rwinrun: " "$tmp/out" || fail "bad usage '$args' printed no message: $(cat "$tmp/out")"
  # The message names what was wrong: the option (its long name) or the missing PROGRAM.
  case "$args" in
    *--bogus*) want=--bogus ;; *--timeout*) want=--timeout ;; *--root*) want=--root ;;
    "-n 2") want=PROGRAM ;; *) want=--np ;;
  esac
  grep -q -- "^rwinrun: .*$want" "$tmp/out" || fail "bad usage '$args' does not name $want: $(cat "$tmp/out")"
done
echo "PASS rwinrun_output"
