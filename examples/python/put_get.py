#!/usr/bin/env python3
"""The runtime's tutorial step 06 (Put and Get: tensor-level push and pull) on rwin, line by line.

    --mode put: every rank pushes its src into the next rank's dst -> y[r] = x[(r-1) % N]
    --mode get: every rank pulls the next rank's src into its dst  -> y[r] = x[(r+1) % N]

Run (from the source tree, after the CMake build):

    build/bin/rwinrun -n 2 -- python3 examples/python/put_get.py --mode get

(it finds build/python by itself; with the package installed, or PYTHONPATH set, from anywhere).

Every rank prints OK (rwinrun prefixes "[rank]"); exit status 1 on a mismatch.
"""
import argparse
import os
import sys

# From a source tree as the issue writes it (`rwinrun -n 2 -- python3 examples/python/put_get.py`) or installed.
import _rwin_path  # noqa: F401,E402  (finds rwin: the build tree, or Debian's python3)
import numpy as np  # noqa: E402

import rwin  # noqa: E402


def make_x(rank, size, dtype):
    """Per-rank input every dtype holds exactly (as examples/ring_shift.cpp): bfloat16 as its uint16 bits."""
    v = (rank * 1000003 + np.arange(size, dtype=np.int64) * 7) % 16777213
    if dtype == rwin.float16:
        return ((v % 4096 - 2048) / 2).astype(np.float16)
    if dtype == rwin.bfloat16:  # half-integers in [-128, 128): 8 significant bits, exact in bfloat16
        f = ((v % 512 - 256) / 2).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16)
    np_type = {rwin.float32: np.float32, rwin.float64: np.float64}.get(dtype)
    if np_type is not None:
        return v.astype(np_type)
    return v.astype(np.dtype(dtype.name))  # integers wrap to their width


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["put", "get"], default="put")
    ap.add_argument("--size", type=int, default=1024, help="elements per rank (SIZE)")
    ap.add_argument("--dtype", default="float32", help="float16 bfloat16 float32 float64 int8 ... uint64")
    args = ap.parse_args()
    SIZE = args.size
    dtype = getattr(rwin, args.dtype)

    with rwin.Context() as ctx:
        my_rank = ctx.rank
        nranks = ctx.nranks
        # The windows the runtime's host code allocates: src and dst in one buffer, an INT32 signal [NR, 1].
        buf = ctx.alloc_window_buffer(2 * SIZE * dtype.itemsize)
        src = ctx.window(buf, [1, SIZE], dtype=dtype, offset=0)
        dst = ctx.window(buf, [1, SIZE], dtype=dtype, offset=SIZE * dtype.itemsize)
        sbuf = ctx.alloc_window_buffer(8 * nranks)
        signal = ctx.window(sbuf, [nranks, 1], dtype=rwin.int32)
        x = make_x(my_rank, SIZE, dtype)

        if args.mode == "put":
            # local = pl.load(x, [0, 0], [1, SIZE]); src = pl.store(local, [0, 0], src)
            src.numpy()[0, :] = x
            peer = (my_rank + 1) % nranks
            ctx.put(dst, peer=peer, src=src, atomic=rwin.AtomicType.None_)
            ctx.notify(signal, peer=peer, offsets=[0, 0], value=1, op=rwin.NotifyOp.AtomicAdd)
            ctx.wait(signal, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Ge)
            # recv = pl.load(dst, [0, 0], [1, SIZE]); y = pl.store(recv, [0, 0], y)
            y = dst.numpy()[0, :].copy()
            want = make_x((my_rank + nranks - 1) % nranks, SIZE, dtype)
        else:
            src.numpy()[0, :] = x
            get_peer = (my_rank + 1) % nranks
            # Notify the rank that reads from us (the previous rank); our wait is then satisfied by exactly
            # the rank we get from (the next rank). nranks is added before the -1 so it is never negative.
            ctx.notify(signal, peer=(my_rank + nranks - 1) % nranks, offsets=[0, 0], value=1, op=rwin.NotifyOp.AtomicAdd)
            ctx.wait(signal, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Ge)
            ctx.get(dst, peer=get_peer, src=src)
            y = dst.numpy()[0, :].copy()
            want = make_x(get_peer, SIZE, dtype)

        # Compare the bytes: bfloat16 arrives as uint16 bits, floats compare exactly (every value is exact).
        bad = np.flatnonzero(np.any(y.view(np.uint8).reshape(SIZE, -1) != want.view(np.uint8).reshape(SIZE, -1), axis=1))
        if len(bad):
            i = bad[0]
            print(f"FAILED: {len(bad)} of {SIZE} elements differ; first [{i}] = {y[i]}, expected {want[i]}")
            return 1
        print("OK")
        return 0


if __name__ == "__main__":
    sys.exit(main())
