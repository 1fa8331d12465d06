"""Collectives from Python, with the runtime's names and shapes (SPMD: every rank runs every test).

References are computed locally with numpy from values every rank can regenerate (conftest.values), so
each rank checks the whole result, not just its own part.
"""
import socket

import numpy as np
import pytest

import rwin
from conftest import TIMEOUT, bf16_bits, from_rank0, new_root, values

NP_OPS = {rwin.ReduceOp.Sum: np.add, rwin.ReduceOp.Max: np.maximum, rwin.ReduceOp.Min: np.minimum,
          rwin.ReduceOp.Prod: np.multiply}


def as_float(dtype, a):
    """The window's .numpy() representation -> float64 values (bfloat16 bits decoded)."""
    if dtype == rwin.bfloat16:
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def small_values(dtype, rank, n, salt=0):
    """Small integers (|v| <= 3, never 0 for Prod's sake) held exactly by every dtype, so that sums and
    products over up to 8 ranks are exact in every type (f16/bf16 included) and integers never wrap."""
    v = ((rank * 7 + np.arange(n) * 3 + salt) % 3) + 1  # 1..3
    if dtype in (rwin.int8, rwin.int16, rwin.int32, rwin.int64, rwin.float16, rwin.float32, rwin.float64,
                 rwin.bfloat16):
        v = np.where((np.arange(n) + rank) % 4 == 0, -v, v)
    if dtype == rwin.bfloat16:
        return bf16_bits(v.astype(np.float32))
    return v.astype(np.dtype(dtype.name))


def reference(dtype, op, n, nranks, salt=0, members=None):
    """op over the members' small_values, as float64; integer types reduce in their own numpy type, so a
    product wraps exactly as the library's does."""
    members = list(range(nranks)) if members is None else members
    integer = np.dtype(dtype.name).kind in "iu" if dtype != rwin.bfloat16 else False
    acc = None
    for r in members:
        v = small_values(dtype, r, n, salt)
        v = v if integer else as_float(dtype, v)
        acc = v if acc is None else NP_OPS[op](acc, v)
    return acc.astype(np.float64)


@pytest.mark.parametrize("mode", ["mesh", "ring", "bruck"])
@pytest.mark.parametrize("op", list(NP_OPS))
@pytest.mark.parametrize("dtype", [rwin.float32, rwin.float16, rwin.bfloat16, rwin.int32, rwin.int8, rwin.uint16,
                                   rwin.float64, rwin.int64])
def test_allreduce_in_place(ctx, win, dtype, op, mode):
    n = 1000 + 3  # odd
    x = win([1, n], dtype)
    x.numpy()[0, :] = small_values(dtype, ctx.rank, n)
    ctx.allreduce(x, op=op, mode=mode)
    assert np.array_equal(as_float(dtype, x.numpy()[0]), reference(dtype, op, n, ctx.nranks))


def test_allreduce_out_of_place_and_back_to_back(ctx, win):
    n = 257
    src, dst = win([1, n], rwin.float32), win([1, n], rwin.float32)
    for it in range(20):  # the same windows (and the library's signals) reused, data changing each time
        src.numpy()[0, :] = small_values(rwin.float32, ctx.rank, n, salt=it)
        mode = ("auto", "mesh", "ring")[it % 3]
        ctx.allreduce(src, op=rwin.ReduceOp.Sum, mode=mode, out=dst)
        assert np.array_equal(src.numpy()[0], small_values(rwin.float32, ctx.rank, n, salt=it)), "src changed"
        assert np.array_equal(dst.numpy()[0].astype(np.float64), reference(rwin.float32, rwin.ReduceOp.Sum, n,
                                                                           ctx.nranks, salt=it)), it


def test_allreduce_large_ring_identical_bits(ctx, win):
    """Above the chunk size, with values whose f32 sums round: every rank must hold the same bits."""
    n = 3 * (1 << 20) // 4 + 5
    x, got = win([1, n], rwin.float32), win([ctx.nranks, n], rwin.float32)
    rng = np.random.default_rng(ctx.rank + 7)
    x.numpy()[0, :] = rng.standard_normal(n).astype(np.float32)
    ctx.allreduce(x, mode="ring")
    ctx.allgather(x, got)
    g = got.numpy()
    for r in range(1, ctx.nranks):
        assert np.array_equal(g[r].view(np.uint32), g[0].view(np.uint32)), f"rank {r} differs from rank 0"


@pytest.mark.parametrize("dtype", [rwin.float32, rwin.bfloat16, rwin.int16, rwin.uint8])
def test_broadcast_from_every_root(ctx, win, dtype):
    n = 4099
    x = win([2, n], dtype)
    for root in range(ctx.nranks):
        x.numpy()[:] = values(dtype, ctx.rank, 2 * n, salt=root).reshape(2, n)
        ctx.broadcast(x, root=root)
        assert np.array_equal(x.numpy(), values(dtype, root, 2 * n, salt=root).reshape(2, n)), root


