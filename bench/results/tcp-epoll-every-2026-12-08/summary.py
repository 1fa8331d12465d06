#!/usr/bin/env python3
"""summary.py lat_ab.csv: per test, the median over rounds of NEW/OLD p50 and each build's p50 over the
round's 8 B ping-pong (lat_ab.sh's columns: round,ref,variant,test,size,p50)."""
import csv
import statistics as st
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
for t in sorted({x["test"] for x in rows}):
    ratio, old, new = [], [], []
    for r in sorted({x["round"] for x in rows}, key=int):
        pick = lambda v: [float(x["p50"]) for x in rows if x["round"] == r and x["test"] == t and x["variant"] == v]
        a, b = pick("O"), pick("N")
        ref = float(next(x["ref"] for x in rows if x["round"] == r))
        if a and b:
            ratio.append(b[0] / a[0]); old.append(a[0] / ref); new.append(b[0] / ref)
    print(f"{t}: {len(ratio)} rounds, NEW/OLD median {st.median(ratio):.3f} (mean {st.mean(ratio):.3f}); "
          f"OLD/ping-pong {st.median(old):.3f}, NEW/ping-pong {st.median(new):.3f}")
