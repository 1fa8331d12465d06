#!/usr/bin/env python3
"""Combines the outputs of bench/compare.sh into one table, combined.csv and gnuplot series.

usage: combine.py OUT_DIR

Conventions: latency rows show the median (p50) in microseconds, bandwidth rows MiB/s (2^20) from
the average time per operation; "x" columns are rwin's figure relative to the other tool with
higher = better for rwin (bandwidth rwin/other, latency other/rwin). vs-raw is the median of
per-batch ratios measured inside one rwin-perf run (the trustworthy one on this noisy machine);
the other columns come from separate runs (+-2x noise below 4 KiB, +-1.5x above, see
perf-baselines.md).
"""
import csv
import os
import sys

out = sys.argv[1]


def rows(name, fields=None):
    path = os.path.join(out, name)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    with open(path) as f:
        if fields:
            return [dict(zip(fields, r)) for r in csv.reader(f) if r]
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


LAT = {"put_lat", "get_lat", "notify_lat"}
# metric -> (rwin test, ucx_perftest label, oshmem test, note)
METRICS = [
    ("put_lat", "put_lat", "ucp_put_lat", "put_lat",
     "one way us; rwin/raw/oshmem: put+notify+wait; ucx_perftest: put only (no signal)"),
    ("put_bw", "put_bw", "ucp_put_bw", "put_bw", "MiB/s; rwin/raw/oshmem: 16 puts + quiet; ucx_perftest: its window"),
    ("get_lat", "get_lat", "ucp_get", "get_lat", "us, one blocking get (round trip)"),
    ("get_bw", "get_bw", "ucp_get_O16", "get_bw", "MiB/s; rwin: blocking gets; raw/perftest/oshmem: 16 in flight"),
    ("notify_lat", "notify_lat", "ucp_fadd", "fadd_lat",
     "us; rwin/raw: notify ping-pong one way; perftest/oshmem: fetch-add round trip"),
    ("notify_rate", "notify_rate", "ucp_add", None, "us per op; 16 adds + quiet; perftest: ucp_add issue cost"),
]

data = {}  # (tr, metric, size, tool) -> dict(p50, avg, mibs, ratio)


def put(tr, metric, size, tool, p50=None, avg=None, mibs=None, ratio=None):
    data[(tr, metric, int(size), tool)] = {"p50": num(p50), "avg": num(avg), "mibs": num(mibs), "ratio": num(ratio)}


transports = []
for tr in ("shm", "tcp"):
    rr = rows(f"rwin_{tr}.csv")
    if rr:
        transports.append(tr)
    for r in rr:
        put(tr, r["test"], r["size"], "rwin", r["p50_us"], r["avg_us"], r["mibs"], r["ratio"])
        put(tr, r["test"], r["size"], "raw", r["raw_p50_us"], r["raw_avg_us"], r["raw_mibs"])
    for r in rows(f"rwin_{tr}_fence.csv"):
        put(tr, r["test"] + "_rawfence", r["size"], "rwin", r["p50_us"], r["avg_us"], r["mibs"], r["ratio"])
        put(tr, r["test"] + "_rawfence", r["size"], "raw", r["raw_p50_us"], r["raw_avg_us"], r["raw_mibs"])
    for r in rows(f"rwin_{tr}_skew8.csv"):
        put(tr, r["test"] + "_skew8", r["size"], "rwin", r["p50_us"], r["avg_us"], r["mibs"], r["ratio"])
        put(tr, r["test"] + "_skew8", r["size"], "raw", r["raw_p50_us"], r["raw_avg_us"], r["raw_mibs"])
memcpy = {}
for skew in (0, 8):
    for r in rows(f"memcpy_skew{skew}.csv"):
        memcpy[(skew, int(r["size"]))] = num(r["mibs"])
for r in rows("perftest.csv", ["tr", "test", "size", "p50", "avg", "bw"]):
    put(r["tr"], r["test"], r["size"], "ucx_perftest", r["p50"], r["avg"], r["bw"])
for r in rows("shmem.csv", ["tr", "test", "size", "iters", "p50", "avg", "mibs"]):
    put(r["tr"], r["test"], r["size"], "oshmem", r["p50"], r["avg"], r["mibs"])
