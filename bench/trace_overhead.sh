#!/usr/bin/env bash
# What the timeline costs (issue 28 goals): rwin-perf 8 B put_lat / notify_lat, put_bw at 64 KiB and
# 1 MiB, and streams of 8 B calls (put_bw and notify_rate at 8 B: 16 calls and a quiet, 20000 times),
# 2 ranks, over shared memory and tcp, for three variants in the same run, interleaved round by round so
# drift hits all three alike:
#   old  the build before the tracer and the wait_until loop (OLD_BUILD)
#   off  this build, RWIN_TRACE unset (the default)
#   on   this build, RWIN_TRACE=<tmp dir>
#   bench/trace_overhead.sh OLD_BUILD NEW_BUILD [ROUNDS] [OUT_DIR]
# OLD_ON=1 adds a fourth variant, "old on": OLD_BUILD with RWIN_TRACE set (when OLD_BUILD has a tracer:
# a change to the tracer itself, judged by on / old on).
# Prints the median over rounds of each cell's p50 (latency) or MiB/s (bandwidth) and the ratios
# off/old and on/off; the raw csv is kept in OUT_DIR (default bench/results/trace-overhead-<date>).
set -eu
old=${1:?usage: trace_overhead.sh OLD_BUILD NEW_BUILD [ROUNDS] [OUT_DIR]}
new=${2:?usage: trace_overhead.sh OLD_BUILD NEW_BUILD [ROUNDS] [OUT_DIR]}
rounds=${3:-5}
out=${4:-bench/results/trace-overhead-$(date -u +%Y-%m-%d)}
mkdir -p "$out"
csv=$out/raw.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "round,transport,variant,test,size,p50_us,avg_us,mibs" >"$csv"
one() {  # round transport variant bin_dir [env...]
  local r=$1 tr=$2 v=$3 b=$4; shift 4
  local tls=posix,sysv,self
  [[ $tr == tcp ]] && tls=tcp,self
  env UCX_TLS=$tls UCX_NET_DEVICES=lo "$@" "$b/bin/rwinrun" -n 2 --timeout 300 -- \
    "$b/bin/rwin-perf" -t put_lat,notify_lat -s 8 -n 20000 -w 2000 --csv 2>/dev/null >"$tmp/lat.csv"
  env UCX_TLS=$tls UCX_NET_DEVICES=lo "$@" "$b/bin/rwinrun" -n 2 --timeout 300 -- \
    "$b/bin/rwin-perf" -t put_bw -s 64K,1M -n 2000 --csv 2>/dev/null >"$tmp/bw.csv"
  env UCX_TLS=$tls UCX_NET_DEVICES=lo "$@" "$b/bin/rwinrun" -n 2 --timeout 300 -- \
    "$b/bin/rwin-perf" -t put_bw,notify_rate -s 8 -n 20000 -w 1000 --csv 2>/dev/null >"$tmp/rate.csv"
  cat "$tmp/lat.csv" "$tmp/bw.csv" "$tmp/rate.csv" | sed 's/^\[0\] //' | grep -v '^test,' |
    awk -F, -v r="$r" -v tr="$tr" -v v="$v" '{ print r "," tr "," v "," $1 "," $2 "," $(NF-13) "," $(NF-11) "," $(NF-10) }' >>"$csv"
}
for r in $(seq 1 "$rounds"); do
  for tr in shm tcp; do
    rm -rf "$tmp/trace" && mkdir "$tmp/trace"
    one "$r" "$tr" old "$old"
    one "$r" "$tr" off "$new"
    one "$r" "$tr" on "$new" RWIN_TRACE="$tmp/trace"
    [[ ${OLD_ON:-0} == 1 ]] && one "$r" "$tr" "old on" "$old" RWIN_TRACE="$tmp/trace"
    echo "round $r/$rounds $tr done" >&2
  done
done
/usr/bin/python3 - "$csv" <<'PY' | tee "$out/summary.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cells = {}
for r in rows:
    lat = r["test"].endswith("_lat")
    val = float(r["p50_us"] if lat else r["mibs"])
    cells.setdefault((r["transport"], r["test"], int(r["size"]), lat), {}).setdefault(r["variant"], []).append(val)
print(f"median of {len({r['round'] for r in rows})} interleaved rounds; latency: p50 us (lower is better), bandwidth: MiB/s")
print()
old_on = any(r["variant"] == "old on" for r in rows)
print("| transport | test | size | old | off | on | off / old | on / off |" + (" old on | on / old on |" if old_on else ""))
print("|---|---|---|---|---|---|---|---|" + ("---|---|" if old_on else ""))
for (tr, test, size, lat), v in sorted(cells.items()):
    m = {k: statistics.median(x) for k, x in v.items()}
    # Ratios as cost: time(new) / time(old), so > 1 is slower for both kinds.
    cost = (lambda a, b: a / b) if lat else (lambda a, b: b / a)
    print(f"| {tr} | {test} | {size} | {m['old']:.3f} | {m['off']:.3f} | {m['on']:.3f} | "
          f"{cost(m['off'], m['old']):.3f} | {cost(m['on'], m['off']):.3f} |"
          + (f" {m['old on']:.3f} | {cost(m['on'], m['old on']):.3f} |" if old_on else ""))
print()
print("ratios are time over time (bandwidth inverted): 1.02 = 2 % slower")
PY