@pytest.mark.parametrize("S", [1, 33, 70001])
def test_allgather(ctx, win, S):
    stage, data = win([1, S], rwin.int32), win([ctx.nranks, S], rwin.int32)
    stage.numpy()[0, :] = values(rwin.int32, ctx.rank, S)
    ctx.allgather(stage, data)
    for r in range(ctx.nranks):
        assert np.array_equal(data.numpy()[r], values(rwin.int32, r, S)), r


@pytest.mark.parametrize("op", list(NP_OPS))
def test_reduce_scatter(ctx, win, op):
    S = 1025
    data, out = win([ctx.nranks, S], rwin.float32), win([1, S], rwin.float32)
    full = lambda r: np.stack([small_values(rwin.float32, r * 31 + row, S) for row in range(ctx.nranks)])
    mine = ctx.rank
    ref = None
    for r in range(ctx.nranks):
        v = full(r)[mine].astype(np.float64)
        ref = v if ref is None else NP_OPS[op](ref, v)
    data.numpy()[:] = full(ctx.rank)
    ctx.reduce_scatter(data, op=op, out=out)
    assert np.array_equal(out.numpy()[0].astype(np.float64), ref)
    ctx.reduce_scatter(data, op=op)  # in place: row my_rank
    assert np.array_equal(data.numpy()[mine].astype(np.float64), ref)


def test_all_to_all(ctx, win):
    S = 513
    stage, data = win([ctx.nranks, S], rwin.uint16), win([ctx.nranks, S], rwin.uint16)
    row = lambda src, dst: (np.arange(S) * 5 + src * 1000 + dst * 17).astype(np.uint16)
    for dst in range(ctx.nranks):
        stage.numpy()[dst] = row(ctx.rank, dst)
    ctx.all_to_all(stage, data)
    for src in range(ctx.nranks):
        assert np.array_equal(data.numpy()[src], row(src, ctx.rank)), src


def test_all_to_all_v(ctx, win):
    """Counts per (sender, receiver) pair, zeros among them, packed and with explicit offsets (blocks in
    reversed member order with a gap the call must leave alone); counts and offsets as lists and numpy."""
    n = ctx.nranks
    count = lambda src, dst: 0 if (src + 2 * dst) % 4 == 1 else 1 + (src * 5 + dst * 3) % 700
    block = lambda src, dst: (np.arange(count(src, dst)) * 7 + src * 100 + dst).astype(np.int32)
    cap = n * 710
    send, recv = win([1, cap], rwin.int32), win([1, cap], rwin.int32)
    sc = [count(ctx.rank, q) for q in range(n)]
    rc = [count(p, ctx.rank) for p in range(n)]
    for packed in (True, False):
        if packed:
            so, ro = np.cumsum([0] + sc[:-1]), np.cumsum([0] + rc[:-1])
        else:  # reversed member order, 2 elements of gap after each block
            so, ro = [0] * n, [0] * n
            at_s = at_r = 0
            for q in reversed(range(n)):
                so[q], ro[q] = at_s, at_r
                at_s += sc[q] + 2
                at_r += rc[q] + 2
        recv.numpy()[:] = -1
        for q in range(n):
            send.numpy()[0, so[q]:so[q] + sc[q]] = block(ctx.rank, q)
        if packed:
            ctx.all_to_all_v(send, np.array(sc), recv, rc)
        else:
            ctx.all_to_all_v(send, sc, recv, rc, send_offsets=so, recv_offsets=ro)
        want = np.full(cap, -1, dtype=np.int32)
        for p in range(n):
            want[ro[p]:ro[p] + rc[p]] = block(p, ctx.rank)
        assert np.array_equal(recv.numpy()[0], want), packed
    with pytest.raises(rwin.InvalidArgumentError, match="send_counts has 1 entries"):
        ctx.all_to_all_v(send, [1], recv, rc)
    with pytest.raises(rwin.InvalidArgumentError, match="both send_offsets and recv_offsets"):
        ctx.all_to_all_v(send, sc, recv, rc, send_offsets=[0] * n)


def test_team_collectives_and_windows(ctx):
    """Two disjoint teams at once (even and odd job ranks, in reverse order so team rank != job rank), each
    with windows of its own; then every rank alone in a team of one."""
    even = ctx.rank % 2 == 0
    members = [r for r in range(ctx.nranks) if (r % 2 == 0) == even][::-1]
    team = ctx.team(members)
    assert team.ranks == members and team.size == len(members) and team.rank == members.index(ctx.rank)
    buf = team.alloc_window_buffer(8 * 1024)
    x = ctx.window(buf, [1, 1024], dtype=rwin.float32)
    x.numpy()[0, :] = small_values(rwin.float32, ctx.rank, 1024)
    team.allreduce(x, op=rwin.ReduceOp.Sum, mode="ring")
    assert np.array_equal(x.numpy()[0].astype(np.float64),
                          reference(rwin.float32, rwin.ReduceOp.Sum, 1024, ctx.nranks, members=members))
    g = ctx.window(buf, [team.size, 16], dtype=rwin.int32, offset=4096)
    st = ctx.window(buf, [1, 16], dtype=rwin.int32, offset=4096 - 64)
    st.numpy()[0, :] = ctx.rank
    team.allgather(st, g)
    assert [int(v) for v in g.numpy()[:, 0]] == members
    team.barrier()
    ctx.barrier()
    ctx.free(buf)
    alone = ctx.team([ctx.rank])
    y = ctx.window(alone.alloc_window_buffer(128), [1, 16], dtype=rwin.int64)
    y.numpy()[0, :] = 5
    alone.allreduce(y, op=rwin.ReduceOp.Prod)
    assert (y.numpy() == 5).all()


