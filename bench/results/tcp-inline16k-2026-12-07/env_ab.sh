#!/bin/bash
# env variants on one build: OUT ROUNDS NP TESTS SIZES name=ENVSTRING ... (ENVSTRING "X=1" for none; ';'-separated)
out=$1 rounds=$2 np=$3 tests=$4 sizes=$5; shift 5
b=${BUILD:-/work/main/build}
echo "round,variant,coll,size,p50,avg" > $out
for r in $(seq 1 $rounds); do for vd in "$@"; do
 v=${vd%%=*}; e=${vd#*=}; e=${e//;/ }
 env $e ${TRANSPORT_ENV:-RWIN_TRANSPORT=tcp RWIN_IFNAME=lo} timeout -s KILL 300 $b/bin/rwinrun -n $np -- $b/bin/rwin-perf -t $tests -s $sizes -n ${ITERS:-300} --csv 2>/dev/null | grep "^\[0\] rwin" | sed 's/^\[0\] //' | /usr/bin/python3 -c 'import csv,sys
for f in csv.reader(sys.stdin): print(",".join([sys.argv[1],sys.argv[2],f[2],f[7],f[10],f[11]]))' $r $v >> $out
done; done
/usr/bin/python3 - $out "$@" <<'PY'
import csv,statistics as st,sys
names=[a.split('=')[0] for a in sys.argv[2:]]
c={}
for r in csv.DictReader(open(sys.argv[1])): c.setdefault((r['coll'],int(r['size'])),{}).setdefault(r['variant'],[]).append((float(r['p50']),float(r['avg'])))
print('cell', ' '.join(names), '(avg us)  ratios vs', names[0])
for k,v in sorted(c.items()):
  a={n:st.median([x[1] for x in v[n]]) for n in names}
  print(k, ' '.join(f'{a[n]:.1f}' for n in names), '  ', ' '.join(f'{a[n]/a[names[0]]:.3f}' for n in names[1:]))
PY
