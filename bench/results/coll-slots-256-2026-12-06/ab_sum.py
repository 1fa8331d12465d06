# Window depth A/B (not kept): rows "iters,np,round,slots," + rwin-perf --csv, slots 64 (the cap then and
# now) or auto with auto_slots() capped at 256 instead of 64; prints the median avg us per cell.
import csv, statistics as st, sys
from collections import defaultdict
d = defaultdict(list)
for row in csv.reader(open(sys.argv[1])):
    it, np_, r, sl = row[:4]
    rest = row[4:]
    d[(it, np_, rest[2], int(rest[7]), sl)].append(float(rest[11]))
for k in sorted({x[:4] for x in d}, key=lambda k: (int(k[0]), k[1], k[2], k[3])):
    a, b = st.median(d[k + ("64",)]), st.median(d[k + ("auto",)])
    print(f"{k[0]:>5} calls, {k[1]} ranks, {k[2]:<15} {k[3]:>5} B: avg 64 slots {a:6.2f}  256 slots {b:6.2f}  ({b / a:.2f})")
