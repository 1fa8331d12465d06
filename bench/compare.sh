#!/usr/bin/env bash
# Side-by-side on this machine, in one go: rwin-perf (with its in-run raw-UCP baseline),
# ucx_perftest, an OpenSHMEM program (bench/shmem/shmem_bench.c), a memcpy floor and loopback TCP
# references, for shared memory (UCX_TLS=posix,self) and tcp (UCX_TLS=tcp, UCX_NET_DEVICES=lo).
# Prints one combined table and writes combined.csv + compare.png into OUT.
#
#   bench/compare.sh [BUILD_DIR] [OUT_DIR]        (BUILD_DIR default: build; needs rwin-perf,
#                                                 rwinrun, rwin_tcp_ref built there)
# Environment: SIZES (default 8,4096,65536,1048576,16777216), ITERS (default 1000),
#              TRANSPORTS (default "shm tcp"), PORT (ucx_perftest, default 13377).
# Takes about 5-8 minutes here. ucx_perftest's ucp_get over tcp is not run (1.13 artifact: ~1 ms per
# get whatever the size); its ucp_put_bw over tcp keeps many large puts in flight and collapses:
# reported as measured, with that caveat.
set -uo pipefail

BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SIZES=${SIZES:-8,4096,65536,1048576,16777216}
ITERS=${ITERS:-1000}
TRANSPORTS=${TRANSPORTS:-shm tcp}
PORT=${PORT:-13377}
BIN=$BUILD/bin
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-fatal}  # rwin and raw try PEER error mode first; posix logs its refusal

for b in rwin-perf rwinrun rwin_tcp_ref; do
  [[ -x $BIN/$b ]] || { echo "compare.sh: $BIN/$b missing (ninja -C $BUILD $b)" >&2; exit 2; }
done
SHMEM=""
if command -v oshcc >/dev/null && command -v oshrun >/dev/null; then
  if oshcc -O2 -o "$BIN/rwin_shmem_bench" "$HERE/shmem/shmem_bench.c"; then SHMEM=$BIN/rwin_shmem_bench; fi
fi
[[ -n $SHMEM ]] || echo "compare.sh: oshcc/oshrun not available: OpenSHMEM columns will be empty" >&2

log() { echo "compare.sh: $*" >&2; }
# Iterations per size for the external tools: the same cap rwin-perf applies (max(20, 256 MiB / size)).
iters_for() { local s=$1 cap=$(( 268435456 / $1 )); (( cap < 20 )) && cap=20; (( ITERS < cap )) && echo "$ITERS" || echo "$cap"; }

env_for() {
  case $1 in
    shm) echo "UCX_TLS=posix,self" ;;
    tcp) echo "UCX_TLS=tcp UCX_NET_DEVICES=lo" ;;
  esac
}

run_perftest() {  # transport label test size extra-args... -> appends "tr,label,size,p50,avg,bw" to perftest.csv
  local tr=$1 label=$2 t=$3 s=$4; shift 4
  local n; n=$(iters_for "$s")
  local w=$(( n / 10 + 1 ))
  env $(env_for "$tr") timeout 120 taskset -c 0 ucx_perftest -p "$PORT" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.4
  local line
  line=$(env $(env_for "$tr") timeout 120 taskset -c 1 ucx_perftest 127.0.0.1 -p "$PORT" -t "$t" -s "$s" \
         -n "$n" -w "$w" -f -v "$@" 2>/dev/null | tail -1 | tr -d ' ')
  wait "$srv" 2>/dev/null
  # iterations,p50,avg,overall,avg_bw,overall_bw,avg_mr,overall_mr
  if [[ $line =~ ^[0-9]+, ]]; then
    IFS=, read -r _ p50 avg _ bw _ <<<"$line"
    echo "$tr,$label,$s,$p50,$avg,$bw" >>"$OUT/perftest.csv"
  else
    log "ucx_perftest $t $s over $tr gave no result"
  fi
}

: >"$OUT/perftest.csv"
: >"$OUT/shmem.csv"
: >"$OUT/tcp_ref.csv"
start=$(date +%s)
{
  echo "date: $(date -u +%FT%TZ)"; echo "host: $(uname -srm)"; lscpu | grep -E "Model name|^CPU\(s\)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "ucx: $(ucx_info -v | head -1)"; echo "sizes: $SIZES iters: $ITERS"
} >"$OUT/machine.txt"

