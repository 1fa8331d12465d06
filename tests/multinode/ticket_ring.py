#!/usr/bin/python3
"""Fetching atomics between hosts (issue 25): netns-ring.sh runs it in its namespaces after the ring shifts.

Started like build/bin/ring_shift (RWIN_RANK, RWIN_NRANKS, RWIN_ROOT; --mode and --size are accepted and
ignored, so netns-ring.sh's launchers run it unchanged). Every rank, at once:
  - draws DRAWS tickets from rank 0's counter with fetch_add(+1) and marks each ticket in rank 0's table
    with another fetch_add(+1), whose old value must be 0: a ticket handed out twice fails where it happens;
  - increments a word on its right neighbour DRAWS times with compare_swap, each expected value read back
    first with atomic_fetch (its left neighbour is that word's only writer, so every CAS must succeed);
  - swaps its rank into a word on its left neighbour and checks the old value it got back.
After a barrier, each rank checks its own windows: rank 0 that the counter is NRANKS x DRAWS and every
table entry is 1, every rank that its CAS word is DRAWS and its swap word holds its right neighbour's rank.
Prints one line ending in OK per rank; exits non-zero naming what was wrong.
"""
import argparse
import sys

import numpy as np
import rwin

DRAWS = 50


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="put", help="ignored (netns-ring.sh passes ring_shift's options)")
    ap.add_argument("--size", type=int, default=0, help="ignored")
    ap.parse_args()
    with rwin.Context(timeout=60) as ctx:
        me, n = ctx.rank, ctx.nranks
        right, left = (me + 1) % n, (me - 1) % n
        counter = ctx.window(ctx.alloc_window_buffer(8), [1, 1], dtype=rwin.int64)
        table = ctx.window(ctx.alloc_window_buffer(8 * n * DRAWS), [1, n * DRAWS], dtype=rwin.int64)
        words = ctx.window(ctx.alloc_window_buffer(16), [1, 2], dtype=rwin.int64)  # [CAS word, swap word]
        words.numpy()[0, 1] = -1
        ctx.barrier()
        errors = []
        for _ in range(DRAWS):
            t = ctx.fetch_add(counter, peer=0, value=1)
            if not 0 <= t < n * DRAWS:
                errors.append(f"ticket {t} outside [0, {n * DRAWS})")
                break
            seen = ctx.fetch_add(table, peer=0, value=1, offsets=[0, t])
            if seen != 0:
                errors.append(f"ticket {t} handed out before ({seen} time(s))")
                break
        for i in range(DRAWS):
            v = ctx.atomic_fetch(words, peer=right, offsets=[0, 0])
            old = ctx.compare_swap(words, peer=right, expected=v, desired=v + 1, offsets=[0, 0])
            if old != v or v != i:
                errors.append(f"CAS {i} on rank {right}: read {v}, CAS returned {old} (its only writer is me)")
                break
        old = ctx.swap(words, peer=left, value=me, offsets=[0, 1])
        if old != -1:
            errors.append(f"swap on rank {left} returned {old}, expected -1")
        ctx.barrier()
        if me == 0:
            if int(counter.numpy()[0, 0]) != n * DRAWS:
                errors.append(f"counter {int(counter.numpy()[0, 0])}, expected {n * DRAWS}")
            bad = np.flatnonzero(table.numpy()[0] != 1)
            if bad.size:
                errors.append(f"{bad.size} table entries not 1, first ticket {bad[0]}: {table.numpy()[0, bad[0]]}")
        if int(words.numpy()[0, 0]) != DRAWS:
            errors.append(f"my CAS word is {int(words.numpy()[0, 0])}, expected {DRAWS}")
        if int(words.numpy()[0, 1]) != right:
            errors.append(f"my swap word is {int(words.numpy()[0, 1])}, expected {right}")
        if errors:
            print(f"ticket_ring: rank {me}/{n} over {ctx.transport}: " + "; ".join(errors), flush=True)
            return 1
        print(f"ticket_ring: rank {me}/{n} over {ctx.transport}: {n * DRAWS} tickets once each, "
              f"{DRAWS} CAS and a swap on neighbours: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
