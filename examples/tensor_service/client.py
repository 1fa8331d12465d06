#!/usr/bin/env python3
"""Tensor service, client side: opens a job over gRPC (sending its own signal region's descriptor,
receiving the slot's), then per round pushes an input tensor with put_notify, waits for the server's
completion signal and pulls the output with get, checking it bit for bit. Prints "OK ..." at the end.

  PYTHONPATH=build/python /usr/bin/python3 examples/tensor_service/client.py --server 127.0.0.1:PORT
"""
import argparse
import os
import sys
import time

import numpy as np

import rwin

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import service  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="the server's gRPC address host:port")
    ap.add_argument("--host", default="127.0.0.1", help="address this client's agent binds")
    ap.add_argument("--elements", type=int, default=1 << 18)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--transport", default="ucx")
    ap.add_argument("--timeout", type=float, default=30.0, help="deadline of every agent call and RPC, seconds")
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    ctl = service.Client(args.server, timeout=args.timeout)
    # progress_thread: the server connects back to this agent (importing its signal region) while this
    # process is blocked in the Open RPC, not in rwin.
    with rwin.Agent(listen=f"{args.host}:0", transport=args.transport, progress_thread=True,
                    op_timeout=args.timeout) as agent:
        done = np.zeros(1, np.int64)  # the server adds 1 when a round's output is ready
        done_region = agent.register(done)
        t0 = time.perf_counter()
        job = ctl.open(signal=done_region.descriptor().hex(), elements=args.elements)
        inp = agent.import_region(bytes.fromhex(job["input"]))
        out = agent.import_region(bytes.fromhex(job["output"]))
        bell = agent.import_region(bytes.fromhex(job["doorbell"]))
        t_open = time.perf_counter() - t0
        x = np.empty(args.elements, np.float32)
        y = np.empty(args.elements, np.float32)
        t0 = time.perf_counter()
        for r in range(args.rounds):
            x[:] = rng.standard_normal(args.elements, dtype=np.float32)
            agent.put_notify(inp, 0, x, bell, job["doorbell_offset"], 1)  # the input, then the doorbell
            agent.wait(done_region, 0, r + 1)  # the server's completion signal
            agent.get(y, out, 0)
            want = service.compute(x)
            if not np.array_equal(y, want):
                bad = int(np.flatnonzero(y != want)[0])
                print(f"client {args.seed}: job {job['job']} round {r}: element {bad} is {y[bad]!r}, expected "
                      f"{want[bad]!r}", file=sys.stderr)
                return 1
        elapsed = time.perf_counter() - t0
        closed = ctl.close_job(job["job"])
        if closed["rounds"] != args.rounds:
            print(f"client {args.seed}: the server counted {closed['rounds']} rounds, expected {args.rounds}",
                  file=sys.stderr)
            return 1
    ctl.close()
    mib = args.rounds * 2 * x.nbytes / 2**20
    print(f"client {args.seed}: OK job {job['job']} slot {job['slot']}: {args.rounds} rounds of {args.elements} float32 "
          f"({mib:.1f} MiB moved, {mib / elapsed:.0f} MiB/s; open + imports {t_open * 1e3:.1f} ms)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