tcp_stream = None
tcp_spin = {}
for r in rows("tcp_ref.csv", ["kind", "size", "p50", "avg", "mibs"]):
    if r["kind"] == "tcp_stream":
        tcp_stream = max(tcp_stream or 0, num(r["mibs"]) or 0)
    elif r["kind"] == "tcp_pingpong_spin":
        tcp_spin[int(r["size"])] = num(r["p50"])


def fmt(v, lat):
    if v is None:
        return "-"
    if lat:
        return f"{v:.3f}" if v < 100 else f"{v:.0f}"
    return f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def rel(a, b, lat):
    if a is None or b is None or a == 0 or b == 0:
        return "-"
    return f"{(b / a) if lat else (a / b):.2f}"


combined = []
print("rwin vs raw UCP (same run, median of per-batch ratios), ucx_perftest, OpenSHMEM, floors/ceilings")
print("x = rwin relative to that tool, higher is better for rwin")
for tr in transports:
    for metric, rwin_t, pt_t, sh_t, note in METRICS + [("put_lat_rawfence", "put_lat_rawfence", None, "put_lat",
                                                        "one way us; raw notify uses ucp_worker_fence, not a flush"),
                                                       ("put_bw_skew8", "put_bw_skew8", None, None,
                                                        "MiB/s, dst - src = 8 mod 4096"),
                                                       ("get_bw_skew8", "get_bw_skew8", None, None,
                                                        "MiB/s, dst - src = 8 mod 4096")]:
        lat = metric in LAT or metric in ("notify_rate", "put_lat_rawfence")
        sizes = sorted({k[2] for k in data if k[0] == tr and k[1] == rwin_t})
        if not sizes:
            continue
        key = "p50" if lat else "mibs"
        if metric == "notify_rate":
            key = "avg"
        ref_name = {"put_lat": "tcp spin p-p" if tr == "tcp" else "-",
                    "put_lat_rawfence": "tcp spin p-p" if tr == "tcp" else "-",
                    "put_bw": "tcp stream" if tr == "tcp" else "memcpy",
                    "get_bw": "memcpy" if tr == "shm" else "-",
                    "put_bw_skew8": "memcpy skew8", "get_bw_skew8": "memcpy skew8"}.get(metric, "-")
        print(f"\n[{tr}] {metric}: {note}")
        print(f"{'size':>9} | {'rwin':>9} {'raw':>9} {'vs-raw':>7} | {'perftest':>9} {'x':>5} | {'oshmem':>9} {'x':>5} | "
              f"{ref_name:>13} {'x':>5}")
        for s in sizes:
            g = lambda tool, t=rwin_t: (data.get((tr, t, s, tool)) or {}).get(key)
            rw, raw = g("rwin"), g("raw")
            ratio = (data.get((tr, rwin_t, s, "rwin")) or {}).get("ratio")
            pt = (data.get((tr, pt_t, s, "ucx_perftest")) or {}).get(key) if pt_t else None
            sh = (data.get((tr, sh_t, s, "oshmem")) or {}).get(key) if sh_t else None
            if metric == "notify_lat":  # only one size, 8 B
                pt = (data.get((tr, pt_t, 8, "ucx_perftest")) or {}).get("p50")
                sh = (data.get((tr, sh_t, 8, "oshmem")) or {}).get("p50")
            if metric == "notify_rate":
                pt = (data.get((tr, pt_t, 8, "ucx_perftest")) or {}).get("avg")
            ref = None
            if ref_name == "memcpy":
                ref = memcpy.get((0, s))
            elif ref_name == "memcpy skew8":
                ref = memcpy.get((8, s))
            elif ref_name == "tcp stream" and s >= 65536:
                ref = tcp_stream
            elif ref_name == "tcp spin p-p":
                ref = tcp_spin.get(s)
            print(f"{s:>9} | {fmt(rw, lat):>9} {fmt(raw, lat):>9} {f'{ratio:.2f}' if ratio else '-':>7} | "
                  f"{fmt(pt, lat):>9} {rel(rw, pt, lat):>5} | {fmt(sh, lat):>9} {rel(rw, sh, lat):>5} | "
                  f"{fmt(ref, lat):>13} {rel(rw, ref, lat):>5}")
            for tool, v in (("rwin", rw), ("raw", raw), ("ucx_perftest", pt), ("oshmem", sh), (ref_name, ref)):
                if v is not None:
                    combined.append((tr, metric, s, tool, key, v, ratio if tool == "rwin" else None))

