import sys,statistics as st,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    r,v,t,p50,avg=l.strip().split(',')
    d[(t,v)].append((float(p50),float(avg)))
for k in sorted(d):
    print(k, 'p50 med %.3f'%st.median(x[0] for x in d[k]), 'avg med %.3f'%st.median(x[1] for x in d[k]))
