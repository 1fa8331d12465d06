"""SPMD pytest suite for `import rwin` (tests/scripts/python_pytest.sh runs it under rwinrun).

Every rank runs `python3 -m pytest tests/python` and therefore every test, in the same order: tests are
collective (each rank makes the same calls in the same order). A barrier after each test keeps the
ranks in step; a test that fails on one rank stops that rank (-x), the others then fail on the
departed peer, so read the first failing rank's report (lines are prefixed "[rank]" by rwinrun).
"""
import os
import socket

import numpy as np
import pytest

import rwin

ALL_DTYPES = list(rwin.dtypes)
TIMEOUT = float(os.environ.get("RWIN_PYTEST_TIMEOUT", "30"))

# test_agent.py (rwin.Agent, issue 15), test_store.py (rwin.Context(store=...), issue 25) and test_domain.py
# (rwin.Domain, issue 25) make their
# own processes and are not collective: they run on their own (tests/scripts/python_agent.sh), never by
# every rank of an rwinrun job.
collect_ignore = ["test_agent.py", "test_store.py", "test_domain.py"] if "RWIN_RANK" in os.environ else []


@pytest.fixture(scope="session")
def ctx():
    c = rwin.Context(timeout=TIMEOUT)
    yield c
    c.close()


@pytest.fixture(autouse=True)
def _in_step(ctx):
    yield
    ctx.barrier()


@pytest.fixture
def win(ctx):
    """win(shape, dtype) -> a window over a fresh buffer of its own; freed (collectively) after the test."""
    bufs = []

    def make(shape, dtype=rwin.float32):
        dt = rwin.DType.__members__[np.dtype(dtype).name] if not isinstance(dtype, rwin.DType) else dtype
        buf = ctx.alloc_window_buffer(max(8, -(-shape[0] * shape[1] * dt.itemsize // 8) * 8))
        bufs.append(buf)
        return ctx.window(buf, shape, dtype=dt)

    yield make
    ctx.barrier()
    for b in bufs:
        ctx.free(b)


def values(dtype, rank, n, salt=0):
    """n values (numpy, the window's .numpy() dtype) every dtype holds exactly, distinct per rank/index/salt."""
    v = (rank * 1000003 + np.arange(n, dtype=np.int64) * 7 + salt * 131) % 16777213
    if dtype == rwin.float16:
        return ((v % 4096 - 2048) / 2).astype(np.float16)
    if dtype == rwin.bfloat16:
        return bf16_bits(((v % 512 - 256) / 2).astype(np.float32))
    return v.astype(np.dtype(dtype.name))


def bf16_bits(f32):
    """float32 values exact in bfloat16 -> their bfloat16 bits (uint16)."""
    return (np.asarray(f32, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def small_ints(dtype, ints):
    """Small integers as the window's .numpy() representation of `dtype`."""
    if dtype == rwin.bfloat16:
        return bf16_bits(np.asarray(ints, np.float32))
    return np.asarray(ints).astype(np.dtype(dtype.name))


_reserved = []  # sockets holding the ports reserve_port handed out, open until the process ends


def reserve_port():
    """A port on 127.0.0.1 nobody else gets: a socket stays bound to it (SO_REUSEADDR, never listening),
    so the kernel hands it to no other bind(0) or connect() of any process, while rwin's listener, which
    also sets SO_REUSEADDR, can still bind it. Picking a free port and closing the socket (the usual way)
    leaves a window in which another test's socket may take the port."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    _reserved.append(s)
    return s.getsockname()[1]


def from_rank0(ctx, value):
    """Rank 0's `value` (an int) on every rank, through an 8-byte window freed before it returns."""
    buf = ctx.alloc_window_buffer(8)
    w = ctx.window(buf, [1, 1], dtype=rwin.int64)
    if ctx.rank == 0:
        w.numpy()[0, 0] = value
    ctx.barrier()
    if ctx.rank != 0:
        ctx.get(w, peer=0, src=w)
    got = int(w.numpy()[0, 0])
    ctx.barrier()
    ctx.free(buf)
    return got


def new_root(ctx):
    """A fresh rendezvous address every rank agrees on (rank 0 reserves a port), for more Contexts."""
    return f"127.0.0.1:{from_rank0(ctx, reserve_port() if ctx.rank == 0 else 0)}"
