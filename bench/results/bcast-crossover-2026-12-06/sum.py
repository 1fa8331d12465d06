#!/usr/bin/python3
"""Medians over rounds of run.sh's CSVs: broadcast avg us per transport, ranks, size and algorithm."""
import csv, glob, os, re, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")
t = {}
for f in glob.glob(os.path.join(d, "*.csv")):
    a, tr = re.match(r"(direct|tree|chain|mpi)_(shm|owntcp)_", os.path.basename(f)).groups()
    for row in csv.DictReader(open(f)):
        t.setdefault((tr, int(row["nranks"]), int(row["size"]), a), []).append(float(row["avg_us"]))
print("| transport | ranks | bytes | direct | tree | chain | Open MPI | best | best / MPI time |")
print("|---|---|---|---|---|---|---|---|---|")
for k in sorted({k[:3] for k in t}):
    m = {a: statistics.median(t[k + (a,)]) for a in ("direct", "tree", "chain", "mpi") if k + (a,) in t}
    best = min((v, a) for a, v in m.items() if a != "mpi")
    print(f"| {k[0]} | {k[1]} | {k[2]} | {m.get('direct', 0):.0f} | {m.get('tree', 0):.0f} | {m.get('chain', 0):.0f} |"
          f" {m.get('mpi', 0):.0f} | {best[1]} | {best[0] / m['mpi']:.2f} |")
