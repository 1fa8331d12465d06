#!/usr/bin/env bash
# Logging (common/log.h): RWIN_LOG_LEVEL, RWIN_LOG_SUBSYS, RWIN_LOG_FILE on a 2-rank ring_shift, and
# the warnings for an RWIN_* variable that is not rwin's and for libucm hooks the registration cache cannot have.
set -u
bin=${1:?usage: logging.sh BIN_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL logging: $*" >&2; exit 1; }
host=$(hostname)

run() {  # run NAME [VAR=VALUE...]: 2 ranks of ring_shift with the given environment
  local name=$1; shift
  env "$@" "$bin/rwinrun" -n 2 --timeout 120 -- "$bin/ring_shift" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  [ $rc -eq 0 ] || fail "$name: rc=$rc: $(cat "$tmp/$name.err")"
  [ "$(grep -c '] OK$' "$tmp/$name.out")" -eq 2 ] || fail "$name: not every rank printed OK: $(cat "$tmp/$name.out")"
}

# Info: the start-up lines, each with host, pid and rank (rwinrun prefixes "[r] ").
run info RWIN_LOG_LEVEL=info
for r in 0 1; do
  p="^\[$r\] \[[0-9-]+ [0-9:.]+\] rwin $host:[0-9]+ \[$r\] info"
  grep -Eq "$p bootstrap: rank $r of 2 from launcher rwin; root 127\.0\.0\.1:[0-9]+ from RWIN_ROOT$" "$tmp/info.err" \
    || fail "rank $r: no rank/root source line: $(cat "$tmp/info.err")"
  grep -Eq "$p core: rank $r of 2: transport ucx\(.*\); self: [a-z]+; same host \(1 peers\): [a-z]+; other hosts \(0 peers\): -$" \
    "$tmp/info.err" || fail "rank $r: no transport/mode line: $(cat "$tmp/info.err")"
  grep -Eq "$p core: rank $r: chunk [0-9]+ bytes \(the transport's default\), pipeline depth [0-9]+ \(the transport's default\)" \
    "$tmp/info.err" || fail "rank $r: no chunk/depth line: $(cat "$tmp/info.err")"
done
pids=$(grep -Eo "rwin $host:[0-9]+ \[[01]\] info" "$tmp/info.err" | sort -u | awk '{print $2}' | sort -u | wc -l)
[ "$pids" -eq 2 ] || fail "expected 2 distinct host:pid values: $(cat "$tmp/info.err")"
grep -q ' debug ' "$tmp/info.err" && fail "info printed debug lines: $(cat "$tmp/info.err")"

# Debug adds connection set-up per peer.
run debug RWIN_LOG_LEVEL=debug
grep -Eq "\[0\] debug ucx: ucx\(.*\): rank 0 -> peer 1: endpoint created .*rma mode [a-z]+" "$tmp/debug.err" \
  || fail "debug: no per-peer endpoint line: $(cat "$tmp/debug.err")"
grep -Eq "\[1\] debug bootstrap: rank 1 of 2: joined the bootstrap store at 127\.0\.0\.1:[0-9]+$" "$tmp/debug.err" \
  || fail "debug: no bootstrap join line: $(cat "$tmp/debug.err")"

# The default level (warn) prints no info line at all.
run default
grep -Eq ' (info|debug|trace) ' "$tmp/default.err" && fail "default level printed info lines: $(cat "$tmp/default.err")"

# RWIN_LOG_SUBSYS=bootstrap: bootstrap's info lines only.
run subsys RWIN_LOG_LEVEL=info RWIN_LOG_SUBSYS=bootstrap
[ "$(grep -c ' info bootstrap: ' "$tmp/subsys.err")" -eq 2 ] || fail "subsys: bootstrap lines missing: $(cat "$tmp/subsys.err")"
grep -Eq ' info (core|ucx|verbs): ' "$tmp/subsys.err" && fail "subsys: other subsystems logged: $(cat "$tmp/subsys.err")"

# An unknown subsystem and an unknown level: one warning each per process, the run goes on.
run badsubsys RWIN_LOG_LEVEL=info RWIN_LOG_SUBSYS=bootstrap,nccl
[ "$(grep -c "warn core: RWIN_LOG_SUBSYS='bootstrap,nccl': unknown subsystem 'nccl'; expected all or a comma list of bootstrap, ucx, verbs, core (using the default)" "$tmp/badsubsys.err")" -eq 2 ] \
  || fail "badsubsys: expected one warning per rank: $(cat "$tmp/badsubsys.err")"
run badlevel RWIN_LOG_LEVEL=loud
[ "$(grep -c "warn core: RWIN_LOG_LEVEL='loud' is not a log level; expected error, warn, info, debug or trace (using the default)" "$tmp/badlevel.err")" -eq 2 ] \
  || fail "badlevel: expected one warning per rank: $(cat "$tmp/badlevel.err")"
grep -q ' info ' "$tmp/badlevel.err" && fail "badlevel: not the default level: $(cat "$tmp/badlevel.err")"

# RWIN_LOG_FILE with %h and %p: one file per process holding its lines; nothing on stderr.
mkdir "$tmp/logs"
run file RWIN_LOG_LEVEL=info "RWIN_LOG_FILE=$tmp/logs/x-%h-%p.log"
files=("$tmp"/logs/x-"$host"-*.log)
[ "${#files[@]}" -eq 2 ] || fail "file: expected 2 log files: $(ls "$tmp/logs")"
for f in "${files[@]}"; do
  pid=${f##*-}; pid=${pid%.log}
  [[ $pid =~ ^[0-9]+$ ]] || fail "file: %p not expanded: $f"
  grep -Eq "rwin $host:$pid \[[01]\] info core: rank [01] of 2: transport" "$f" || fail "file: $f lacks its start-up lines: $(cat "$f")"
  grep -vq "rwin $host:$pid " "$f" && fail "file: $f holds another process's lines: $(cat "$f")"
done
grep -q ' info ' "$tmp/file.err" && fail "file: info lines still on stderr: $(cat "$tmp/file.err")"

# A misspelt variable: one warning per process naming the closest knob.
run unknown RWIN_CHUNK_BYTE=1K
[ "$(grep -c 'warn core: RWIN_CHUNK_BYTE=1K is not an rwin variable; did you mean RWIN_CHUNK_BYTES?$' "$tmp/unknown.err")" -eq 2 ] \
  || fail "unknown: expected one warning per rank: $(cat "$tmp/unknown.err")"

# libucm's memory hooks refused (its hook mode none): one warning that the registration cache is off,
# with how often the install was tried and which calls libucm found hooked, one by one.
out=$(UCX_MEM_MMAP_HOOK_MODE=none "$bin/rwin_unit_tests" --gtest_filter=RegCache.EnvironmentVariableForcesPerOperation 2>&1) \
  || fail "hooks refused: the unit test failed: $out"
want='warn core: rwin: registration cache off, registering caller memory per operation: libucm memory hooks unavailable \(ucm_set_event_handler\(VM_UNMAPPED\): Unsupported operation, 3 attempts; one by one: munmap Unsupported operation, mremap Unsupported operation, shmdt Unsupported operation, madvise Unsupported operation, brk Unsupported operation, sbrk Unsupported operation\)$'
[ "$(grep -cE "$want" <<<"$out")" -eq 1 ] || fail "hooks refused: expected one warning naming the attempts and each call: $out"

echo "PASS logging"
