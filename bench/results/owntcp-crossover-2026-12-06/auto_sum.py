#!/usr/bin/python3
"""auto/: the defaults (auto) against the old choice forced by bruck.json, medians over rounds (avg us)."""
import csv, glob, os, re, statistics
d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "auto")
t = {}
for f in glob.glob(os.path.join(d, "*.csv")):
    a, tr = re.match(r"(auto|bruck)_(own|ucx)_", os.path.basename(f)).groups()
    for row in csv.DictReader(open(f)):
        t.setdefault((tr, row["coll"], int(row["nranks"]), int(row["size"]), a), []).append(float(row["avg_us"]))
print("| transport | collective | ranks | bytes | Bruck forced | defaults now | Bruck / now |")
print("|---|---|---|---|---|---|---|")
for k in sorted({k[:4] for k in t}):
    b, n = statistics.median(t[k + ("bruck",)]), statistics.median(t[k + ("auto",)])
    print(f"| {k[0]} tcp | {k[1]} | {k[2]} | {k[3]} | {b:.0f} | {n:.0f} | {b / n:.2f} |")
