#!/bin/bash
# OUT ROUNDS NP TESTS SIZES name=dir ...   (each dir has bin/ and core/librwin.so.0)
out=$1 rounds=$2 np=$3 tests=$4 sizes=$5; shift 5
echo "round,variant,coll,size,p50,avg" > $out
for r in $(seq 1 $rounds); do for vd in "$@"; do
 v=${vd%%=*}; b=${vd#*=}
 LD_LIBRARY_PATH=$b/core RWIN_TRANSPORT=tcp RWIN_IFNAME=lo timeout -s KILL 200 $b/bin/rwinrun -n $np -- $b/bin/rwin-perf -t $tests -s $sizes -n ${ITERS:-500} --csv 2>/dev/null | grep "^\[0\] rwin" | awk -F, -v r=$r -v v=$v '{print r","v","$3","$8","$11","$12}' >> $out
done; done
/usr/bin/python3 - $out "$@" <<'PY'
import csv,statistics as st,sys
names=[a.split('=')[0] for a in sys.argv[2:]]
c={}
for r in csv.DictReader(open(sys.argv[1])): c.setdefault((r['coll'],int(r['size'])),{}).setdefault(r['variant'],[]).append((float(r['p50']),float(r['avg'])))
print('cell', ' '.join(f'{n}(avg/p50)' for n in names), '  ratios avg vs', names[0])
for k,v in sorted(c.items()):
  a={n:st.median([x[1] for x in v[n]]) for n in names}; p={n:st.median([x[0] for x in v[n]]) for n in names}
  print(k, ' '.join(f'{a[n]:.2f}/{p[n]:.2f}' for n in names), '  ', ' '.join(f'{a[n]/a[names[0]]:.3f}' for n in names[1:]))
PY
