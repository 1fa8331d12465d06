# Interleaved A/B of all_to_all_v with RWIN_COLL_PULL_MIN=0 (messages) and 8192 (the pull mode) at
# small sizes: CSV rows "np,round,pull_min," + rwin-perf --csv; prints the median p50 and average per cell.
import csv,statistics as st,sys
from collections import defaultdict
d=defaultdict(list)
for row in csv.reader(open(sys.argv[1])):
    np_,r,pm=row[0],row[1],row[2]; rest=row[3:]
    size=rest[7]; p50=float(rest[10]); avg=float(rest[11])
    d[(np_,size,pm)].append((p50,avg))
for k in sorted(set((a,b) for a,b,c in d)):
    m0=d[k+('0',)]; m1=d[k+('8192',)]
    p0=st.median(x[0] for x in m0); p1=st.median(x[0] for x in m1)
    a0=st.median(x[1] for x in m0); a1=st.median(x[1] for x in m1)
    print(k, 'p50 msg %.2f pullmode %.2f (%.2f)  avg msg %.2f pullmode %.2f (%.2f)'%(p0,p1,p1/p0,a0,a1,a1/a0))
