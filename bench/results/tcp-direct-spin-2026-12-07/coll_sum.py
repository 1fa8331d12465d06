#!/usr/bin/python3
# coll_sum.py CSV [--swap]: per collective and size, N/O p50 time, the median of per-round ratios
# (--swap: O/N, for a run whose first build was the new one), and the median over the cells.
import collections, csv, statistics as st, sys
by = collections.defaultdict(dict)
for r, v, t, s, p in csv.reader(open(sys.argv[1])): by[(r, t, int(s))][v] = float(p)
swap = '--swap' in sys.argv
cells = []
for t, s in sorted({(t, s) for (_, t, s) in by}):
    rs = [(v['O'] / v['N'] if swap else v['N'] / v['O']) for (r, tt, ss), v in by.items() if (tt, ss) == (t, s) and len(v) == 2]
    cells.append(st.median(rs))
    print(f"{t:14} {s:>8}: {st.median(rs):.2f}")
print(f"median over {len(cells)} cells {st.median(cells):.3f}, range {min(cells):.2f}-{max(cells):.2f}")