for tr in $TRANSPORTS; do
  log "[$tr] rwin-perf --vs-raw"
  env $(env_for "$tr") timeout 600 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" --vs-raw -n "$ITERS" -s "$SIZES" \
    -t put_lat,put_bw,get_lat,get_bw,notify_lat,notify_rate -o "$OUT/rwin_$tr.csv" >"$OUT/rwin_$tr.txt" 2>"$OUT/rwin_$tr.err" ||
    log "rwin-perf over $tr failed (see $OUT/rwin_$tr.err)"
  log "[$tr] rwin-perf --raw-fence (raw notify ordered by ucp_worker_fence, as OpenSHMEM does)"
  env $(env_for "$tr") timeout 300 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" --raw-fence -n "$ITERS" -s 8,4096,65536 \
    -t put_lat -o "$OUT/rwin_${tr}_fence.csv" >"$OUT/rwin_${tr}_fence.txt" 2>>"$OUT/rwin_$tr.err"
  if [[ $tr == shm ]]; then
    log "[$tr] rwin-perf --misalign (dst - src = 8 mod 4096) and the memcpy floor"
    env $(env_for "$tr") timeout 300 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" --vs-raw --misalign -n "$ITERS" \
      -s 4096,65536,1048576 -t put_bw,get_bw -o "$OUT/rwin_${tr}_skew8.csv" >"$OUT/rwin_${tr}_skew8.txt" 2>>"$OUT/rwin_$tr.err"
    for skew in 0 8; do
      timeout 120 "$BIN/rwinrun" -n 1 -- "$BIN/rwin-perf" -t memcpy -n "$ITERS" -s "$SIZES" --skew $skew \
        -o "$OUT/memcpy_skew$skew.csv" >/dev/null 2>>"$OUT/rwin_$tr.err"
    done
  fi

  log "[$tr] ucx_perftest"
  IFS=, read -ra sz <<<"$SIZES"
  for s in "${sz[@]}"; do
    run_perftest "$tr" ucp_put_lat ucp_put_lat "$s"
    run_perftest "$tr" ucp_put_bw ucp_put_bw "$s"
    if [[ $tr == shm ]]; then  # tcp ucp_get: 1.13 artifact, not comparable
      run_perftest "$tr" ucp_get ucp_get "$s"
      run_perftest "$tr" ucp_get_O16 ucp_get "$s" -O 16
    fi
  done
  run_perftest "$tr" ucp_fadd ucp_fadd 8
  run_perftest "$tr" ucp_add ucp_add 8

  if [[ -n $SHMEM ]]; then
    log "[$tr] OpenSHMEM"
    # --bind-to core: PE 0 on CPU 0, PE 1 on CPU 1, as the other tools.
    env $(env_for "$tr") timeout 600 oshrun --allow-run-as-root -np 2 --mca osc ^rdma --bind-to core --map-by core \
      -x UCX_TLS -x UCX_LOG_LEVEL $( [[ $tr == tcp ]] && echo "-x UCX_NET_DEVICES" ) \
      --mca oob_tcp_if_include lo "$SHMEM" -s "$SIZES" -n "$ITERS" -O 16 2>"$OUT/shmem_$tr.err" |
      sed -n "s/^oshmem,/$tr,/p" >>"$OUT/shmem.csv" || log "OpenSHMEM over $tr failed (see $OUT/shmem_$tr.err)"
  fi
done

log "loopback TCP references"
"$BIN/rwin_tcp_ref" stream 1048576 2 >>"$OUT/tcp_ref.csv"
"$BIN/rwin_tcp_ref" stream 131072 2 >>"$OUT/tcp_ref.csv"
"$BIN/rwin_tcp_ref" pingpong "$SIZES" 500 >>"$OUT/tcp_ref.csv"

log "combining (took $(( $(date +%s) - start )) s)"
python3 "$HERE/combine.py" "$OUT" | tee "$OUT/combined.txt"
if command -v gnuplot >/dev/null; then
  gnuplot -e "dir='$OUT'" "$HERE/plot.gp" && log "plot: $OUT/compare.png"
fi
log "results in $OUT"