def test_bad_arguments(ctx, win):
    x = win([2, 8], rwin.float32)
    with pytest.raises(rwin.InvalidArgumentError, match="whole window"):
        ctx.allreduce(x[0:1, 0:4])
    with pytest.raises(rwin.InvalidArgumentError):
        ctx.allreduce(x, mode="tree")
    with pytest.raises(rwin.Error):
        ctx.broadcast(x, root=ctx.nranks)
    with pytest.raises(rwin.InvalidArgumentError):
        ctx.team([ctx.rank, ctx.rank])


def test_mismatch_is_an_error_on_every_rank(ctx):
    """Ranks disagree on the size: every rank gets an error (CollectiveMismatch, or Timeout where a rank
    could only wait), none hangs. In a Context of its own: a failed collective degrades the context."""
    if ctx.nranks < 2:
        pytest.skip("needs 2 ranks")
    root = new_root(ctx)
    with rwin.Context(rank=ctx.rank, nranks=ctx.nranks, root=root, timeout=3) as c:
        n = 64 + (8 if c.rank == c.nranks - 1 else 0)
        x = c.window(c.alloc_window_buffer(1024), [1, n], dtype=rwin.float32)
        with pytest.raises((rwin.CollectiveMismatchError, rwin.TimeoutError, rwin.PeerFailedError)) as e:
            c.allreduce(x, mode="mesh")
        assert "allreduce" in e.value.message, e.value.message
    ctx.barrier()


def test_started_collectives(ctx, win):
    """start_* forms: several queued at once on the world and on a team, results equal to the blocking
    forms'; the context refuses other calls until they finished; errors come back from wait()."""
    n = 1003
    x, y = win([1, n], rwin.float32), win([1, n], rwin.float32)
    stage, data = win([1, 9], rwin.int32), win([ctx.nranks, 9], rwin.int32)
    x.numpy()[0, :] = small_values(rwin.float32, ctx.rank, n)
    stage.numpy()[0, :] = values(rwin.int32, ctx.rank, 9)
    # The other ranks start only once rank 0 has checked that its context is lent: they wait for a byte
    # on a socket of its own (rank 0 cannot use the lent context to tell them), so rank 0's collectives
    # are certainly still running when it checks.
    listener = socket.create_server(("127.0.0.1", 0), backlog=ctx.nranks) if ctx.rank == 0 else None
    port = from_rank0(ctx, listener.getsockname()[1] if listener else 0)
    if ctx.rank != 0:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
            assert s.recv(1) == b"g", "rank 0 closed the gate without opening it"
    reqs = [ctx.start_allreduce(x, mode="ring"), ctx.start_allgather(stage, data), ctx.start_barrier(),
            ctx.start_allreduce(x, out=y, op=rwin.ReduceOp.Max)]
    assert reqs[0].what == "allreduce on world"
    if ctx.rank == 0:
        if ctx.nranks > 1:  # alone, rank 0's collectives need nobody and may have finished
            assert not reqs[-1].test(), "the collectives finished before the other ranks started them"
            with pytest.raises(rwin.InvalidArgumentError, match="lent to a nonblocking collective"):
                ctx.barrier()
        listener.settimeout(TIMEOUT)
        with listener:
            for _ in range(ctx.nranks - 1):
                conn, _ = listener.accept()
                with conn:
                    conn.sendall(b"g")
    for r in reversed(reqs):
        r.wait()
    assert all(r.test() for r in reqs)
    total = reference(rwin.float32, rwin.ReduceOp.Sum, n, ctx.nranks)
    assert np.array_equal(x.numpy()[0].astype(np.float64), total)
    assert np.array_equal(y.numpy()[0].astype(np.float64), total)  # max of identical sums
    for r in range(ctx.nranks):
        assert np.array_equal(data.numpy()[r], values(rwin.int32, r, 9)), r
    team = ctx.team(list(range(ctx.nranks)))
    req = team.start_broadcast(x, root=ctx.nranks - 1)
    req.wait()
    assert np.array_equal(x.numpy()[0].astype(np.float64), total)
    with pytest.raises(rwin.InvalidArgumentError, match="whole window"):
        ctx.start_allreduce(x[0:1, 0:4])
    ctx.barrier()
