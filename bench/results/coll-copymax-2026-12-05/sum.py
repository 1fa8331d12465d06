#!/usr/bin/env python3
"""ab.csv (run.sh) -> a markdown table: median over rounds of each build's average time per call, new / old."""
import csv, statistics, sys
from collections import defaultdict
t = defaultdict(list)
for r in csv.DictReader(open(sys.argv[1] if len(sys.argv) > 1 else "ab.csv")):
    t[(r["transport"], r["coll"], int(r["size"]), r["build"])].append(float(r["avg_us"]))
keys = sorted({k[:3] for k in t}, key=lambda k: (k[0], k[1], k[2]))
print("| transport | coll | bytes | old avg us | new avg us | new / old |")
print("|---|---|---|---|---|---|")
for k in keys:
    o, n = statistics.median(t[k + ("old",)]), statistics.median(t[k + ("new",)])
    print(f"| {k[0]} | {k[1]} | {k[2]} | {o:.2f} | {n:.2f} | {n / o:.2f} |")
