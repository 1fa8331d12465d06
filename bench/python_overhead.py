#!/usr/bin/env python3
"""Python per-call overhead and large-transfer bandwidth of `import rwin` vs the same loops in C++.

    PYTHONPATH=build/python UCX_TLS=posix,sysv,self build/bin/rwinrun -n 2 -- /usr/bin/python3 bench/python_overhead.py
    PYTHONPATH=build/python UCX_TLS=tcp             build/bin/rwinrun -n 2 -- /usr/bin/python3 bench/python_overhead.py

Latency, as rwin-perf -t put_lat -s 8: rank 0 puts 8 B + notifies rank 1 and waits; rank 1 waits, puts +
notifies back; one way = round trip / 2, three calls per side per half round (put, notify, wait). The C++
loop (rwin._rwin._bench_pingpong) runs on the same Context and windows, in batches alternating with the
Python loop; medians of the batches. Python adds (py - cpp) / 3 per call.
Bandwidth, as rwin-perf -t put_bw: rank 0 issues -O 16 puts of S bytes then quiet(), repeated; rank 1
waits on a signal meanwhile (it progresses the transport). Python loop vs C++ loop, alternating batches.
Rank 0 prints the table; --json FILE writes the figures.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import rwin
from rwin import _rwin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5000, help="round trips per latency batch")
    ap.add_argument("--batches", type=int, default=7)
    ap.add_argument("--sizes", default="1M,4M,16M", help="bandwidth sizes (K/M suffixes)")
    ap.add_argument("--outstanding", type=int, default=16)
    ap.add_argument("--bw-bytes", type=float, default=128e6, help="bytes per bandwidth batch")
    ap.add_argument("--bw-batches", type=int, default=21, help="bandwidth batches per size and side")
    ap.add_argument("--json")
    a = ap.parse_args()
    sizes = [int(s[:-1]) * {"K": 1 << 10, "M": 1 << 20}[s[-1]] if s[-1] in "KM" else int(s) for s in a.sizes.split(",")]

    with rwin.Context() as ctx:
        me, peer = ctx.rank, 1 - ctx.rank
        assert ctx.nranks == 2, "run with rwinrun -n 2"
        try:
            os.sched_setaffinity(0, {me % os.cpu_count()})  # as rwin-perf pins rank r to CPU r
        except OSError:
            pass
        active = me == 0
        # --- latency
        lb = ctx.alloc_window_buffer(64, name="lat")
        src = ctx.window(lb, [1, 1], dtype=rwin.float64, offset=0)
        dst = ctx.window(lb, [1, 1], dtype=rwin.float64, offset=8)
        sig = ctx.window(lb, [1, 1], dtype=rwin.int64, offset=16)
        seen = 0

        def py_batch(n):
            nonlocal seen
            put, notify, wait = ctx.put, ctx.notify, ctx.wait
            NA, off = rwin.AtomicType.None_, [0, 0]
            t0 = time.perf_counter()
            for _ in range(n):
                if active:
                    put(dst, peer=peer, src=src, atomic=NA)
                    notify(sig, peer=peer, offsets=off, value=1, op=rwin.NotifyOp.AtomicAdd)
                    seen += 1
                    wait(sig, offsets=off, expected=seen, cmp=rwin.WaitCmp.Ge)
                else:
                    seen += 1
                    wait(sig, offsets=off, expected=seen, cmp=rwin.WaitCmp.Ge)
                    put(dst, peer=peer, src=src, atomic=NA)
                    notify(sig, peer=peer, offsets=off, value=1, op=rwin.NotifyOp.AtomicAdd)
            return time.perf_counter() - t0

        def cpp_batch(n):
            nonlocal seen
            t = _rwin._bench_pingpong(ctx, dst, src, sig, peer, active, n, seen)
            seen += n
            return t

        py_batch(500)
        cpp_batch(500)
        py_us, cpp_us = [], []
        for _ in range(a.batches):
            ctx.barrier()
            cpp_us.append(cpp_batch(a.iters) / a.iters / 2 * 1e6)
            ctx.barrier()
            py_us.append(py_batch(a.iters) / a.iters / 2 * 1e6)
        lat = {"cpp_us": statistics.median(cpp_us), "py_us": statistics.median(py_us)}
        lat["per_call_us"] = (lat["py_us"] - lat["cpp_us"]) / 3
        ctx.barrier()

        # --- bandwidth
        bw = []
        bb = ctx.alloc_window_buffer(2 * max(sizes) + 64, name="bw")
        done = ctx.window(bb, [1, 1], dtype=rwin.int64, offset=2 * max(sizes))
        ndone = 0
        for size in sizes:
            s = ctx.window(bb, [1, size], dtype=rwin.uint8, offset=0)
            d = ctx.window(bb, [1, size], dtype=rwin.uint8, offset=max(sizes))
            groups = max(2, int(a.bw_bytes // (size * a.outstanding)))
            O = a.outstanding

            def run(kind):
                nonlocal ndone
                ctx.barrier()
                t = 0.0
                if active:
                    if kind == "cpp":
                        t = _rwin._bench_put_bw(ctx, d, s, peer, groups, O)
                    else:
                        put, quiet = ctx.put, ctx.quiet
                        t0 = time.perf_counter()
                        for _ in range(groups):
                            for _ in range(O):
                                put(d, peer=peer, src=s)
                            quiet()
                        t = time.perf_counter() - t0
                    ctx.notify(done, peer=peer, offsets=[0, 0], value=1)
                else:
                    ndone += 1
                    ctx.wait(done, offsets=[0, 0], expected=ndone, timeout=600)
                return size * O * groups / t / 2**20 if t else 0.0

            run("cpp")
            cpp_mib, py_mib = [], []
            for _ in range(a.bw_batches):
                cpp_mib.append(run("cpp"))
                py_mib.append(run("py"))
            bw.append({"bytes": size, "cpp_mib_s": statistics.median(cpp_mib), "py_mib_s": statistics.median(py_mib)})
        ctx.barrier()

        if me == 0:
            print(f"transport: {ctx.transport}")
            print(f"put(8 B)+notify+wait one way: C++ {lat['cpp_us']:.2f} us, Python {lat['py_us']:.2f} us "
                  f"-> Python adds {lat['per_call_us']:.3f} us per call (batches: C++ "
                  f"{min(cpp_us):.2f}-{max(cpp_us):.2f}, Python {min(py_us):.2f}-{max(py_us):.2f})")
            for b in bw:
                print(f"put_bw {b['bytes'] >> 10} KiB x{a.outstanding}: C++ {b['cpp_mib_s']:.0f} MiB/s, "
                      f"Python {b['py_mib_s']:.0f} MiB/s -> {b['py_mib_s'] / b['cpp_mib_s']:.3f}x")
            if a.json:
                with open(a.json, "w") as f:
                    json.dump({"transport": ctx.transport, "latency": lat, "bandwidth": bw}, f, indent=1)


if __name__ == "__main__":
    main()
