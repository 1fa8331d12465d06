import csv,statistics as st,sys
rows=[r for r in csv.reader(open(sys.argv[1])) if r[3]=='rwin']
cells={}
for r in rows:
    key=(r[5],int(r[6]),int(r[10])); cells.setdefault(key,{}).setdefault(r[1],[]).append((float(r[13]),float(r[14])))
print("| coll | ranks | bytes | old p50 | new p50 | new/old p50 | old avg | new avg | new/old avg |")
print("|---|---|---|---|---|---|---|---|---|")
for k in sorted(cells):
    o=cells[k]['old'];n=cells[k]['new']
    op=st.median(x[0] for x in o); oa=st.median(x[1] for x in o); np_=st.median(x[0] for x in n); na=st.median(x[1] for x in n)
    print(f"| {k[0]} | {k[1]} | {k[2]} | {op:.3f} | {np_:.3f} | {np_/op:.2f} | {oa:.3f} | {na:.3f} | {na/oa:.2f} |")
