#!/usr/bin/env bash
# rwinrun: --timeout ends a hung job with exit status 124; SIGTERM to rwinrun reaches the ranks.
set -u
bin=${1:?usage: rwinrun_timeout.sh BIN_DIR}
rwinrun="$bin/rwinrun"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL rwinrun_timeout: $*" >&2; exit 1; }
limit=30  # generous: proves "no hang", not speed

start=$(date +%s)
"$rwinrun" -n 2 --timeout 1 -- sh -c 'echo started; sleep 300; echo never' >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 124 ] || fail "hung job gave exit status $rc, want 124; stderr: $(cat "$tmp/err")"
grep -q "^rwinrun: timed out after 1 s; terminating 2 ranks$" "$tmp/err" || fail "timeout line missing: $(cat "$tmp/err")"
[ "$(grep -c started "$tmp/out")" -eq 2 ] || fail "ranks did not start: $(cat "$tmp/out")"
grep -q never "$tmp/out" && fail "a rank outlived the timeout"
[ $elapsed -lt $limit ] || fail "timeout took ${elapsed}s"

# A job that finishes in time is unaffected by --timeout.
"$rwinrun" -n 2 --timeout 60 -- true >"$tmp/out" 2>&1 || fail "quick job under --timeout failed: $(cat "$tmp/out")"

# SIGTERM to rwinrun is forwarded; it exits 128+15 once the ranks are gone.
"$rwinrun" -n 2 -- sh -c 'echo ready; sleep 300' >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 300); do
  [ "$(grep -c ready "$tmp/out" 2>/dev/null)" -eq 2 ] && break
  sleep 0.1
done
[ "$(grep -c ready "$tmp/out")" -eq 2 ] || fail "ranks never became ready"
start=$(date +%s)
kill -TERM $pid
wait $pid
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 143 ] || fail "SIGTERMed rwinrun gave exit status $rc, want 143; stderr: $(cat "$tmp/err")"
grep -q "forwarding to 2 ranks" "$tmp/err" || fail "no forwarding message: $(cat "$tmp/err")"
[ $elapsed -lt $limit ] || fail "forwarded SIGTERM took ${elapsed}s"
echo "PASS rwinrun_timeout"
