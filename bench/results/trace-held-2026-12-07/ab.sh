#!/bin/bash
# The held put's A/B (bench/RESULTS.md "A small put held out of its slot"): interleaved rounds of
# OLD_BUILD and NEW_BUILD, tracing off and on, 2 ranks over shared memory: 8 B put_lat / notify_lat
# (20000 iterations) and an 8 B put_bw stream (16 puts + quiet, 20000 times).
#   bash ab.sh OLD_BUILD NEW_BUILD OUT.csv ROUNDS
old=$1 new=$2 out=$3 rounds=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "round,variant,test,size,p50,mibs" > "$out"
for r in $(seq 1 "$rounds"); do
 for v in oldoff oldon newoff newon; do
  case $v in old*) b=$old;; *) b=$new;; esac
  rm -rf "$tmp/t"; mkdir -p "$tmp/t"
  case $v in *on) E="RWIN_TRACE=$tmp/t";; *) E="X=1";; esac
  for t in "-t put_lat,notify_lat -s 8 -n 20000 -w 2000" "-t put_bw -s 8 -n 20000 -w 1000"; do
   env UCX_TLS=posix,sysv,self $E timeout -s KILL 120 "$b/bin/rwinrun" -n 2 --timeout 100 -- "$b/bin/rwin-perf" $t --csv 2>/dev/null |
    sed 's/^\[0\] //' | grep -v '^test,' | awk -F, -v r="$r" -v v=$v '{print r","v","$1","$2","$(NF-13)","$(NF-10)}' >> "$out"
  done
 done
done
/usr/bin/python3 - "$out" <<'PY'
import csv, statistics as st, sys
cells = {}
for r in csv.DictReader(open(sys.argv[1])):
    lat = r["test"].endswith("_lat")
    cells.setdefault(r["test"], {}).setdefault(r["variant"], []).append(float(r["p50"] if lat else r["mibs"]))
for t, v in cells.items():
    m = {k: st.median(x) for k, x in v.items()}
    inv = not t.endswith("_lat")
    ratio = lambda on, off: (m[off] / m[on]) if inv else (m[on] / m[off])
    print(f"{t}: " + " ".join(f"{k} {m[k]:.4g}" for k in ("oldoff", "oldon", "newoff", "newon")) +
          f"  old on/off {ratio('oldon', 'oldoff'):.3f}  new on/off {ratio('newon', 'newoff'):.3f}")
PY
