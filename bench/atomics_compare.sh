#!/usr/bin/env bash
# Fetching atomics side by side (issue 25 Goals): rwin's blocking fetch_add round trip (rwin-perf -t
# fetch_add_lat) against OpenSHMEM's shmem_long_atomic_fetch_add (bench/shmem/shmem_bench.c fadd_lat)
# and ucx_perftest ucp_fadd over shared memory (UCX_TLS=posix,self) and tcp (UCX_TLS=tcp,
# UCX_NET_DEVICES=lo), and the busy-poll TCP ping-pong round trip (bench/tcp_ref.cpp) as the tcp anchor.
# The tools run interleaved, REPS rounds, so a noisy stretch of the machine hits all of them; the
# summary is the median over rounds of each tool's per-round p50. Raw output per round in OUT.
# rwin runs twice per round: with its waits spinning (RWIN_SPIN_US=1000000, as the other tools' targets
# poll) and with the default back-off (see below); over tcp both again on rwin's own tcp transport.
#
#   bench/atomics_compare.sh [BUILD_DIR] [OUT_DIR]   (needs rwin-perf, rwinrun, rwin_tcp_ref; oshcc/oshrun)
# Environment: REPS (default 5), ITERS (default 20000), PORT (ucx_perftest, default 24377),
# TRANSPORTS (default "shm tcp"; "tcp" alone for the tcp lanes).
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/results/atomics-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPS=${REPS:-5}
ITERS=${ITERS:-20000}
PORT=${PORT:-24377}
TRANSPORTS=${TRANSPORTS:-shm tcp}
BIN=$BUILD/bin
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-fatal}
for b in rwin-perf rwinrun rwin_tcp_ref; do
  [[ -x $BIN/$b ]] || { echo "atomics_compare.sh: $BIN/$b missing" >&2; exit 2; }
done
SHMEM=$BIN/rwin_shmem_bench
oshcc -O2 -o "$SHMEM" "$HERE/shmem/shmem_bench.c" || { echo "atomics_compare.sh: oshcc failed" >&2; exit 2; }
env_for() { case $1 in shm) echo "UCX_TLS=posix,self" ;; tcp) echo "UCX_TLS=tcp UCX_NET_DEVICES=lo" ;; esac; }

{
  echo "date: $(date -u +%FT%TZ)"; echo "host: $(uname -srm)"; lscpu | grep -E "Model name|^CPU\(s\)"
  echo "ucx: $(ucx_info -v | head -1)"; echo "reps: $REPS iters: $ITERS"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); busiest processes (others' builds and tests share the machine):"
  top -b -n 1 -o %CPU -w 160 | sed -n '7,13p'
} >"$OUT/machine.txt"
echo "round,transport,tool,p50_us,avg_us,load1" >"$OUT/rounds.csv"
load() { cut -d' ' -f1 /proc/loadavg; }

for r in $(seq 1 "$REPS"); do
  for tr in $TRANSPORTS; do
    # rwin twice: "rwin" with RWIN_SPIN_US=1000000 (a waiting rank keeps polling, as OpenSHMEM's
    # target does in shmem_barrier_all and the ping-pong's peer in recv): over tcp (am mode) the target
    # applies the atomic in its progress; "rwin_default": the default back-off, where a rank idle in
    # wait() for 2 ms polls only between 50 us sleeps (what a long-idle passive target gives).
    # Over tcp, rwin's own transport too (RWIN_TRANSPORT=tcp, docs/TCP.md): "owntcp" and
    # "owntcp_default", where its receiver thread, not the waiting rank, applies the atomic.
    modes=(rwin rwin_default)
    [[ $tr == tcp ]] && modes+=(owntcp owntcp_default)
    for mode in "${modes[@]}"; do
      spin=1000000
      [[ $mode == *_default ]] && spin=""
      own=()
      [[ $mode == owntcp* ]] && own=(RWIN_TRANSPORT=tcp RWIN_IFNAME=lo)
      l=$(load)
      env $(env_for $tr) "${own[@]}" ${spin:+RWIN_SPIN_US=$spin} timeout 300 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -t fetch_add_lat \
        -s 8 -n "$ITERS" -o "$OUT/${mode}_${tr}_$r.csv" >"$OUT/${mode}_${tr}_$r.txt" 2>&1 ||
        echo "round $r: rwin-perf ($mode) over $tr failed" >&2
      /usr/bin/python3 -c 'import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    if row["test"] == "fetch_add_lat": print(",".join(sys.argv[2:5] + [row["p50_us"], row["avg_us"], sys.argv[5]]))' \
        "$OUT/${mode}_${tr}_$r.csv" "$r" "$tr" "$mode" "$l" >>"$OUT/rounds.csv"
    done
    l=$(load)
    env $(env_for $tr) timeout 300 oshrun --allow-run-as-root -np 2 --mca osc ^rdma --bind-to core --map-by core \
      -x UCX_TLS -x UCX_LOG_LEVEL $([[ $tr == tcp ]] && echo "-x UCX_NET_DEVICES") --mca oob_tcp_if_include lo \
      "$SHMEM" -t fadd_lat -n "$ITERS" >"$OUT/shmem_${tr}_$r.txt" 2>&1 || echo "round $r: OpenSHMEM over $tr failed" >&2
    awk -F, -v r="$r" -v tr="$tr" -v l="$l" '$1 == "oshmem" && $2 == "fadd_lat" { print r "," tr ",oshmem," $5 "," $6 "," l }' \
      "$OUT/shmem_${tr}_$r.txt" >>"$OUT/rounds.csv"
    l=$(load)
    env $(env_for $tr) timeout 120 taskset -c 0 ucx_perftest -p "$PORT" >/dev/null 2>&1 &
    srv=$!
    sleep 0.4
    env $(env_for $tr) timeout 120 taskset -c 1 ucx_perftest 127.0.0.1 -p "$PORT" -t ucp_fadd -s 8 -n "$ITERS" \
      -w $((ITERS / 10)) -f -v >"$OUT/perftest_${tr}_$r.txt" 2>&1
    wait "$srv" 2>/dev/null
    # iterations,p50,avg,... as printed (its per-op time; a reference only: not the goal's anchor)
    tail -1 "$OUT/perftest_${tr}_$r.txt" | tr -d ' ' |
      awk -F, -v r="$r" -v tr="$tr" -v l="$l" '$1 ~ /^[0-9]+$/ { print r "," tr ",ucp_fadd," $2 "," $3 "," l }' >>"$OUT/rounds.csv"
  done
  l=$(load)
  "$BIN/rwin_tcp_ref" pingpong 8 "$ITERS" >"$OUT/tcp_ref_$r.txt" 2>&1
  # one way = RTT / 2: x2 for the round trip a fetch_add makes
  awk -F, -v r="$r" -v l="$l" '$1 == "tcp_pingpong_spin" { print r ",tcp,tcp_pingpong_rtt," 2 * $3 "," 2 * $4 "," l }' \
    "$OUT/tcp_ref_$r.txt" >>"$OUT/rounds.csv"
done

/usr/bin/python3 "$HERE/atomics_summary.py" "$OUT/rounds.csv" | tee "$OUT/summary.txt"
echo "atomics_compare.sh: results in $OUT" >&2
