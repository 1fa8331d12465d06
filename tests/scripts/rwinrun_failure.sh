#!/usr/bin/env bash
# rwinrun: a rank exiting non-zero, or killed by SIGKILL, ends the job, is named, and the other
# (sleeping) ranks are terminated instead of being waited for. And the root port rwinrun picks stays
# held while the job runs: another program cannot take it before rank 0 listens.
set -u
bin=${1:?usage: rwinrun_failure.sh BIN_DIR}
rwinrun="$bin/rwinrun"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL rwinrun_failure: $*" >&2; exit 1; }

# Generous bound: this checks "does not hang until the sleepers finish", not speed.
limit=30

start=$(date +%s)
"$rwinrun" -n 4 -- sh -c 'if [ "$RWIN_RANK" = 2 ]; then exit 3; fi; exec sleep 300' >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] || fail "rank exiting 3 gave exit status 0"
[ $rc -eq 1 ] || fail "rank failure should give exit status 1, got $rc"
grep -Eq "^rwinrun: rank 2 \(pid [0-9]+\) exited with status 3; terminating the other 3 ranks$" "$tmp/err" \
  || fail "failure line missing or wrong: $(cat "$tmp/err")"
[ "$(grep -c '^rwinrun: rank' "$tmp/err")" -eq 1 ] || fail "only the first failure should be reported: $(cat "$tmp/err")"
[ $elapsed -lt $limit ] || fail "sleeping ranks not terminated: took ${elapsed}s"

# kill -9 on itself; the sleepers are children of a shell (not exec'd), so only signalling the
# whole process group ends them.
start=$(date +%s)
# Rank 1 dies only once ranks 0 and 2 have started their sleeps (files in $tmp), so the check
# below always has two sleepers to look for.
TMPD="$tmp" "$rwinrun" -n 3 -- sh -c '
  if [ "$RWIN_RANK" = 1 ]; then
    while [ ! -s "$TMPD/child.0" ] || [ ! -s "$TMPD/child.2" ]; do sleep 0.05; done
    kill -9 $$
  fi
  sleep 300 & echo $! >"$TMPD/child.$RWIN_RANK"; wait; echo never' >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 1 ] || fail "SIGKILLed rank should give exit status 1, got $rc"
grep -Eq "^rwinrun: rank 1 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\); terminating the other 2 ranks$" "$tmp/err" \
  || fail "SIGKILL line missing or wrong: $(cat "$tmp/err")"
[ $elapsed -lt $limit ] || fail "sleeping ranks not terminated: took ${elapsed}s"
grep -q never "$tmp/out" && fail "a sleeper ran to completion"
# No rank's background sleep may survive rwinrun.
children=$(cat "$tmp/child.0" "$tmp/child.2")
[ "$(echo "$children" | wc -w)" -eq 2 ] || fail "expected 2 sleeper pids: $(cat "$tmp/out")"
for pid in $children; do
  # A zombie is dead; only reaping is left (some container inits reap late).
  state=$(ps -o stat= -p "$pid" 2>/dev/null)
  case "$state" in "" | Z*) ;; *) fail "sleep $pid of a terminated rank is still alive (state $state)" ;; esac
done

# A rank ignoring SIGTERM is SIGKILLed after the grace period.
start=$(date +%s)
"$rwinrun" -n 2 -- sh -c 'if [ "$RWIN_RANK" = 0 ]; then exit 1; fi; trap "" TERM; sleep 300' >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 1 ] || fail "TERM-ignoring job gave exit status $rc, want 1"
[ $elapsed -lt $limit ] || fail "TERM-ignoring rank not killed: took ${elapsed}s"
# The root port: a plain bind (no SO_REUSEADDR, as another program's socket would do it) is refused
# while the job runs; a listener with SO_REUSEADDR, as rank 0's store server, binds it. (Released at
# once after picking it, rwinrun let the plain bind through: the port could be gone before rank 0.)
py=${RWIN_PYTHON:-/usr/bin/python3}
[[ -x $py ]] || py=python3
out=$("$rwinrun" -n 1 -- "$py" -c '
import errno, os, socket
host, port = os.environ["RWIN_ROOT"].rsplit(":", 1)
plain = socket.socket()
try:
    plain.bind((host, int(port)))
    print("plain bind: bound")
except OSError as e:
    print("plain bind: in use" if e.errno == errno.EADDRINUSE else f"plain bind: {e}")
root = socket.socket()
root.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
root.bind((host, int(port)))
root.listen(1)
print("root listens")' 2>&1)
[[ $out == *"[0] plain bind: in use"* && $out == *"[0] root listens"* ]] ||
  fail "the root port is not held for the job (want the plain bind refused, the root listening): $out"

echo "PASS rwinrun_failure"
