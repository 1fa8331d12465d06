#!/usr/bin/env bash
# The merged timeline (RWIN_TRACE + rwin-trace, docs/OBSERVING.md "Timeline") of a 4-rank ring shift and
# of a 4-rank allreduce, drawn with gnuplot: one row per rank, one bar per span, coloured by kind.
#   bench/trace_plot.sh [BUILD_DIR] [OUT_DIR]   (default build, bench/results/trace-<date>)
# Writes OUT_DIR/ring_shift.png, allreduce.png, and each merge's summary (*.txt). Shared memory by
# default; UCX_TLS=tcp,self UCX_NET_DEVICES=lo in the environment draws the tcp path instead.
set -eu
build=${1:-build}
out=${2:-bench/results/trace-$(date -u +%Y-%m-%d)}
bin=$build/bin
for t in rwinrun ring_shift rwin-perf rwin-trace; do [[ -x $bin/$t ]] || { echo "no $bin/$t: build first" >&2; exit 1; }; done
command -v gnuplot >/dev/null || { echo "gnuplot not found (apt install gnuplot-nox)" >&2; exit 1; }
export UCX_TLS=${UCX_TLS:-posix,sysv,self}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# draw NAME TITLE: $tmp/NAME/ (the ranks' files) -> $out/NAME.png. The window starts at the first
# operation after start-up (connection set-up would squeeze the rest to a line) and ends with the
# last span before the shutdown barrier.
draw() {
  local name=$1 title=$2
  "$bin/rwin-trace" merge "$tmp/$name" -o "$tmp/$name.json" >"$out/$name.txt"
  "$bin/rwin-trace" bars "$tmp/$name.json" | awk '
    BEGIN { k["rma"] = 1; k["sync"] = 2; k["wait"] = 3; k["coll"] = 4; k["atomic"] = 5; k["startup"] = 6 }
    $4 == "startup" { if ($5 == "shutdown_barrier" && (end == "" || $2 < end)) end = $2; next }
    { if (lo == "" || $2 < lo) lo = $2; rows[++n] = $0 }
    END {
      for (i = 1; i <= n; i++) {
        split(rows[i], f, " ")
        if (end != "" && f[2] > end) continue
        # Nested spans are thinner: call > workspace set-up > phase > operation > blocked time.
        h = (f[4] == "wait") ? 0.12 : (f[4] == "coll") ? 0.44 : 0.28
        c = (f[4] in k) ? k[f[4]] : 7
        if (f[4] == "coll" && f[5] == "workspace") { h = 0.39; c = 9 }
        else if (f[4] == "coll" && f[5] !~ /^(allreduce|allgather|reduce_scatter|all_to_all|broadcast|barrier)$/) {
          h = 0.34; c = 8   # a phase inside the collective (exchange, team barrier)
        }
        # x centre, rank, half width, half height (ms from the first operation), colour
        printf "%.6f %d %.6f %.2f %d\n", ((f[2] + f[3]) / 2 - lo) / 1000, f[1], (f[3] - f[2]) / 2000, h, c
      }
    }' | sort -s -k4,4gr >"$tmp/$name.bars"  # tall bars first: what is nested inside stays visible
  [[ -s $tmp/$name.bars ]] || { echo "no spans in the $name trace" >&2; exit 1; }
  gnuplot <<GP
set terminal pngcairo size 1600,520 font ",11" noenhanced
set output "$out/$name.png"
set title "$title"
set xlabel "ms since the first operation (one clock: ranks of one host)"
set ylabel "rank"
set yrange [-0.6:3.6] reverse
set ytics 1
set grid xtics
set style fill solid 0.85 noborder
set palette defined (1 "#1f77b4", 2 "#ff7f0e", 3 "#d62728", 4 "#2ca02c", 5 "#9467bd", 6 "#7f7f7f", 7 "#000000", 8 "#98df8a", 9 "#c7c7c7")
set cbrange [1:9]
unset colorbox
set key outside right
plot "$tmp/$name.bars" using 1:2:3:4:5 with boxxyerror lc palette notitle, \
     NaN with boxes lc rgb "#1f77b4" title "put / get (rma)", \
     NaN with boxes lc rgb "#ff7f0e" title "notify / wait / barrier (sync)", \
     NaN with boxes lc rgb "#d62728" title "blocked (inside a wait)", \
     NaN with boxes lc rgb "#2ca02c" title "collective call", \
     NaN with boxes lc rgb "#c7c7c7" title "its workspace set-up (first call)", \
     NaN with boxes lc rgb "#98df8a" title "its phases (exchange, team barrier)", \
     NaN with boxes lc rgb "#9467bd" title "fetching atomic"
GP
  echo "$out/$name.png ($(wc -l <"$tmp/$name.bars") spans; summary $out/$name.txt)"
}

RWIN_TRACE=$tmp/ring_shift "$bin/rwinrun" -n 4 --timeout 120 -- \
  "$bin/ring_shift" --mode put --size 65536 --iters 10 >/dev/null
draw ring_shift "ring shift: 4 ranks, 10 iterations, 256 KiB put + notify + wait to rank r+1 ($UCX_TLS)"

RWIN_TRACE=$tmp/allreduce "$bin/rwinrun" -n 4 --timeout 120 -- \
  "$bin/rwin-perf" -t allreduce -s 1M -n 3 -w 1 --min-iters 3 --no-pin >/dev/null
draw allreduce "allreduce: 4 ranks, 1 MiB per rank, 1 warm-up + 3 timed calls ($UCX_TLS)"
