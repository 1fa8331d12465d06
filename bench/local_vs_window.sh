#!/usr/bin/env bash
# put/get bandwidth with plain local memory (rwin::Local) as the local side against a window, on
# the same machine in the same run: ROUNDS alternating runs of rwin-perf each way, per transport;
# prints the median MiB/s of each and their ratio (local / window) per size.
#   bench/local_vs_window.sh [BIN_DIR] [ROUNDS]          (default build/bin, 5)
set -euo pipefail
BIN=${1:-build/bin}
ROUNDS=${2:-5}
SIZES=${SIZES:-64K:4M}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for tls in "posix,sysv,self" tcp; do
  for ((i = 0; i < ROUNDS; i++)); do
    for mode in window local; do
      extra=()
      [[ $mode == local ]] && extra=(--local)
      UCX_TLS=$tls "$BIN/rwinrun" -n 2 -- "$BIN/rwin-perf" -t put_bw,get_bw -s "$SIZES" --batches 10 "${extra[@]}" \
        --csv -o "$out/$tls.$mode.$i.csv" >/dev/null 2>"$out/err"
    done
  done
done
/usr/bin/python3 - "$out" "$ROUNDS" <<'PY'
import csv, statistics, sys, glob, os
out, rounds = sys.argv[1], int(sys.argv[2])
def size(b):
    b = int(b)
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"
print(f"| transport | test | size | window MiB/s | plain memory MiB/s | plain / window |")
print("|---|---|---|---|---|---|")
for tls in ["posix,sysv,self", "tcp"]:
    data = {}
    for mode in ["window", "local"]:
        for f in glob.glob(os.path.join(out, f"{tls}.{mode}.*.csv")):
            for row in csv.DictReader(open(f)):
                data.setdefault((row["test"], int(row["size"]), mode), []).append(float(row["mibs"]))
    keys = sorted({(t, s) for (t, s, m) in data})
    for t, s in keys:
        w = statistics.median(data.get((t, s, "window"), [0]))
        l = statistics.median(data.get((t, s, "local"), [0]))
        name = "shm" if tls != "tcp" else "tcp"
        print(f"| {name} | {t} | {size(s)} | {w:.0f} | {l:.0f} | {l / w if w else 0:.2f} |")
print(f"\n(median of {rounds} alternating runs each)")
PY
