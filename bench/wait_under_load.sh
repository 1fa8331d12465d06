#!/usr/bin/env bash
# Waiting when the CPUs are shared (issue 27, "waiting under load"): 8 B put_lat over shared memory,
# rwin against raw UCP in the same run (rwin-perf --vs-raw alternates batches of the two), with one
# CPU-bound process per core beside the job (stress-ng --cpu $(nproc)), as a runtime computes beside
# its communication. Each configuration is an environment for the job; three rounds, interleaved.
#   bench/wait_under_load.sh [BUILD_DIR] [ENV ...]      e.g. bench/wait_under_load.sh build "" RWIN_SPIN_US=0
# Environment: N (iterations, default 30000). Prints one rwin-perf row per round and configuration.
set -u
B=$(cd "${1:-build}" && pwd)
shift || true
(($#)) || set -- ""
command -v stress-ng >/dev/null || { echo "wait_under_load: stress-ng missing (apt-get install stress-ng)" >&2; exit 2; }
export UCX_TLS=posix,sysv,self
stress-ng --cpu "$(nproc)" --timeout 900s >/dev/null 2>&1 &
hog=$!
trap 'kill $hog 2>/dev/null; wait $hog 2>/dev/null' EXIT
sleep 1
echo "rwin-perf put_lat 8 B, shm, beside $(nproc) CPU hogs; columns: p50 p99 avg (us) MiB/s Mop/s | raw p50 raw avg raw MiB/s | ratio"
for round in 1 2 3; do
  for cfg in "$@"; do
    line=$(env $cfg timeout 120 "$B/bin/rwinrun" -n 2 -- "$B/bin/rwin-perf" -t put_lat -s 8 -n "${N:-30000}" --vs-raw 2>&1 | tail -1)
    echo "round $round [${cfg:-defaults}] ${line#*|}"
  done
done
