#!/usr/bin/env python3
"""Medians over rounds of ab.sh's CSV: p50 one way (get_lat: a round trip), park 1 against 0 and the ping-pong."""
import csv, statistics, sys
rows = {}
with open(sys.argv[1]) as f:
    for r in csv.DictReader(f):
        rows.setdefault((r["kind"], r["size"]), []).append(float(r["p50_us"]))
med = lambda k: statistics.median(rows[k]) if k in rows else float("nan")
rng = lambda k: f"{min(rows[k]):.3f}-{max(rows[k]):.3f}" if k in rows else "-"
print("| test | size | park=1 | park=0 | 1 / 0 | ping-pong (x2 for get) | park=1 / ping-pong |")
print("|---|---|---|---|---|---|---|")
for t in ("put_lat", "notify_lat", "get_lat"):
    for s in ("8",) if t == "notify_lat" else ("8", "4K"):
        a, b = med((f"park1_{t}", s)), med((f"park0_{t}", s))
        pp = med(("tcp_pingpong_spin", "8" if s == "8" else "4096")) * (2 if t == "get_lat" else 1)
        print(f"| {t} | {s} | {a:.3f} ({rng((f'park1_{t}', s))}) | {b:.3f} ({rng((f'park0_{t}', s))}) | {a / b:.3f} | {pp:.3f} | {a / pp:.2f} |")
e, p = med(("tcp_pingpong_spin_epoll", "8")), med(("tcp_pingpong_spin", "8"))
print(f"\nping-pong 8 B: {p:.3f} us, its sockets in an epoll set {e:.3f} us ({e - p:+.3f})")
