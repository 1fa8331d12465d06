"""The GIL released while blocked, fork behaviour, and errors only a second Context can provoke."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rwin
from conftest import new_root, reserve_port


def test_gil_released_while_waiting(ctx, win):
    """Rank 0 waits for a notify rank 1 sends after 0.5 s; a Python thread on rank 0 counts meanwhile."""
    sig = win([1, 1], rwin.int32)
    if ctx.rank == 0:
        count, stop = [0], [False]

        def spin():
            while not stop[0]:
                count[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.05)
        before = count[0]
        t0 = time.monotonic()
        ctx.wait(sig, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Ge, timeout=20)
        waited = time.monotonic() - t0
        during = count[0] - before
        stop[0] = True
        t.join()
        assert waited > 0.3, waited
        assert during > 10000, f"the counting thread ran only {during} times during a {waited:.2f} s wait"
    elif ctx.rank == 1:
        time.sleep(0.5)
        ctx.notify(sig, peer=0, offsets=[0, 0], value=1)


def test_gil_released_in_a_waiting_thread(ctx, win):
    """Rank 0 waits in a thread; its main thread keeps computing meanwhile, then makes a call of its own,
    which waits its turn (calls on one Context are serialised) and sees the notify rank 1 sent after 1 s."""
    sig = win([1, 1], rwin.int64)
    if ctx.rank == 0:
        done = []
        t = threading.Thread(target=lambda: done.append(ctx.wait(sig, offsets=[0, 0], expected=1, timeout=20)))
        t.start()
        t0 = time.monotonic()
        n = sum(i for i in range(300000))  # pure Python while the other thread is blocked in C++
        assert n > 0 and not done and time.monotonic() - t0 < 0.9
        assert ctx.test(sig, offsets=[0, 0], expected=1)  # runs once the wait has returned
        t.join(20)
        assert done == [None]
    elif ctx.rank == 1:
        time.sleep(1.0)
        ctx.notify(sig, peer=0, offsets=[0, 0], value=1)


def run_in_child(fn):
    """Runs fn() in a forked child, which exits with fn's return value (an int); returns the exit code."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        except BaseException as e:  # noqa: BLE001 - report anything, never return into pytest
            os.write(2, f"child {os.getpid()}: {type(e).__name__}: {e}\n".encode())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_parent_context_in_forked_child_raises_and_parent_keeps_working(ctx, win):
    x = win([1, 4], rwin.float32)
    parent = os.getpid()

    def child():
        try:
            ctx.barrier()
            return 1
        except rwin.ForkedContextError as e:
            assert isinstance(e, rwin.InvalidArgumentError) and e.code == "InvalidArgument"
            assert str(parent) in e.message and str(os.getpid()) in e.message, e.message
        for call in (lambda: ctx.put(x, peer=0, src=x), lambda: ctx.quiet(),
                     lambda: ctx.wait(x, expected=0), lambda: ctx.alloc_window_buffer(8)):
            try:
                call()
                return 2
            except rwin.ForkedContextError:
                pass
        assert ctx.rank >= 0  # plain attributes still read
        ctx.close()  # detaches only: the parent's connections stay up
        del ctx_ref[:]
        return 0

    ctx_ref = [ctx]
    assert run_in_child(child) == 0
    # The parent's context is intact: a ring put + barrier still work.
    ctx.put(x, peer=(ctx.rank + 1) % ctx.nranks, src=np.full((1, 4), ctx.rank, np.float32))
    ctx.barrier()
    assert (x.numpy() == (ctx.rank + ctx.nranks - 1) % ctx.nranks).all()


def test_context_created_in_forked_child_works(ctx):
    """The runtime's pattern: a process that imported rwin but has no open Context forks a worker, which
    creates one. Here every rank starts such a process (fork_worker.py); the workers form a job of their
    own, run a ring step, and the last one leaves abruptly: the others see rwin.PeerFailedError."""
    root = new_root(ctx)
    helper = os.path.join(os.path.dirname(__file__), "fork_worker.py")
    p = subprocess.run([sys.executable, helper, root, str(ctx.rank), str(ctx.nranks)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]


def test_no_context_in_a_child_forked_with_an_open_one(ctx):
    """A child of a process with an open Context cannot make one (UCX's process state does not survive
    fork): a clear UnsupportedError at once instead of a hang in wire-up."""

    def child():
        try:
            rwin.Context(rank=0, nranks=1)
            return 1
        except rwin.UnsupportedError as e:
            assert "fork" in e.message and str(os.getpid()) in e.message, e.message
            return 0

    assert run_in_child(child) == 0


def test_timeout_error(ctx):
    """In a second Context (a timed-out one is degraded: it leaves its job as failed when closed), rank 0
    waits for a notify nobody sends; the others wait on the main context for it to finish."""
    root = new_root(ctx)
    with rwin.Context(rank=ctx.rank, nranks=ctx.nranks, root=root, timeout=20) as c:
        s = c.window(c.alloc_window_buffer(8), [1, 1], dtype=rwin.int64)
        if ctx.rank == 0:
            t0 = time.monotonic()
            with pytest.raises(rwin.TimeoutError) as e:
                c.wait(s, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Eq, timeout=0.2)
            assert 0.15 < time.monotonic() - t0 < 5
            assert isinstance(e.value, TimeoutError) and e.value.code == "Timeout"
            assert "expected value == 1" in e.value.message, e.value.message
        ctx.barrier()


def test_start_up_errors():
    """Each rank alone: no store to connect to (Bootstrap), a job whose rank 1 never arrives (Timeout,
    naming it), an unknown transport (Transport)."""
    with pytest.raises(rwin.BootstrapError) as e:
        rwin.Context(rank=1, nranks=2, root=f"127.0.0.1:{reserve_port()}", startup_timeout=0.5)
    assert e.value.code == "Bootstrap" and "connect" in e.value.message
    with pytest.raises(rwin.TimeoutError) as e:
        rwin.Context(rank=0, nranks=2, root=f"127.0.0.1:{reserve_port()}", startup_timeout=0.5)
    assert "rank 1" in e.value.message and "never arrived" in e.value.message
    with pytest.raises(rwin.TransportError, match="bogus"):
        rwin.Context(rank=0, nranks=1, root=f"127.0.0.1:{reserve_port()}", transport="bogus")
    with pytest.raises(rwin.InvalidArgumentError):
        rwin.Context(timeout=-1)


def test_closed_context(ctx):
    root = new_root(ctx)
    c = rwin.Context(rank=ctx.rank, nranks=ctx.nranks, root=root)
    assert not c.closed
    c.close()
    c.close()  # idempotent
    assert c.closed and "closed" in repr(c)
    with pytest.raises(rwin.UseAfterFreeError, match="closed"):
        c.barrier()
