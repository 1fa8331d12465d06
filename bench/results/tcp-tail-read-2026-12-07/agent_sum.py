#!/usr/bin/python3
# agent_sum.py agent_ab.csv: per op and size, NEW/OLD (median of per-round ratios, all rounds and the
# fast ones: ping-pong < 80 us), each build's median MiB/s, and NEW against the stream of the same write
# size measured in the same round (sizes with a stream).
import collections, csv, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(dict)
for x in rows: by[(x['round'], x['op'], int(x['bytes']))][x['variant']] = float(x['mibs'])
refs = {x['round']: float(x['ref']) for x in rows}
fast = [r for r, v in refs.items() if v < 80]
print(f"rounds {len(refs)}, fast {len(fast)}")
for op, n in sorted({(o, n) for (r, o, n) in by if o != 'stream'}):
    have = [r for r in refs if {'N', 'O'} <= by.get((r, op, n), {}).keys()]
    ratio = lambda rs: [by[(r, op, n)]['N'] / by[(r, op, n)]['O'] for r in rs if r in have]
    line = (f"{op} {n:>9}: NEW/OLD {st.median(ratio(refs)):.2f} (fast {st.median(ratio(fast)) if ratio(fast) else float('nan'):.2f});"
            f" OLD {st.median(by[(r, op, n)]['O'] for r in have):.0f} NEW {st.median(by[(r, op, n)]['N'] for r in have):.0f} MiB/s")
    vs = [by[(r, op, n)][v] / by[(r, 'stream', n)]['stream'] for r in have for v in ('N',) if 'stream' in by.get((r, 'stream', n), {})]
    vo = [by[(r, op, n)]['O'] / by[(r, 'stream', n)]['stream'] for r in have if 'stream' in by.get((r, 'stream', n), {})]
    if vs: line += f"; /stream NEW {st.median(vs):.2f} OLD {st.median(vo):.2f}"
    print(line)
