#!/usr/bin/python3
"""Medians over rounds of ab.sh's runs: put and put(Add) MiB/s per build, target mode and size."""
import glob, os, re, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
vals = {}
for f in glob.glob(os.path.join(d, "r*-*-away*.txt")):
    m = re.match(r"r(\d+)-(old|new)-away([\d.]+)\.txt", os.path.basename(f))
    for line in open(f):
        c = [x.strip() for x in line.split("|")]
        if len(c) >= 6 and c[1] == "f32":
            vals.setdefault((m.group(2), m.group(3), c[2]), []).append((float(c[3]), float(c[4])))
sizes = ["8", "4K", "64K", "1M"]
for away, title in (("0", "target waiting in a barrier (inside rwin)"), ("0.5", "target asleep outside rwin for the first 0.5 s")):
    print(f"\n{title}; MiB/s, median of {len(vals.get(('new', away, '8'), []))} rounds")
    print("| size | put (new) | put(Add) before | put(Add) now | now / before | now / put |")
    print("|---|---|---|---|---|---|")
    for s in sizes:
        o = vals.get(("old", away, s)); n = vals.get(("new", away, s))
        if not o or not n: continue
        put = statistics.median(x[0] for x in n)
        ao = statistics.median(x[1] for x in o); an = statistics.median(x[1] for x in n)
        ratio = an / ao if ao > 0 else float("inf")
        print(f"| {s} | {put:.1f} | {ao:.2f} | {an:.2f} | {ratio:.2f} | {an / put:.3f} |")
