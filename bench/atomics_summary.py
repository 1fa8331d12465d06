"""Summary of bench/atomics_compare.sh's rounds.csv: per transport and tool the median over rounds of each
round's p50 (min-max), and the goal ratios of issue 25 both as a ratio of those medians and as the median
of per-round ratios (each round's tools ran back to back, so a round's ratio shares its noise).

    python3 bench/atomics_summary.py bench/results/atomics-run1/rounds.csv [more rounds.csv ...]
"""
import csv
import statistics
import sys

rows = [r for path in sys.argv[1:] for r in csv.DictReader(open(path))]
med = {}
print("| transport | tool | rounds | median p50 us (min-max) | median avg us |")
print("|---|---|---|---|---|")
for tr in ("shm", "tcp"):
    for tool in ("rwin", "rwin_default", "owntcp", "owntcp_default", "oshmem", "ucp_fadd", "tcp_pingpong_rtt"):
        v = [r for r in rows if r["transport"] == tr and r["tool"] == tool]
        if not v:
            continue
        p = [float(r["p50_us"]) for r in v]
        a = [float(r["avg_us"]) for r in v]
        med[tr, tool] = statistics.median(p)
        print(f"| {tr} | {tool} | {len(v)} | {statistics.median(p):.3f} ({min(p):.3f}-{max(p):.3f}) | {statistics.median(a):.3f} |")


def paired(tr, a, b):
    """Median and range of per-round a/b (rounds keyed by file and round number)."""
    by = {}
    for k, path in enumerate(sys.argv[1:]):
        for r in csv.DictReader(open(path)):
            if r["transport"] == tr:
                by.setdefault((k, r["round"]), {})[r["tool"]] = float(r["p50_us"])
    q = [d[a] / d[b] for d in by.values() if a in d and b in d and d[b] > 0]
    if not q:
        return "n/a"
    return f"{statistics.median(q):.2f}x (rounds {min(q):.2f}-{max(q):.2f}, n={len(q)})"


def ratio(a, b):
    return f"{med[a] / med[b]:.2f}x" if a in med and b in med else "n/a"


print()
for tr, a, b, goal in [("shm", "rwin", "oshmem", " (goal <= 1.0x)"), ("tcp", "rwin", "tcp_pingpong_rtt", " (goal <= 1.2x)"),
                       ("tcp", "rwin", "oshmem", ""), ("tcp", "rwin_default", "tcp_pingpong_rtt", ""),
                       ("tcp", "owntcp", "tcp_pingpong_rtt", " (goal <= 1.2x; rwin's own tcp)"),
                       ("tcp", "owntcp_default", "tcp_pingpong_rtt", ""), ("tcp", "owntcp", "oshmem", "")]:
    print(f"{tr}: {a} / {b}{goal}: ratio of medians {ratio((tr, a), (tr, b))}; per-round {paired(tr, a, b)}")
