#!/usr/bin/env bash
# Checks the fault suite's own bookkeeping with a fake ring_shift (fake_ring_shift.sh) whose behaviour
# is known: detection times (0.5 s steps per rank), crash, hang and wrong-message counting, the closing
# line and the exit status. Takes ~30 s; needs no rwin build.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/fake_ring_shift.sh" "$tmp/ring_shift"
chmod +x "$tmp/ring_shift"
fails=0
expect() {  # expect MODE WANT_RC ROW_REGEX: one run of 2 kill trials with FAKE_MODE=MODE
  local out rc
  out=$(FAKE_MODE=$1 /usr/bin/python3 "$here/faults.py" "$tmp" --only kill --transports tcp --trials 2 --seed 5 \
    --delay 0.1:0.3 --cap 4 2>&1)
  rc=$?
  # ...and per survivor: rank r reacts r x 0.5 s after the kill (detection is timed per process).
  if [[ $rc -eq $2 ]] && grep -Eq "$3" <<<"$out" && grep -Eq '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" &&
    { [[ $1 == hang ]] || grep -Eq 'rank 2 .* r1 rc=[-0-9]+ 0\.[4-9][0-9]s[^;]*, r3 rc=[-0-9]+ (1\.[4-9]|2\.[0-4])[0-9]s' <<<"$out"; }; then
    echo "PASS selftest $1"
  else
    echo "FAIL selftest $1 (rc $rc, want $2; row /$3/):"; echo "$out"; fails=$((fails + 1))
  fi
}
# Seed 5 kills rank 2, then rank 0; rank 3 reacts 1.5 s after the kill, so the max is ~1.5 s
# (bounds are generous: a loaded machine makes the fake slower, never faster).
#                 build     tr      n     ok    hang  crash wrong slow  other p50         max
expect ok   0 '^\| release \| tcp \| 2 \| 2 \| 0 \| 0 \| 0 \| 0 \| 0 \| [01]\.[0-9]+ \| (1\.[4-9]|2\.[0-4])[0-9] \|$'
expect segv 1 '^\| release \| tcp \| 2 \| 0 \| 0 \| 2 \| 0 \| 0 \| 0 \| [01]\.[0-9]+ \| (1\.[4-9]|2\.[0-4])[0-9] \|$'
expect asan 1 '^\| release \| tcp \| 2 \| 0 \| 0 \| 2 \| 0 \| 0 \| 0 \|'
expect zero 1 '^\| release \| tcp \| 2 \| 0 \| 0 \| 0 \| 2 \| 0 \| 0 \|'
expect hang 1 '^\| release \| tcp \| 2 \| 0 \| 2 \| 0 \| 0 \| 0 \| 0 \| - \| > 4 \|$'
echo "$((5 - fails)) passed, $fails failed"
[[ $fails -eq 0 ]]
