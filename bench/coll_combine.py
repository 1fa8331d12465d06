#!/usr/bin/env python3
"""Combines bench/collectives_side_by_side.sh's raw CSVs (OUT/raw/TOOL_TR_npN_rR.csv, columns of
bench/coll_common.h) into OUT/combined.csv, a markdown summary on stdout and gnuplot scripts
OUT/plot_npN.gp (time per call and busbw against size, one panel per collective; run gnuplot in OUT).

Per (ranks, transport, collective, size): each tool's median over rounds of avg_us (and p50_us);
busbw from that median time; ratio rwin/X = median over rounds of (X's avg time / rwin's avg time) in
the same round (> 1: rwin is faster; for bandwidth it is the busbw ratio rwin/X)."""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

out = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(out, "raw", "*.csv"))):
    m = re.match(r"(\w+?)_(\w+)_np(\d+)_r(\d+)\.csv$", os.path.basename(f))
    if not m:
        continue
    tool, tr, np_, rnd = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
    with open(f) as fh:
        for row in csv.DictReader(fh):
            try:
                row["avg_us"] = float(row["avg_us"])
                row["p50_us"] = float(row["p50_us"])
            except (KeyError, ValueError):
                continue
            row.update(tool=tool, tr=tr, np=np_, round=rnd, size=int(row["size"]))
            rows.append(row)

COLLS = ["allreduce", "allgather", "reduce_scatter", "all_to_all", "all_to_all_v", "broadcast", "barrier"]
FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
          "all_to_all_v": lambda n: (n - 1) / n,
          "broadcast": lambda n: 1.0, "barrier": lambda n: 0.0}
by = defaultdict(dict)  # (np, tr, coll, size) -> tool -> {round: row}
for r in rows:
    by[(r["np"], r["tr"], r["coll"], r["size"])].setdefault(r["tool"], {})[r["round"]] = r


def med(v):
    return statistics.median(v) if v else None


def fnum(v, unit=""):
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:.0f}{unit}"
    if v >= 10:
        return f"{v:.1f}{unit}"
    return f"{v:.3g}{unit}"


def size_str(b):
    for s, u in ((1 << 20, "M"), (1 << 10, "K")):
        if b >= s and b % s == 0:
            return f"{b // s}{u}"
    return str(b)


summary = {}
with open(os.path.join(out, "combined.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["np", "transport", "coll", "size", "tool", "rounds", "avg_us_median", "p50_us_median", "busbw_gbs",
                "ratio_rwin_over_tool", "checks"])
    for key in sorted(by, key=lambda k: (k[0], k[1], COLLS.index(k[2]) if k[2] in COLLS else 99, k[3])):
        np_, tr, coll, size = key
        tools = by[key]
        ent = {}
        for tool, rounds in tools.items():
            t = med([x["avg_us"] for x in rounds.values()])
            p = med([x["p50_us"] for x in rounds.values()])
            bus = size / (t * 1e-6) / 1e9 * FACTOR[coll](np_) if t and size else None
            checks = "".join(sorted({x["check"] for x in rounds.values()}))
            ratio = None
            if tool != "rwin" and "rwin" in tools:
                rr = [x["avg_us"] / tools["rwin"][k]["avg_us"] for k, x in rounds.items() if k in tools["rwin"]]
                ratio = med(rr)
            ent[tool] = dict(t=t, p=p, bus=bus, checks=checks, ratio=ratio, n=len(rounds))
            w.writerow([np_, tr, coll, size, tool, len(rounds), t, p, bus, ratio, checks])
        summary[key] = ent

nps = sorted({k[0] for k in summary})
print(f"# Collectives side by side ({out})\n")
print("avg = time per call (us, median over rounds of the mean over ranks), busbw in GB/s (nccl-tests), "
      "rwin/X = median over rounds of X's time / rwin's time (> 1: rwin faster). check: ok on every rank "
      "and round, FAIL otherwise.\n")
