#!/usr/bin/python3
# absum.py out.csv: per test and size, NEW/OLD (MiB/s for the bandwidths, p50 us for the latencies),
# the median of per-round ratios over all rounds and over the fast ones (ping-pong < 80 us), each
# build's median, and the streams' medians.
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(dict)
for x in rows:
    lat = x['test'].endswith('_lat')
    by[(x['round'], x['test'], int(x['size']))][x['variant']] = float(x['p50'] if lat else x['mibs'])
refs = {x['round']: float(x['ref']) for x in rows}
fast = [r for r, v in refs.items() if v < 80]
print(f"rounds {len(refs)}, fast {len(fast)}")
for t, s in sorted({(t, s) for (r, t, s) in by if t != 'stream'}):
    ratio = lambda rs: [by[(r, t, s)]['N'] / by[(r, t, s)]['O'] for r in rs if {'N', 'O'} <= by.get((r, t, s), {}).keys()]
    a, f = ratio(refs), ratio(fast)
    unit = 'us' if t.endswith('_lat') else 'MiB/s'
    print(f"{t:8} {s:>8}: NEW/OLD {st.median(a):.2f} (fast rounds {st.median(f) if f else float('nan'):.2f}); "
          f"OLD {st.median(by[(r, t, s)]['O'] for r in refs):.1f} NEW {st.median(by[(r, t, s)]['N'] for r in refs):.1f} {unit}")
for s in (65536, 1048576):
    print(f"stream {s:>8}: {st.median(by[(r, 'stream', s)]['stream'] for r in refs):.0f} MiB/s")
