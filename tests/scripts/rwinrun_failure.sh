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

# A survivor that exits with an error because a peer died is not named in the dead rank's place.
# Made deterministic: rank 1 stops rwinrun, lets rank 2 kill itself, waits for rank 2's zombie, and
# exits 1 with a helper resuming rwinrun after it; rwinrun then finds both zombies in one sweep, and
# waitpid hands back the older child (rank 1) first. `timeout -s KILL`: a stopped rwinrun never hangs
# the test.
TMPD="$tmp" timeout -s KILL 60 "$rwinrun" -n 4 -- sh -c '
  case "$RWIN_RANK" in
  2) echo $$ >"$TMPD/victim.tmp" && mv "$TMPD/victim.tmp" "$TMPD/victim"
     while [ ! -e "$TMPD/go" ]; do sleep 0.02; done
     kill -9 $$ ;;
  1) while [ ! -s "$TMPD/victim" ]; do sleep 0.02; done
     victim=$(cat "$TMPD/victim") launcher=$PPID
     kill -STOP "$launcher"; : >"$TMPD/go"
     while :; do case "$(ps -o stat= -p "$victim")" in Z*|"") break ;; esac; sleep 0.02; done
     sh -c "sleep 0.3; kill -CONT $launcher" </dev/null >/dev/null 2>&1 &
     exit 1 ;;
  *) exec sleep 300 ;;
  esac' >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "killed rank plus failing survivor gave exit status $rc, want 1: $(cat "$tmp/err")"
grep -Eq "^rwinrun: rank 2 \(pid [0-9]+\) killed by signal 9 \(SIGKILL\); terminating the other 2 ranks$" "$tmp/err" \
  || fail "the killed rank is not the one named: $(cat "$tmp/err")"
[ "$(grep -c '^rwinrun: rank' "$tmp/err")" -eq 1 ] || fail "the survivor's consequent exit was named too: $(cat "$tmp/err")"

# A rank that dies of a signal rwinrun did not send while the job is ending is named as well (the
# first line may only show a consequence); deaths by rwinrun's own SIGTERM stay quiet.
"$rwinrun" -n 3 -- sh -c '
  if [ "$RWIN_RANK" = 0 ]; then sleep 0.5; exit 3; fi
  if [ "$RWIN_RANK" = 1 ]; then trap "trap - SEGV; kill -SEGV \$\$" TERM; fi
  sleep 300 & wait' >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "exit 3 plus a crash on SIGTERM gave exit status $rc, want 1"
grep -Eq "^rwinrun: rank 0 \(pid [0-9]+\) exited with status 3; terminating the other 2 ranks$" "$tmp/err" \
  || fail "the first failure is not named: $(cat "$tmp/err")"
grep -Eq "^rwinrun: rank 1 \(pid [0-9]+\) killed by signal 11 \(SIGSEGV\), a signal rwinrun did not send$" "$tmp/err" \
  || fail "a rank crashing while the job ended is not named: $(cat "$tmp/err")"
[ "$(grep -c '^rwinrun: rank' "$tmp/err")" -eq 2 ] || fail "rank 2's death by rwinrun's SIGTERM was named: $(cat "$tmp/err")"

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
