#!/bin/bash
# bwratio.sh ROUNDS BIN OUT (BIN: rwin_tcp_ref, rwinrun, rwin-perf of one build; LD_LIBRARY_PATH for its librwin): per round, one TCP stream of 64 KiB and of 1 MiB writes (1 s each), then
# rwin-perf put_bw, put_bw --nbi, get_bw --nbi at 64 KiB and 1 MiB over own tcp; csv to OUT.
rounds=$1 bin=$2 out=$3
echo "round,kind,size,mibs" > "$out"
for r in $(seq 1 "$rounds"); do
  for s in 65536 1048576; do "$bin/rwin_tcp_ref" stream $s 1 | awk -F, -v r=$r '{print r",stream,"$2","$5}' >> "$out"; done
  RWIN_TRANSPORT=tcp timeout -s KILL 120 "$bin/rwinrun" -n 2 -- "$bin/rwin-perf" -n 2000 -s 64K,1M -t put_bw --csv 2>/dev/null | grep -v test,size | awk -F, -v r=$r '{print r",put_bw,"$2","$10}' >> "$out"
  RWIN_TRANSPORT=tcp timeout -s KILL 120 "$bin/rwinrun" -n 2 -- "$bin/rwin-perf" -n 2000 -s 64K,1M -t put_bw,get_bw --nbi --csv 2>/dev/null | grep -v test,size | awk -F, -v r=$r '{t=substr($1,5); sub("_bw","_nbi",t); print r","t","$2","$10}' >> "$out"
  for s in 65536 1048576; do "$bin/rwin_tcp_ref" stream $s 1 | awk -F, -v r=$r '{print r",stream2,"$2","$5}' >> "$out"; done
done
/usr/bin/python3 - "$out" <<'PY'
import csv, statistics as st, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(dict)
for x in rows: by[(x['round'], int(x['size']))][x['kind']] = float(x['mibs'])
for size in (65536, 1048576):
    for kind in ('put_bw', 'put_nbi', 'get_nbi'):
        rs = [v[kind] / ((v['stream'] + v['stream2']) / 2) for (r, s), v in by.items() if s == size and kind in v]
        print(f"{kind:8} {size:>8}: rwin/stream median {st.median(rs):.2f} [{min(rs):.2f}-{max(rs):.2f}] over {len(rs)} rounds;"
              f" rwin {st.median(v[kind] for (r,s),v in by.items() if s==size):.0f} MiB/s, stream {st.median((v['stream']+v['stream2'])/2 for (r,s),v in by.items() if s==size):.0f}")
PY
