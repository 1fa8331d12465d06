#!/bin/bash
# p2p: OUT ROUNDS TESTS SIZES name=dir ...
out=$1 rounds=$2 tests=$3 sizes=$4; shift 4
echo "round,variant,test,size,p50,avg,mibs" > $out
for r in $(seq 1 $rounds); do for vd in "$@"; do
 v=${vd%%=*}; b=${vd#*=}
 LD_LIBRARY_PATH=$b/core RWIN_TRANSPORT=tcp RWIN_IFNAME=lo timeout -s KILL 200 $b/bin/rwinrun -n 2 -- $b/bin/rwin-perf -t $tests -s $sizes -n ${ITERS:-2000} --csv 2>/dev/null | sed 's/^\[0\] //' | grep -v "^test," | grep "," | awk -F, -v r=$r -v v=$v '{print r","v","$1","$2","$7","$9","$10}' >> $out
done; done
/usr/bin/python3 - $out "$@" <<'PY'
import csv,statistics as st,sys
names=[a.split('=')[0] for a in sys.argv[2:]]
c={}
for r in csv.DictReader(open(sys.argv[1])):
  lat=r['test'].endswith('_lat'); c.setdefault((r['test'],int(r['size'])),{}).setdefault(r['variant'],[]).append(float(r['p50'] if lat else r['mibs']))
print('cell', ' '.join(names), '  time ratios vs', names[0])
for k,v in sorted(c.items()):
  m={n:st.median(v[n]) for n in names}; lat=k[0].endswith('_lat')
  print(k, ' '.join(f'{m[n]:.2f}' for n in names), '  ', ' '.join(f'{(m[n]/m[names[0]] if lat else m[names[0]]/m[n]):.3f}' for n in names[1:]))
PY
