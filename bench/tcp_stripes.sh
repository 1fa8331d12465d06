#!/usr/bin/env bash
# Issue 26's striping goal in one run: rwin's own tcp transport with 1, 2, 3 and 4 connections per
# pair of ranks (RWIN_TCP_SOCKETS), put_bw and put_lat between two network-namespace hosts joined by a
# veth (rank 0 on host a, rank 1 on host b), and the same over loopback; rounds interleave the socket
# counts so drift hits them all alike. Prints one table (MiB/s, and the ratio to one socket in the same
# round) and keeps the CSVs in OUT. Needs root (ip netns).
#
#   bench/tcp_stripes.sh [BUILD_DIR] [OUT_DIR]        (BUILD_DIR default: build)
# Environment: SOCKETS (default "1 2 3 4"), SIZES (default 1M,16M), ITERS (default 60), ROUNDS (default 3),
# PIN=1: host a's rank on CPU 0 and host b's on CPU 1 (default: the scheduler places them).
# Takes about 2 minutes here.
set -uo pipefail

BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/results/tcp-stripes-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
SOCKETS=${SOCKETS:-1 2 3 4}
SIZES=${SIZES:-1M,16M}
ITERS=${ITERS:-60}
ROUNDS=${ROUNDS:-3}
PIN=${PIN:-0}
BIN=$BUILD/bin
for b in rwin-perf rwinrun; do
  [[ -x $BIN/$b ]] || { echo "tcp_stripes.sh: $BIN/$b missing (cmake --build $BUILD --target $b)" >&2; exit 2; }
done
((EUID == 0)) || { echo "tcp_stripes.sh: needs root (ip netns)" >&2; exit 2; }
log() { echo "tcp_stripes.sh: $*" >&2; }

source "$HERE/lib/two_hosts.sh"
TH_PIN=$PIN
two_hosts_up tcp_stripes 10.77.41 || exit 1
bench_machine_info "sockets: $SOCKETS sizes: $SIZES iters: $ITERS rounds: $ROUNDS pin: $PIN" >"$OUT/machine.txt"

PERF="-t put_bw,put_lat -s $SIZES -n $ITERS -w 5 --csv"
two_hosts() {  # sockets round
  two_hosts_rwin_perf "$OUT/raw/netns_s$1_r$2.csv" "$OUT/run.log" $((29900 + $2)) "$PERF" RWIN_TCP_SOCKETS="$1" ||
    log "two hosts, $1 socket(s), round $2 failed (rc $?; $OUT/run.log)"
}
loopback() {  # sockets round
  RWIN_TRANSPORT=tcp RWIN_IFNAME=lo RWIN_TCP_SOCKETS="$1" timeout -s KILL 300 "$BIN/rwinrun" -n 2 -- \
    "$BIN/rwin-perf" $PERF -o "$OUT/raw/lo_s$1_r$2.csv" >>"$OUT/run.log" 2>&1 ||
    log "loopback, $1 socket(s), round $2 failed (rc $?; $OUT/run.log)"
}
# How busy the machine's CPUs were during one run (all of them, from /proc/stat): what limits a second
# socket is whether a CPU is left to drive it.
busy_of() {  # before after: "user nice system idle iowait irq softirq" of the cpu line
  /usr/bin/python3 -c 'import sys; a=list(map(int,sys.argv[1].split())); b=list(map(int,sys.argv[2].split())); d=[y-x for x,y in zip(a,b)]; print(f"{100*(1-(d[3]+d[4])/max(1,sum(d))):.0f}")' "$1" "$2"
}
cpu_line() { awk '/^cpu /{print $2,$3,$4,$5,$6,$7,$8}' /proc/stat; }
echo "path,sockets,round,busy_percent" >"$OUT/cpu.csv"
for ((r = 0; r < ROUNDS; r++)); do
  for s in $SOCKETS; do
    log "round $r: $s socket(s)"
    a=$(cpu_line); two_hosts "$s" "$r"; b=$(cpu_line); echo "netns,$s,$r,$(busy_of "$a" "$b")" >>"$OUT/cpu.csv"
    a=$(cpu_line); loopback "$s" "$r"; b=$(cpu_line); echo "lo,$s,$r,$(busy_of "$a" "$b")" >>"$OUT/cpu.csv"
  done
done
{
  /usr/bin/python3 "$HERE/tcp_stripes.py" "$OUT/raw"
  echo
  echo "CPU busy during each run (both CPUs, whole run incl. start-up; percent): $(tail -n +2 "$OUT/cpu.csv" | tr '\n' ' ')"
} | tee "$OUT/summary.md"
