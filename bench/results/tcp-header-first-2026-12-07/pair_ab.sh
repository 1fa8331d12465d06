#!/bin/bash
# A/B of two builds on rwin-perf's pair tests over rwin's own tcp (loopback), alternating builds
# each round:  pair_ab.sh OUT ROUNDS TESTS SIZES [EXTRA_ARGS] name=dir ...
# (each dir has bin/rwin-perf, bin/rwinrun and core/librwin.so.0). Prints the median MiB/s per cell.
out=$1 rounds=$2 tests=$3 sizes=$4 extra=$5; shift 5
echo "round,variant,test,size,mibs,p50" > "$out"
for r in $(seq 1 "$rounds"); do for vd in "$@"; do
  v=${vd%%=*} b=${vd#*=}
  LD_LIBRARY_PATH=$b/core RWIN_TRANSPORT=tcp timeout -s KILL 200 "$b/bin/rwinrun" -n 2 -- "$b/bin/rwin-perf" \
    -t "$tests" -s "$sizes" -n "${ITERS:-2000}" $extra --csv 2>/dev/null | grep -v "test,size" |
    awk -F, -v r="$r" -v v="$v" '{print r","v","substr($1,5)","$2","$10","$7}' >> "$out"
done; done
/usr/bin/python3 - "$out" "$@" <<'PY'
import csv, statistics as st, sys
names = [a.split('=')[0] for a in sys.argv[2:]]
c = {}
for r in csv.DictReader(open(sys.argv[1])):
    c.setdefault((r['test'], int(r['size'])), {}).setdefault(r['variant'], []).append(float(r['mibs']))
print('cell', ' '.join(f'{n}(MiB/s)' for n in names), '  ratios vs', names[0])
for k, v in sorted(c.items()):
    m = {n: st.median(v[n]) for n in names}
    print(k, ' '.join(f'{m[n]:.0f}' for n in names), '  ', ' '.join(f'{m[n]/m[names[0]]:.3f}' for n in names[1:]))
PY
