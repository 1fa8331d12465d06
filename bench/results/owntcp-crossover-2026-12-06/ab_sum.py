#!/usr/bin/python3
"""ab/: the defaults now against the old ones (ab.sh), medians over rounds of avg us; which algorithm each ran."""
import csv, glob, os, re, statistics
d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ab")
t = {}
for f in glob.glob(os.path.join(d, "*.csv")):
    a, tr = re.match(r"(new|old)_(own|ucx)_", os.path.basename(f)).groups()
    for row in csv.DictReader(open(f)):
        t.setdefault((tr, row["coll"], int(row["nranks"]), int(row["size"]), a), []).append(float(row["avg_us"]))
def algo(coll, nr, size, new):  # what the table picks (reduce_scatter's tuned size: NR x input / 2)
    b = size if coll == "allreduce" else nr * size // 2
    if coll == "allreduce":
        return "ring" if (new and b > 32768) or b > 65536 else "bruck"
    return "direct" if (new and b > (4096 if nr < 8 else 32768)) or b > 65536 else "bruck"
print("| transport | collective | ranks | bytes | old (algorithm) | now (algorithm) | old / now |")
print("|---|---|---|---|---|---|---|")
for k in sorted({k[:4] for k in t}):
    o, n = statistics.median(t[k + ("old",)]), statistics.median(t[k + ("new",)])
    print(f"| {k[0]} tcp | {k[1]} | {k[2]} | {k[3]} | {o:.0f} ({algo(k[1], k[2], k[3], False)}) |"
          f" {n:.0f} ({algo(k[1], k[2], k[3], True)}) | {o / n:.2f} |")
