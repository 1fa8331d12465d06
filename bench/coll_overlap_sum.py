#!/usr/bin/python3
"""Summary of bench/coll_overlap.sh: per tool, transport, ranks, collective, size and compute kind,
the medians over rounds of avg us per call: the collective alone, the compute alone, blocking
(call + compute), nonblocking (start, compute, wait), and hidden = (blocking - nonblocking) /
min(alone, compute): the share of the shorter part the nonblocking form took off the critical path
(1 = all of it, 0 = none, < 0 = it cost more than it hid).

    /usr/bin/python3 bench/coll_overlap_sum.py OUT_DIR
"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict


def main(out):
    runs = defaultdict(list)  # (tool, tr, np, variant, compute, coll, size) -> [avg_us]
    compute_alone = defaultdict(list)  # (tr, np, compute) -> [avg_us]
    pat = re.compile(r"(rwin|mpi|compute)_(\w+?)_np(\d+)_(.*)_r(\d+)\.csv$")
    for path in sorted(glob.glob(os.path.join(out, "raw", "*.csv"))):
        m = pat.search(os.path.basename(path))
        if not m:
            continue
        tool, tr, np_, tag, _ = m.groups()
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if tool == "compute":
            for row in rows:
                compute_alone[(tr, int(np_), tag)].append(float(row["avg_us"]))
            continue
        variant, _, kind = tag.partition("_")
        for row in rows:
            if row["check"] not in ("ok", "-"):
                print(f"coll_overlap_sum: {path}: check {row['check']}", file=sys.stderr)
            key = (tool, tr, int(np_), variant, kind, row["coll"], int(row["size"]))
            runs[key].append(float(row["avg_us"]))
    med = {k: statistics.median(v) for k, v in runs.items()}
    comp = {k: statistics.median(v) for k, v in compute_alone.items()}
    print("| tool | transport | ranks | compute | collective | size | alone (us) | compute (us) | blocking | "
          "nonblocking | hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(k[0], k[1], k[2], k[4], k[5], k[6]) for k in med if k[3] == "nb"},
                  key=lambda k: (k[1], k[2], k[3], k[4], k[5], k[0] != "rwin"))
    for tool, tr, np_, kind, coll, size in keys:
        alone = med.get((tool, tr, np_, "alone", "", coll, size))
        block = med.get((tool, tr, np_, "block", kind, coll, size))
        nb = med.get((tool, tr, np_, "nb", kind, coll, size))
        c = comp.get((tr, np_, kind))
        hidden = "-"
        if None not in (alone, block, nb, c):
            hidden = f"{(block - nb) / min(alone, c):.2f}"
        fmt = lambda v: "-" if v is None else f"{v:.0f}"
        print(f"| {tool} | {tr} | {np_} | {kind} | {coll} | {size} | {fmt(alone)} | {fmt(c)} | {fmt(block)} | "
              f"{fmt(nb)} | {hidden} |")


if __name__ == "__main__":
    main(sys.argv[1])
