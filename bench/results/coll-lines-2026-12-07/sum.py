"""Medians of rwin-perf CSV rows prefixed with round,variant,ranks (the loops in bench/RESULTS.md,
"Lines: tiny broadcasts with a window of their own"): p50 and avg per collective, size and variant."""
import collections
import csv
import statistics
import sys

d = collections.defaultdict(list)
for r in csv.reader(open(sys.argv[1])):
    # round, variant, ranks, tool, transport, coll, nranks, dtype, op, mode, size, count, iters, p50, avg, ...
    d[(r[2], r[5], int(r[10]), r[1])].append((float(r[13]), float(r[14])))
for k in sorted(d):
    p50 = statistics.median(x[0] for x in d[k])
    avg = statistics.median(x[1] for x in d[k])
    print(f"{k[0]} ranks {k[1]:15s} {k[2]:6d} B  {k[3]:7s} p50 {p50:.3f}  avg {avg:.3f}  ({len(d[k])} rounds)")
