#!/usr/bin/python3
"""Medians over rounds of run.sh's CSVs: avg us per collective, ranks, size and algorithm file, MPI beside."""
import csv, glob, os, re, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "raw")
t = {}
for f in glob.glob(os.path.join(d, "*.csv")):
    algo = re.match(r"(bruck|flat|mpi)_", os.path.basename(f)).group(1)
    for row in csv.DictReader(open(f)):
        if row["check"] != "ok":
            print("check failed:", f, row)
        t.setdefault((row["coll"], int(row["nranks"]), int(row["size"]), algo), []).append(float(row["avg_us"]))
flat_name = {"allreduce": "ring", "allgather": "direct", "reduce_scatter": "direct", "all_to_all": "direct"}
print("| collective | ranks | bytes | bruck | one round | Open MPI | one round / bruck time | best rwin / MPI |")
print("|---|---|---|---|---|---|---|---|")
for coll in ("allreduce", "allgather", "reduce_scatter", "all_to_all"):
    for np in sorted({k[1] for k in t}):
        for size in sorted({k[2] for k in t if k[0] == coll}):
            m = {a: statistics.median(t[(coll, np, size, a)]) for a in ("bruck", "flat", "mpi") if (coll, np, size, a) in t}
            if len(m) < 3:
                continue
            n = len(t[(coll, np, size, "bruck")])
            print(f"| {coll} ({flat_name[coll]}) | {np} | {size} | {m['bruck']:.0f} | {m['flat']:.0f} | {m['mpi']:.0f} |"
                  f" {m['flat'] / m['bruck']:.2f} | {m['mpi'] / min(m['bruck'], m['flat']):.2f} |")
