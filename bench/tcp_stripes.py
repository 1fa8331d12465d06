#!/usr/bin/python3
"""Summary of bench/tcp_stripes.sh: put_bw MiB/s (median over rounds) and put_lat p50 per path, size and
socket count, with each count's ratio to one socket in the same round (median of the per-round ratios)."""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict


def main(raw):
    # (path, test, size, sockets) -> {round: value}
    vals = defaultdict(dict)
    for f in sorted(glob.glob(os.path.join(raw, "*.csv"))):
        m = re.match(r"(netns|lo)_s(\d+)_r(\d+)\.csv$", os.path.basename(f))
        if not m:
            continue
        path, s, r = m.group(1), int(m.group(2)), int(m.group(3))
        with open(f) as fh:
            for row in csv.DictReader(fh):
                if row["test"] == "put_bw":
                    vals[(path, "put_bw MiB/s", int(row["size"]), s)][r] = float(row["mibs"])
                elif row["test"] == "put_lat":
                    vals[(path, "put_lat p50 us", int(row["size"]), s)][r] = float(row["p50_us"])
    names = {"netns": "two netns hosts (veth)", "lo": "loopback"}
    print("| path | measure | size | sockets | median | ratio to 1 socket, same round (median; min-max) | rounds |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(vals):
        path, what, size, s = key
        rounds = vals[key]
        base = vals.get((path, what, size, 1), {})
        ratios = []
        for r, v in rounds.items():
            if r in base and base[r] > 0 and v > 0:
                # > 1: better than one socket (more MiB/s, or less time)
                ratios.append(v / base[r] if "MiB" in what else base[r] / v)
        ratio = (f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-")
        print(f"| {names[path]} | {what} | {size >> 20} MiB | {s} | {statistics.median(rounds.values()):.1f} | {ratio} | {len(rounds)} |")


if __name__ == "__main__":
    main(sys.argv[1])
