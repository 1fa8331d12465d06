#!/usr/bin/env bash
# Chunk size x pipeline depth sweep for put_bw at 16 MiB (the defaults' tuning table in RESULTS.md).
#
#   bench/sweep_chunks.sh [BUILD_DIR] [OUT_DIR]
# Environment: CHUNKS (default "64K 256K 1M 4M"), DEPTHS (default "1 2 4 8 16"), ROUNDS (default 3),
#              TRANSPORTS (default "shm tcp"), SIZE (default 16M).
# Each configuration is a separate rwin-perf job (chunking is fixed per Context); rounds are
# interleaved (every configuration once, then again) so slow phases of the machine spread over all
# of them, and the table shows the median over rounds. Prints one table per transport.
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/results/sweep-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
CHUNKS=${CHUNKS:-64K 256K 1M 4M}
DEPTHS=${DEPTHS:-1 2 4 8 16}
ROUNDS=${ROUNDS:-3}
TRANSPORTS=${TRANSPORTS:-shm tcp}
SIZE=${SIZE:-16M}
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-fatal}
CSV=$OUT/sweep.csv
echo "transport,round,chunk,depth,mibs" >"$CSV"
for round in $(seq 1 "$ROUNDS"); do
  for tr in $TRANSPORTS; do
    case $tr in
      shm) tls=(UCX_TLS=posix,self) ;;
      tcp) tls=(UCX_TLS=tcp UCX_NET_DEVICES=lo) ;;
    esac
    for c in $CHUNKS; do
      for d in $DEPTHS; do
        echo "sweep: round $round $tr chunk $c depth $d" >&2
        env "${tls[@]}" timeout 300 "$BUILD/bin/rwinrun" -n 2 -- "$BUILD/bin/rwin-perf" -t put_bw -s "$SIZE" -n 32 -O 2 \
          --max-bytes 512M --chunk "$c" --depth "$d" --csv -o "$OUT/one.csv" >/dev/null 2>>"$OUT/sweep.err"
        mibs=$(awk -F, 'NR==2{print $10}' "$OUT/one.csv" 2>/dev/null)
        echo "$tr,$round,$c,$d,${mibs:-}" >>"$CSV"
        rm -f "$OUT/one.csv"
      done
    done
  done
done
python3 - "$CSV" "$CHUNKS" "$DEPTHS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
chunks, depths = sys.argv[2].split(), sys.argv[3].split()
for tr in sorted({r["transport"] for r in rows}):
    print(f"\nput_bw MiB/s, {tr} (median over rounds; rows chunk, columns depth)")
    print("| chunk \\ depth | " + " | ".join(depths) + " |")
    print("|---|" + "---|" * len(depths))
    for c in chunks:
        cells = []
        for d in depths:
            v = [float(r["mibs"]) for r in rows if r["transport"] == tr and r["chunk"] == c and r["depth"] == d and r["mibs"]]
            cells.append(f"{statistics.median(v):.0f}" if v else "-")
        print(f"| {c} | " + " | ".join(cells) + " |")
EOF
