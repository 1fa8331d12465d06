#!/usr/bin/env bash
# One connection per pair of ranks carrying both ways (RWIN_TCP_DUPLEX=1, the default) against one per
# direction (0), interleaved in the same minutes: put_lat (put + notify + wait, one way) and get_lat at
# 8 B and 4 KiB, over loopback and between two network-namespace hosts joined by a veth, with the
# kernel's TCP segment counts of each run (a duplex connection's answers carry the ACKs) and the
# busy-poll TCP ping-pong over loopback as the reference. Prints one table; CSVs stay in OUT. Needs
# root (ip netns).
#
#   bench/tcp_duplex.sh [BUILD_DIR] [OUT_DIR]        (BUILD_DIR default: build)
# Environment: ROUNDS (default 3), ITERS (default 20000). Takes about 2 minutes here.
set -uo pipefail

BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/results/tcp-duplex-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-20000}
BIN=$BUILD/bin
for b in rwin-perf rwinrun rwin_tcp_ref; do
  [[ -x $BIN/$b ]] || { echo "tcp_duplex.sh: $BIN/$b missing (cmake --build $BUILD --target $b)" >&2; exit 2; }
done
((EUID == 0)) || { echo "tcp_duplex.sh: needs root (ip netns)" >&2; exit 2; }
log() { echo "tcp_duplex.sh: $*" >&2; }

source "$HERE/lib/two_hosts.sh"
two_hosts_up tcp_duplex 10.77.42 || exit 1
bench_machine_info "rounds: $ROUNDS iters: $ITERS" >"$OUT/machine.txt"

PERF="-t put_lat,get_lat -s 8,4096 -n $ITERS -w 1000 --csv"
# TCP segments sent during a command, all namespaces together (each netns has its own counters, so
# they are summed over the ones the run used).
segs() { nstat -az TcpOutSegs 2>/dev/null | awk '/TcpOutSegs/{print $2}'; }
segs_in() { ip netns exec "$1" nstat -az TcpOutSegs 2>/dev/null | awk '/TcpOutSegs/{print $2}'; }
echo "path,duplex,round,segments" >"$OUT/segments.csv"
two_hosts() {  # duplex round
  local d=$1 r=$2 rc=0 a0 b0 a1 b1
  a0=$(segs_in "$TH_NS-a"); b0=$(segs_in "$TH_NS-b")
  two_hosts_rwin_perf "$OUT/raw/netns_d${d}_r$r.csv" "$OUT/run.log" $((29800 + r * 2 + d)) "$PERF" RWIN_TCP_DUPLEX="$d" || rc=$?
  a1=$(segs_in "$TH_NS-a"); b1=$(segs_in "$TH_NS-b")
  echo "netns,$d,$r,$((a1 - a0 + b1 - b0))" >>"$OUT/segments.csv"
  ((rc == 0)) || log "two hosts, duplex=$d, round $r failed (rc $rc; $OUT/run.log)"
}
loopback() {  # duplex round
  local s0 s1
  s0=$(segs)
  RWIN_TRANSPORT=tcp RWIN_IFNAME=lo RWIN_TCP_DUPLEX="$1" timeout -s KILL 300 "$BIN/rwinrun" -n 2 -- \
    "$BIN/rwin-perf" $PERF -o "$OUT/raw/lo_d$1_r$2.csv" >>"$OUT/run.log" 2>&1 ||
    log "loopback, duplex=$1, round $2 failed (rc $?; $OUT/run.log)"
  s1=$(segs)
  echo "lo,$1,$2,$((s1 - s0))" >>"$OUT/segments.csv"
}
for ((r = 0; r < ROUNDS; r++)); do
  for d in 1 0; do
    log "round $r: RWIN_TCP_DUPLEX=$d"
    loopback "$d" "$r"
    two_hosts "$d" "$r"
  done
  timeout -s KILL 120 "$BIN/rwin_tcp_ref" pingpong 8,4096 "$ITERS" >"$OUT/raw/pingpong_r$r.csv" 2>>"$OUT/run.log" ||
    log "ping-pong, round $r failed"
done
/usr/bin/python3 - "$OUT" <<'EOF' | tee "$OUT/summary.md"
import csv, glob, os, statistics, sys
out = sys.argv[1]
rows = {}  # (path, duplex, test, size) -> [p50]
for f in glob.glob(os.path.join(out, "raw", "*_d*_r*.csv")):
    path, d = os.path.basename(f).split("_")[:2]
    with open(f) as fh:
        for row in csv.DictReader(fh):
            rows.setdefault((path, d[1:], row["test"], row["size"]), []).append(float(row["p50_us"]))
pp = {}
for f in glob.glob(os.path.join(out, "raw", "pingpong_r*.csv")):
    for line in open(f):
        parts = line.strip().split(",")
        if len(parts) >= 3 and parts[0] == "tcp_pingpong_spin":
            pp.setdefault(parts[1], []).append(float(parts[2]))
segs = {}
with open(os.path.join(out, "segments.csv")) as fh:
    for row in csv.DictReader(fh):
        segs.setdefault((row["path"], row["duplex"]), []).append(int(row["segments"]))
med = lambda v: statistics.median(v) if v else float("nan")
print("p50 us, median over rounds (put_lat: one way; get_lat: a round trip); ping-pong: loopback, one way")
print("| path | test | size | duplex | one per direction | duplex / per direction | duplex / ping-pong |")
print("|---|---|---|---|---|---|---|")
for path in ("lo", "netns"):
    for test in ("put_lat", "get_lat"):
        for size in ("8", "4096"):
            a, b = med(rows.get((path, "1", test, size), [])), med(rows.get((path, "0", test, size), []))
            ref = med(pp.get(size, [])) * (2 if test == "get_lat" else 1)
            vs = f"{a / ref:.2f}" if path == "lo" else "-"
            print(f"| {path} | {test} | {size} | {a:.2f} | {b:.2f} | {a / b:.2f} | {vs} |")
print()
print("TCP segments sent per run (both ranks, every test of the run, median):",
      ", ".join(f"{p} duplex={d}: {med(v):.0f}" for (p, d), v in sorted(segs.items())))
EOF
