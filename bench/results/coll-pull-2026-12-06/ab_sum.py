#!/usr/bin/python3
"""ab.sh's table: medians over rounds of avg us per call, and the per-round ratios' medians."""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

raw = sys.argv[1]
avg = defaultdict(dict)  # (coll, np, size) -> {(variant, round): avg}
for path in glob.glob(os.path.join(raw, "*.csv")):
    m = re.match(r"(pull|msg|mpi)_np(\d+)_r(\d+)\.csv$", os.path.basename(path))
    if not m:
        continue
    v, np_, r = m.group(1), int(m.group(2)), int(m.group(3))
    for row in csv.DictReader(open(path)):
        if row["check"] != "ok":
            print(f"check {row['check']} in {path}", file=sys.stderr)
        avg[(row["coll"], np_, int(row["size"]))][(v, r)] = float(row["avg_us"])
print("| collective | ranks | size | pull (us) | messages (us) | Open MPI (us) | messages / pull | MPI / pull |")
print("|---|---|---|---|---|---|---|---|")
for key in sorted(avg):
    d = avg[key]
    rounds = sorted({r for (_, r) in d})
    med = lambda v: statistics.median([d[(v, r)] for r in rounds if (v, r) in d])
    ratio = lambda v: statistics.median([d[(v, r)] / d[("pull", r)] for r in rounds if (v, r) in d and ("pull", r) in d])
    print(f"| {key[0]} | {key[1]} | {key[2]} | {med('pull'):.1f} | {med('msg'):.1f} | {med('mpi'):.1f} | "
          f"{ratio('msg'):.2f} | {ratio('mpi'):.2f} |")
