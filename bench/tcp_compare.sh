#!/usr/bin/env bash
# Issue 26's side-by-side, in one run on this machine over loopback: rwin's own tcp transport
# (RWIN_TRANSPORT=tcp) against rwin over UCX's tcp, a TCP stream of the same write size, a
# busy-poll TCP ping-pong and the runtime's frame transfer (bench/tcp_ref.cpp, on the congestion control
# rwin's own connections use: RWIN_TCP_CONGESTION, default auto). Prints one table
# of ratios (bench/tcp_combine.py) and keeps the CSVs in OUT.
#
#   bench/tcp_compare.sh [BUILD_DIR] [OUT_DIR]       (BUILD_DIR default: build)
# Environment: SIZES (default 8,4096,65536,1048576,16777216), ITERS (default 1000).
# Takes about 3 minutes here.
set -uo pipefail

BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/results/tcp-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SIZES=${SIZES:-8,4096,65536,1048576,16777216}
ITERS=${ITERS:-1000}
BIN=$BUILD/bin
for b in rwin-perf rwinrun rwin_tcp_ref rwin-agent-perf; do
  [[ -x $BIN/$b ]] || { echo "tcp_compare.sh: $BIN/$b missing (cmake --build $BUILD --target $b)" >&2; exit 2; }
done
log() { echo "tcp_compare.sh: $*" >&2; }
{
  echo "date: $(date -u +%FT%TZ)"; echo "host: $(uname -srm)"; lscpu | grep -E "Model name|^CPU\(s\)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "commit: $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null)"
  echo "sizes: $SIZES iters: $ITERS"
  # rwin's own tcp and the references (rwin_tcp_ref) run on the same algorithm; UCX's tcp and the
  # agent's UCX lane on the kernel's.
  echo "congestion control: kernel default $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null)," \
    "RWIN_TCP_CONGESTION=${RWIN_TCP_CONGESTION:-auto} (own tcp and the references)"
} >"$OUT/machine.txt"

tests=put_lat,put_bw,get_lat,get_bw
log "rwin over its own tcp transport"
RWIN_TRANSPORT=tcp timeout 600 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -n "$ITERS" -s "$SIZES" -t "$tests" \
  -o "$OUT/rwin_own.csv" >"$OUT/rwin_own.txt" 2>&1 || log "rwin-perf over RWIN_TRANSPORT=tcp failed (see $OUT/rwin_own.txt)"
# Pipelined: put_nbi/get_nbi, 16 in flight per quiet (rwin-perf --nbi), as ucx_perftest's put and get
# bandwidths keep a window in flight; the default get_bw above waits for each get (a round trip each).
bw_sizes=$(tr , '\n' <<<"$SIZES" | awk '$1 >= 4096' | paste -sd, -)
log "rwin over its own tcp transport, put_nbi/get_nbi"
RWIN_TRANSPORT=tcp timeout 600 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -n "$ITERS" -s "$bw_sizes" -t put_bw,get_bw --nbi \
  -o "$OUT/rwin_own_nbi.csv" >"$OUT/rwin_own_nbi.txt" 2>&1 || log "rwin-perf --nbi over RWIN_TRANSPORT=tcp failed"
log "rwin over its own tcp transport, served by the receiver thread alone (RWIN_TCP_OWNER_SERVES=0)"
RWIN_TRANSPORT=tcp RWIN_TCP_OWNER_SERVES=0 timeout 600 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -n "$ITERS" -s 8,4096 \
  -t put_lat,get_lat -o "$OUT/rwin_own_thread.csv" >"$OUT/rwin_own_thread.txt" 2>&1 || log "rwin-perf with RWIN_TCP_OWNER_SERVES=0 failed"
log "rwin over UCX's tcp"
RWIN_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 600 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -n "$ITERS" \
  -s "$SIZES" -t "$tests" -o "$OUT/rwin_ucx.csv" >"$OUT/rwin_ucx.txt" 2>&1 || log "rwin-perf over UCX tcp failed (see $OUT/rwin_ucx.txt)"
RWIN_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 600 "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -n "$ITERS" \
  -s "$bw_sizes" -t put_bw,get_bw --nbi -o "$OUT/rwin_ucx_nbi.csv" >"$OUT/rwin_ucx_nbi.txt" 2>&1 || log "rwin-perf --nbi over UCX tcp failed"
# The agent (run-time peers): a passive server (its progress thread serves, its main thread sleeps),
# over rwin's own tcp and over UCX's tcp.
log "agents: a passive server over rwin's own tcp, then over UCX's tcp"
timeout 600 "$BIN/rwin-agent-perf" --transport tcp --progress-thread --max-bytes 16M --iters "$ITERS" --json \
  >"$OUT/agent_own.json" 2>"$OUT/agent_own.txt" || log "rwin-agent-perf --transport tcp failed (see $OUT/agent_own.txt)"
UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 600 "$BIN/rwin-agent-perf" --transport ucx --progress-thread --max-bytes 16M \
  --iters "$ITERS" --json >"$OUT/agent_ucx.json" 2>"$OUT/agent_ucx.txt" || log "rwin-agent-perf over UCX tcp failed"
# The passive 4 KiB get again with the client and the server on CPUs of their own (--pin): unpinned,
# the client sometimes shares a CPU with a spinning server thread (bench/RESULTS.md).
for t in tcp ucx; do
  n=own; [[ $t == ucx ]] && n=ucx
  env $([[ $t == ucx ]] && echo UCX_TLS=tcp UCX_NET_DEVICES=lo) timeout 600 "$BIN/rwin-agent-perf" --transport $t \
    --progress-thread --max-bytes 64K --iters "$ITERS" --pin --json >"$OUT/agent_${n}_pinned.json" 2>>"$OUT/agent_$n.txt" ||
    log "rwin-agent-perf --transport $t --pin failed"
done
log "TCP references: streams, ping-pong, the runtime's frames"
: >"$OUT/tcp_ref.csv"
IFS=, read -ra sz <<<"$SIZES"
for s in "${sz[@]}"; do
  (( s >= 4096 )) && "$BIN/rwin_tcp_ref" stream "$s" 2 >>"$OUT/tcp_ref.csv"
done
for s in 4194304; do  # the agent's sizes not in SIZES
  [[ ,$SIZES, == *,$s,* ]] || "$BIN/rwin_tcp_ref" stream "$s" 2 >>"$OUT/tcp_ref.csv"
done
"$BIN/rwin_tcp_ref" pingpong "$SIZES" 500 >>"$OUT/tcp_ref.csv"
"$BIN/rwin_tcp_ref" pingpong 8,4096 2000 --sockets 2 >>"$OUT/tcp_ref.csv"
"$BIN/rwin_tcp_ref" frames 4096,65536,1048576,16777216,268435456 >>"$OUT/tcp_ref.csv"
/usr/bin/python3 "$HERE/tcp_combine.py" "$OUT" | tee "$OUT/combined.txt"
log "results in $OUT"
