#!/usr/bin/python3
# absum.py CSV: per cell, each variant's median p50 (all rounds / fast rounds) and its ratio to the
# first variant's; then the median over rounds of each round's own ratio. Lower is faster.
import collections, statistics as st, sys
rows = [l.strip().split(',') for l in open(sys.argv[1]) if l.strip()]
d = collections.defaultdict(lambda: collections.defaultdict(list)); order = []
for r, ref, n, t, sz, p50, mibs in rows:
    if n not in order: order.append(n)
    d[(t, int(sz))][n].append((float(ref), float(p50)))
for k in sorted(d):
    line, base = f"{k[0]} {k[1]:>8}:", None
    for n in order:
        v = d[k][n]; allm = st.median(p for _, p in v); fast = [p for ref, p in v if ref < 80]
        fm = st.median(fast) if fast else float('nan')
        if base is None: base = (allm, fm)
        line += f" {n} {allm:.1f}/{fm:.1f} ({allm/base[0]:.2f}/{fm/base[1]:.2f})"
    print(line)
print("rounds with a fast ping-pong:", sorted({r for r, ref, *_ in rows if float(ref) < 80}, key=int))
rr = collections.defaultdict(lambda: collections.defaultdict(dict))
for r, ref, n, t, sz, p50, mibs in rows: rr[(t, int(sz))][r][n] = float(p50)
for k in sorted(rr):
    line = f"ratio {k[0]} {k[1]:>8}:"
    for n in order[1:]:
        v = [x[n] / x[order[0]] for x in rr[k].values() if n in x and order[0] in x]
        line += f" {n}/{order[0]} med {st.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]"
    print(line)