with open(os.path.join(out, "combined.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["transport", "metric", "size", "tool", "figure", "value", "vs_raw_ratio"])
    w.writerows(combined)

# gnuplot series: one file per (transport, metric, tool) for put_bw and put_lat.
cmds = []
panels = [(tr, m) for tr in transports for m in ("put_bw", "put_lat")]
for tr, m in panels:
    series = []
    for tool in ("rwin", "raw", "ucx_perftest", "oshmem", "memcpy", "tcp stream", "tcp spin p-p"):
        pts = sorted((s, v) for (t, mm, s, tl, _, v, _) in combined if t == tr and mm == m and tl == tool)
        if not pts:
            continue
        fn = os.path.join(out, f"series_{tr}_{m}_{tool.replace(' ', '_')}.dat")
        with open(fn, "w") as f:
            for s, v in pts:
                f.write(f"{s} {v}\n")
        series.append(f"'{fn}' using 1:2 with linespoints title '{tool}'")
    ylabel = "MiB/s" if m == "put_bw" else "one-way latency, us (p50)"
    title = f"{tr}: {'put bandwidth' if m == 'put_bw' else 'put+notify latency (perftest: put only)'}"
    cmds.append(f"set title '{title}'; set ylabel '{ylabel}'")
    cmds.append("plot " + ", ".join(series) if series else "plot NaN notitle")
with open(os.path.join(out, "plot_cmds.gp"), "w") as f:
    f.write(f"set multiplot layout {max(1, len(transports))},2\n")
    f.write("\n".join(cmds) + "\nunset multiplot\n")

# The small-operation goals (tracker issue 14), judged on this run: shared memory 8 B - 4 KiB
# >= 1.0x OpenSHMEM and >= 0.9x raw UCP (the in-run ratio); tcp put+notify+wait at 8 B <= 1.3x the
# busy-poll TCP ping-pong, put_bw at >= 64 KiB >= 0.9x the TCP stream.
goals = []


def verdict(ok):
    return "met" if ok else "MISSED"


if "shm" in transports:
    for metric, sh_t in (("put_bw", "put_bw"), ("get_bw", "get_bw"), ("put_lat", "put_lat"), ("get_lat", "get_lat"),
                         ("notify_rate", None)):
        lat = metric in LAT or metric == "notify_rate"
        key = "avg" if metric == "notify_rate" else ("p50" if lat else "mibs")
        for s in sorted({k[2] for k in data if k[0] == "shm" and k[1] == metric and k[2] <= 4096}):
            d = data.get(("shm", metric, s, "rwin")) or {}
            ratio = d.get("ratio")
            sh = (data.get(("shm", sh_t, s, "oshmem")) or {}).get(key) if sh_t else None
            x_sh = None
            if sh and d.get(key):
                x_sh = sh / d[key] if lat else d[key] / sh
            ok = (ratio is not None and ratio >= 0.9) and (x_sh is None or x_sh >= 1.0)
            goals.append(("shm", metric, s, f"vs raw {ratio:.2f}" if ratio else "vs raw -",
                          f"vs OpenSHMEM {x_sh:.2f}" if x_sh else "vs OpenSHMEM -", verdict(ok)))
if "tcp" in transports:
    d = data.get(("tcp", "put_lat", 8, "rwin")) or {}
    pp = tcp_spin.get(8)
    if d.get("p50") and pp:
        x = d["p50"] / pp
        goals.append(("tcp", "put_lat", 8, f"rwin {d['p50']:.2f} us", f"{x:.2f}x the ping-pong ({pp:.2f} us)",
                      verdict(x <= 1.3)))
    for s in sorted({k[2] for k in data if k[0] == "tcp" and k[1] == "put_bw" and k[2] >= 65536}):
        d = data.get(("tcp", "put_bw", s, "rwin")) or {}
        if d.get("mibs") and tcp_stream:
            x = d["mibs"] / tcp_stream
            goals.append(("tcp", "put_bw", s, f"rwin {d['mibs']:.0f} MiB/s", f"{x:.2f}x the stream ({tcp_stream:.0f})",
                          verdict(x >= 0.9)))
if goals:
    print("\nSmall-operation goals (issue 14) on this run")
    for g in goals:
        print(f"  [{g[0]}] {g[1]:<12} {g[2]:>6} B | {g[3]:<18} | {g[4]:<32} | {g[5]}")
    with open(os.path.join(out, "goals.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["transport", "metric", "size", "a", "b", "verdict"])
        w.writerows(goals)
