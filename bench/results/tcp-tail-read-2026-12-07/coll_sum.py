#!/usr/bin/python3
# coll_sum.py coll_ab.csv: per collective and size, NEW/OLD p50 time (median of per-round ratios, and
# their range), each build's median p50.
import collections, csv, statistics as st, sys
by = collections.defaultdict(dict)
for x in csv.DictReader(open(sys.argv[1])): by[(x['round'], x['test'], int(x['size']))][x['variant']] = float(x['p50'])
for t, s in sorted({(t, s) for (_, t, s) in by}):
    rs = [v['N'] / v['O'] for (r, tt, ss), v in by.items() if (tt, ss) == (t, s) and {'N', 'O'} <= v.keys()]
    o = st.median(v['O'] for (r, tt, ss), v in by.items() if (tt, ss) == (t, s))
    n = st.median(v['N'] for (r, tt, ss), v in by.items() if (tt, ss) == (t, s))
    print(f"{t:14} {s:>9}: NEW/OLD {st.median(rs):.2f} [{min(rs):.2f}-{max(rs):.2f}] over {len(rs)}; OLD {o:.1f} NEW {n:.1f} us")
