#!/usr/bin/env bash
# Checks the fault suite's own bookkeeping with a fake ring_shift (fake_ring_shift.sh) whose behaviour
# is known: detection times, crash, hang and wrong-message counting, the closing line and the exit
# status. The five modes run at once (the fake binds no port; each run has its own directory):
# ~19 s instead of ~45 s one after another. Needs no rwin build. No timing bound: the fake sleeps
# RWIN_RANK x 0.5 s after it notices a death, so a survivor's measured detection is at least that (a loaded machine only
# adds), and per-process timing shows as rank 3's time above rank 1's (1 s apart by construction).
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/fake_ring_shift.sh" "$tmp/ring_shift"
chmod +x "$tmp/ring_shift"
fails=0
expect() {  # expect MODE WANT_RC ROW_REGEX [MIN_MAX]: one run of 2 kill trials with FAKE_MODE=MODE;
  # the release/tcp table row must match ROW_REGEX and its max column be >= MIN_MAX when given.
  local out rc r1 r3 max ok=1
  out=$(FAKE_MODE=$1 /usr/bin/python3 "$here/faults.py" "$tmp" --only kill --transports tcp --trials 2 --add-trials 1 --coll-trials 0 --seed 5 \
    --delay 0.1:0.3 --cap 4 2>&1)
  rc=$?
  [[ $rc -eq $2 ]] && grep -Eq "$3" <<<"$out" && grep -Eq '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" || ok=0
  if [[ -n ${4:-} ]]; then
    max=$(grep -E "$3" <<<"$out" | head -1 | awk -F'|' '{gsub(/ /, "", $12); print $12}')
    awk -v m="$max" -v want="$4" 'BEGIN { exit !(m + 0 >= want) }' || ok=0
  fi
  # Per survivor: the trial that kills rank 2; rank r reacts r x 0.5 s after noticing the kill.
  if [[ $1 != hang ]]; then
    if [[ $out =~ rank\ 2\ [^$'\n']*\ r1\ rc=[-0-9]+\ ([0-9.]+)s[^$'\n']*\ r3\ rc=[-0-9]+\ ([0-9.]+)s ]]; then
      r1=${BASH_REMATCH[1]} r3=${BASH_REMATCH[2]}
      awk -v a="$r1" -v b="$r3" 'BEGIN { exit !(a >= 0.5 && b >= 1.5 && b > a) }' || ok=0
    else
      ok=0
    fi
  fi
  if [[ $ok == 1 ]]; then
    echo "PASS selftest $1"
  else
    echo "FAIL selftest $1 (rc $rc, want $2; row /$3/${4:+, max >= $4}; rank 1 >= 0.5 s, rank 3 >= 1.5 s and later):"
    echo "$out"; return 1
  fi
}
pids=()
run_mode() {  # run_mode MODE ARGS...: expect in the background, its report in $tmp/report.MODE
  expect "$@" >"$tmp/report.$1" 2>&1 &
  pids+=("$!")
}
# Seed 5 kills rank 2, then rank 0; rank 3 reacts 1.5 s after noticing the kill, so the max is >= 1.5 s.
#                 build     tr      n     ok    hang  crash wrong slow  other p50         max
run_mode ok   0 '^\| release \| tcp \| 2 \| 2 \| 0 \| 0 \| 0 \| 0 \| 0 \| [0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \|$' 1.5
run_mode segv 1 '^\| release \| tcp \| 2 \| 0 \| 0 \| 2 \| 0 \| 0 \| 0 \| [0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \|$' 1.5
run_mode asan 1 '^\| release \| tcp \| 2 \| 0 \| 0 \| 2 \| 0 \| 0 \| 0 \|'
run_mode zero 1 '^\| release \| tcp \| 2 \| 0 \| 0 \| 0 \| 2 \| 0 \| 0 \|'
run_mode hang 1 '^\| release \| tcp \| 2 \| 0 \| 2 \| 0 \| 0 \| 0 \| 0 \| - \| > 4 \|$'
for i in "${!pids[@]}"; do wait "${pids[$i]}" || fails=$((fails + 1)); done
for mode in ok segv asan zero hang; do cat "$tmp/report.$mode"; done
echo "$((5 - fails)) passed, $fails failed"
[[ $fails -eq 0 ]]
