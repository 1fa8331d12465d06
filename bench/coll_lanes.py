"""rwin's lanes side by side from one bench/coll_across_hosts.sh run (bench/coll_combine.py's combined.csv):
MPI time / rwin time per lane and cell (> 1: rwin faster), and how many cells each lane has at or ahead.

usage: /usr/bin/python3 bench/coll_lanes.py OUT/combined.csv [LANE,LANE,...]   (default 2hosts,2hostsucx,2hostsowntcp)
"""
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1] if len(sys.argv) > 1 else "combined.csv")))
t = collections.defaultdict(dict)
for r in rows:
    if r["tool"] == "mpi":
        t[(r["np"], r["coll"], r["size"])][r["transport"]] = float(r["ratio_rwin_over_tool"] or "nan")
lanes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["2hosts", "2hostsucx", "2hostsowntcp"]
for np_ in sorted({k[0] for k in t}, key=int):
    print(f"\n## {np_} ranks (2 x {int(np_)//2}): MPI time / rwin time\n")
    print("| collective | size | " + " | ".join(lanes) + " |")
    print("|---|---|" + "---|" * len(lanes))
    wins = collections.Counter(); n = 0
    for k in [k for k in t if k[0] == np_]:
        n += 1
        cells = []
        for l in lanes:
            v = t[k].get(l)
            cells.append("-" if v is None else f"{v:.2f}")
            if v is not None and v >= 1.0: wins[l] += 1
        print(f"| {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    print("\ncells >= 1.0x: " + ", ".join(f"{l} {wins[l]}/{n}" for l in lanes))