for np_ in nps:
    for tr in sorted({k[1] for k in summary if k[0] == np_}, key=lambda t: ["shm", "tcp", "rxe"].index(t)
                     if t in ("shm", "tcp", "rxe") else 9):
        keys = [k for k in summary if k[0] == np_ and k[1] == tr]
        keys.sort(key=lambda k: (COLLS.index(k[2]) if k[2] in COLLS else 99, k[3]))
        print(f"## {np_} ranks, {tr}\n")
        others = [t for t in ("mpi", "shmem", "shmembasic") if any(t in summary[k] for k in keys)]
        others += sorted({t for k in keys for t in summary[k]} - set(others) - {"rwin"})
        name = {"mpi": "MPI", "shmem": "SHMEM", "shmembasic": "SHMEM-basic"}
        cols = ["collective", "size", "rwin avg us"] + [f"{name.get(t, t)} avg us" for t in others]
        cols += ["rwin busbw"] + [f"{name.get(t, t)} busbw" for t in others]
        cols += [f"rwin/{name.get(t, t)}" for t in others] + ["check " + "/".join(["rwin"] + others)]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for k in keys:
            e = summary[k]
            g = lambda tool, f: e.get(tool, {}).get(f)
            cells = [k[2], size_str(k[3]), fnum(g("rwin", "t"))] + [fnum(g(t, "t")) for t in others]
            cells += [fnum(g("rwin", "bus"))] + [fnum(g(t, "bus")) for t in others]
            cells += [fnum(g(t, "ratio"), "x") for t in others]
            cells += ["/".join(g(t, "checks") or "-" for t in ["rwin"] + others)]
            print("| " + " | ".join(cells) + " |")
        print()

# gnuplot: data files per (np, tool, transport, coll), one plot script per np.
for np_ in nps:
    series = []
    for (n_, tr, coll, size), e in sorted(summary.items()):
        pass
    datadir = os.path.join(out, "plotdata")
    os.makedirs(datadir, exist_ok=True)
    files = defaultdict(list)
    for (n_, tr, coll, size), e in summary.items():
        if n_ != np_ or coll == "barrier":
            continue
        for tool, v in e.items():
            if v["t"]:
                files[(coll, tool, tr)].append((size, v["t"], v["bus"] or 0))
    for (coll, tool, tr), pts in files.items():
        with open(os.path.join(datadir, f"np{np_}_{coll}_{tool}_{tr}.dat"), "w") as fh:
            for s, t, b in sorted(pts):
                fh.write(f"{s} {t} {b}\n")
    colors = {"rwin": "#d62728", "mpi": "#1f77b4", "shmem": "#2ca02c", "shmembasic": "#9467bd"}
    dash = {"shm": 1, "tcp": 2, "rxe": 3}
    with open(os.path.join(out, f"plot_np{np_}.gp"), "w") as fh:
        for what, col, ylabel, name in (("time", 2, "time per call (us)", "coll_time"),
                                        ("busbw", 3, "busbw (GB/s)", "coll_busbw")):
            fh.write(f'set terminal pngcairo size 1500,950 font ",9" noenhanced dashed\n')
            fh.write(f'set output "{name}_np{np_}.png"\n')
            fh.write(f'set multiplot layout 2,3 title "rwin vs Open MPI vs OpenSHMEM, {np_} ranks: {ylabel} '
                     f'(solid shm, dashed tcp, dotted rxe)"\n')
            fh.write('set logscale xy\nset format y "%g"\nset format x "%.0s%cB"\nset grid\nset key left top\n')
            fh.write(f'set xlabel "size (bytes, nccl-tests convention)"\nset ylabel "{ylabel}"\n')
            for coll in COLLS[:-1]:
                plots = []
                for (c, tool, tr) in sorted(files):
                    if c != coll:
                        continue
                    path = os.path.join("plotdata", f"np{np_}_{c}_{tool}_{tr}.dat")  # relative: gnuplot runs in OUT
                    plots.append(f'"{path}" using 1:{col} with linespoints lc rgb "{colors.get(tool, "black")}" '
                                 f'dt {dash.get(tr, 4)} pt 7 ps 0.5 title "{tool} {tr}"')
                fh.write(f'set title "{coll}"\n')
                if plots:
                    fh.write("plot " + ", \\\n     ".join(plots) + "\n")
                else:
                    fh.write("plot NaN notitle\n")
            fh.write("unset multiplot\n")
