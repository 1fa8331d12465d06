"""Every call of the Python API, every dtype, slices, numpy operands, error classes, dlpack."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import rwin
from conftest import ALL_DTYPES, small_ints, values


def nxt(ctx, k=1):
    return (ctx.rank + k) % ctx.nranks


def prv(ctx, k=1):
    return (ctx.rank + ctx.nranks - k) % ctx.nranks


# --------------------------------------------------------------------------------------------- context

def test_context_properties(ctx):
    assert 2 <= ctx.nranks <= 8 and 0 <= ctx.rank < ctx.nranks
    assert not ctx.closed and ctx.transport
    assert f"rank {ctx.rank} of {ctx.nranks}" in repr(ctx)


def test_buffer_names_are_collective_and_deterministic(ctx):
    a = ctx.alloc_window_buffer(64)
    b = ctx.alloc_window_buffer(128, name="named")
    c = ctx.alloc_window_buffer(64)
    assert a.name.startswith("buffer#") and b.name == "named" and c.name.startswith("buffer#")
    assert int(c.name[7:]) == int(a.name[7:]) + 2  # a named buffer takes a number too
    assert (a.nbytes, b.nbytes) == (64, 128) and a.valid
    for x in (a, b, c):
        ctx.free(x)
    assert not a.valid and "freed" in repr(a)


# --------------------------------------------------------------------------------------------- views

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_numpy_view_is_zero_copy(ctx, dtype):
    buf = ctx.alloc_window_buffer(4096)
    x = ctx.window(buf, [3, 5], dtype=dtype, offset=8 * dtype.itemsize)
    a = x.numpy()
    want = np.uint16 if dtype == rwin.bfloat16 else np.dtype(dtype.name)
    assert a.dtype == want and a.shape == (3, 5) and x.shape == (3, 5) and x.dtype == dtype
    assert x.offset == 8 * dtype.itemsize and x.nbytes == 15 * dtype.itemsize
    a[1, 2] = 7
    b = ctx.window(buf, [1, 64], dtype=dtype)  # another view of the same bytes
    assert b.numpy()[0, 8 + 5 + 2] == 7
    assert np.asarray(x)[1, 2] == 7  # __array__
    ctx.free(buf)


def test_numpy_dtypes_and_names_are_accepted(ctx):
    buf = ctx.alloc_window_buffer(256)
    for spec, want in [(np.float32, rwin.float32), (np.dtype("int16"), rwin.int16), ("uint8", rwin.uint8),
                       ("bf16", rwin.bfloat16), ("float16", rwin.float16), (np.float64, rwin.float64)]:
        assert ctx.window(buf, [1, 4], dtype=spec).dtype == want
    with pytest.raises(rwin.DtypeMismatchError):
        ctx.window(buf, [1, 4], dtype=np.complex64)
    with pytest.raises(rwin.InvalidArgumentError):
        ctx.window(buf, [1, 4], dtype="no-such-type")
    ctx.free(buf)


def test_slices(ctx, win):
    x = win([4, 10], rwin.int32)
    x.numpy()[:] = np.arange(40).reshape(4, 10)
    s = x[1:3, 2:7]
    assert isinstance(s, rwin.Slice) and s.offsets == (1, 2) and s.shape == (2, 5)
    assert (s.numpy() == np.arange(40).reshape(4, 10)[1:3, 2:7]).all()
    assert x[2].shape == (1, 10) and x[2].offsets == (2, 0)
    assert x[1, 3].shape == (1, 1) and x[1, 3].numpy()[0, 0] == 13
    assert x[:, 4:].shape == (4, 6) and x[:].shape == (4, 10)
    assert s[1, 1:3].offsets == (2, 3)  # slices of slices are relative
    assert x[0:0, :].shape == (0, 10)  # empty: allowed (a no-op in put/get)
    for bad in [(slice(0, 5),), (slice(None), slice(0, 11)), (4,), (slice(-1, None),), (-1, 0), (slice(3, 2),)]:
        with pytest.raises(rwin.OutOfBoundsError) as e:
            x[bad]
        assert isinstance(e.value, IndexError) and e.value.code == "OutOfBounds"
    with pytest.raises(rwin.InvalidArgumentError, match="step"):
        x[0:4:2]
    with pytest.raises(rwin.InvalidArgumentError):
        x[0, 0, 0]
    with pytest.raises(rwin.OutOfBoundsError):
        s[0:3]


def test_window_checks(ctx):
    buf = ctx.alloc_window_buffer(64)
    with pytest.raises(rwin.MisalignedError) as e:
        ctx.window(buf, [1, 2], dtype=rwin.float32, offset=2)
    assert e.value.code == "Misaligned" and "rwin" in e.value.message
    with pytest.raises(rwin.OutOfBoundsError):
        ctx.window(buf, [1, 9], dtype=rwin.float64)
    with pytest.raises(rwin.InvalidArgumentError):
        ctx.window(buf, [8], dtype=rwin.float64)
    ctx.free(buf)


# --------------------------------------------------------------------------------------------- transfers

@pytest.mark.parametrize("mode", ["put", "get"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_ring_every_dtype(ctx, win, dtype, mode):
    """The seed's ring step on window views and slices of them, every dtype."""
    n = 1037
    src, dst = win([1, n], dtype), win([2, n], dtype)
    sig = win([ctx.nranks, 1], rwin.int32)
    src.numpy()[0] = values(dtype, ctx.rank, n)
    if mode == "put":
        ctx.put(dst[1:2, :], peer=nxt(ctx), src=src, atomic=rwin.AtomicType.None_)
        ctx.notify(sig, peer=nxt(ctx), offsets=[0, 0], value=1, op=rwin.NotifyOp.AtomicAdd)
        ctx.wait(sig, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Ge)
        want = values(dtype, prv(ctx), n)
    else:
        ctx.notify(sig, peer=prv(ctx), offsets=[0, 0], value=1, op=rwin.NotifyOp.AtomicAdd)
        ctx.wait(sig, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Ge)
        ctx.get(dst[1:2, :], peer=nxt(ctx), src=src)
        want = values(dtype, nxt(ctx), n)
    assert (dst.numpy()[1] == want).all()
    assert (dst.numpy()[0] == 0).all()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_put_add_every_dtype(ctx, win, dtype):
    """Every rank adds (r+1)*k into every rank's [1, 7] (an odd width: partial 8-byte words)."""
    k = np.arange(7) % 3 + 1
    src, dst = win([1, 7], dtype), win([2, 7], dtype)
    src.numpy()[0] = small_ints(dtype, (ctx.rank + 1) * k)
    for p in range(ctx.nranks):
        ctx.put(dst[1:2, :], peer=p, src=src, atomic=rwin.AtomicType.Add)
    ctx.barrier()
    tot = ctx.nranks * (ctx.nranks + 1) // 2
    assert (dst.numpy()[1] == small_ints(dtype, tot * k)).all()
    assert (dst.numpy()[0] == 0).all()


def test_put_add_from_numpy(ctx, win):
    dst = win([1, 5], rwin.int64)
    ctx.put(dst, peer=nxt(ctx), src=np.full(5, 3, np.int64), atomic=rwin.AtomicType.Add)
    ctx.barrier()
    assert (dst.numpy() == 3).all()


def test_strided_slices(ctx, win):
    x = win([6, 9], rwin.float64)
    y = win([6, 9], rwin.float64)
    x.numpy()[:] = np.arange(54).reshape(6, 9) + 100 * ctx.rank
    ctx.put(y[1:5, 2:6], peer=nxt(ctx), src=x[2:6, 0:4])
    ctx.barrier()
    want = np.zeros((6, 9))
    want[1:5, 2:6] = (np.arange(54).reshape(6, 9) + 100 * prv(ctx))[2:6, 0:4]
    assert (y.numpy() == want).all()
    z = win([4, 4], rwin.float64)
    ctx.get(z, peer=nxt(ctx), src=x[0:4, 5:9])
    assert (z.numpy() == (np.arange(54).reshape(6, 9) + 100 * nxt(ctx))[0:4, 5:9]).all()


def test_empty_slices_are_noops(ctx, win):
    x = win([2, 4], rwin.int32)
    ctx.put(x[0:0, :], peer=nxt(ctx), src=x[1:1, :])
    ctx.get(x[:, 4:4], peer=nxt(ctx), src=x[:, 0:0])
    ctx.wait(x[0:0, :], expected=1)
    assert ctx.test(x[0:0, :], expected=1)


def test_nbi_fence_quiet(ctx, win):
    src, dst = win([1, 300], rwin.float32), win([1, 300], rwin.float32)
    sig = win([1, 2], rwin.int64)
    src.numpy()[:] = ctx.rank + 0.5
    ctx.put_nbi(dst, peer=nxt(ctx), src=src)
    ctx.fence(nxt(ctx))
    ctx.notify(sig, peer=nxt(ctx), offsets=[0, 1], value=1)
    ctx.wait(sig, offsets=[0, 1], expected=1)
    assert (dst.numpy() == prv(ctx) + 0.5).all()
    ctx.barrier()
    got = win([1, 300], rwin.float32)
    ctx.get_nbi(got, peer=nxt(ctx), src=src)
    ctx.quiet()
    assert (got.numpy() == nxt(ctx) + 0.5).all()


# --------------------------------------------------------------------------------------------- signals

def test_notify_set_and_add_on_int32_and_int64(ctx, win):
    s32 = win([ctx.nranks, 1], rwin.int32)
    s64 = win([ctx.nranks, 2], rwin.int64)
    for p in range(ctx.nranks):
        ctx.notify(s32, peer=p, offsets=[ctx.rank, 0], value=100 + ctx.rank, op=rwin.NotifyOp.Set)
        ctx.notify(s64, peer=p, offsets=[ctx.rank, 1], value=2, op=rwin.NotifyOp.AtomicAdd)
        ctx.notify(s64[0:1, 0:1], peer=p, value=5)  # a one-element slice, default AtomicAdd
    for r in range(ctx.nranks):
        ctx.wait(s32, offsets=[r, 0], expected=100 + r, cmp=rwin.WaitCmp.Eq)
        ctx.wait(s64, offsets=[r, 1], expected=2, cmp=rwin.WaitCmp.Eq, timeout=10.0)
    ctx.wait(s64[0:1, 0:1], expected=5 * ctx.nranks, cmp=rwin.WaitCmp.Eq)
    ctx.wait(s32, expected=100, cmp=rwin.WaitCmp.Ge)  # default offsets [0, 0]
    ctx.wait(s32[:, 0:1], expected=100, cmp=rwin.WaitCmp.Ge)  # every element of a slice
    assert (s32.numpy()[:, 0] == 100 + np.arange(ctx.nranks)).all()


def test_wait_and_test_every_cmp(ctx, win):
    s = win([1, 2], rwin.int32)
    assert not ctx.test(s, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Ge)
    s.numpy()[0, 1] = 5
    W = rwin.WaitCmp
    for cmp, true_for, false_for in [(W.Eq, 5, 4), (W.Ne, 4, 5), (W.Gt, 4, 5), (W.Ge, 5, 6), (W.Lt, 6, 5), (W.Le, 5, 4)]:
        assert ctx.test(s, offsets=[0, 1], expected=true_for, cmp=cmp), cmp
        assert not ctx.test(s, offsets=[0, 1], expected=false_for, cmp=cmp), cmp
        ctx.wait(s, offsets=[0, 1], expected=true_for, cmp=cmp, timeout=1)
        assert ctx.test(s[0:1, 1:2], expected=true_for, cmp=cmp)


def test_test_sees_a_remote_notify(ctx, win):
    s = win([1, 1], rwin.int64)
    ctx.notify(s, peer=nxt(ctx), offsets=[0, 0], value=1)
    while not ctx.test(s, offsets=[0, 0], expected=1, cmp=rwin.WaitCmp.Ge):
        pass
    assert s.numpy()[0, 0] == 1


# --------------------------------------------------------------------------------------------- numpy operands

def test_numpy_src_and_dst(ctx, win):
    x = win([4, 8], rwin.float32)
    mine = np.arange(32, dtype=np.float32).reshape(4, 8) + 1000 * ctx.rank
    ctx.put(x, peer=nxt(ctx), src=mine)  # 2-D C-contiguous
    ctx.barrier()
    assert (x.numpy() == mine - 1000 * ctx.rank + 1000 * prv(ctx)).all()
    ctx.barrier()  # everybody checked before anybody writes again
    row = np.arange(8, dtype=np.float32) - ctx.rank
    ctx.put(x[2, :], peer=nxt(ctx), src=row)  # 1-D into a row
    col = np.full(4, 7 + ctx.rank, np.float32)
    ctx.put(x[:, 5:6], peer=nxt(ctx), src=col)  # 1-D into a column
    ctx.barrier()
    assert (x.numpy()[2, [0, 1, 2, 3, 4, 6, 7]] == (np.arange(8) - prv(ctx))[[0, 1, 2, 3, 4, 6, 7]]).all()
    assert (x.numpy()[:, 5] == 7 + prv(ctx)).all()
    ctx.barrier()
    big = np.zeros((5, 12), np.float32)
    ctx.get(big[1:4, 2:7], peer=nxt(ctx), src=x[0:3, 0:5])  # 2-D with a row stride
    want = np.zeros((5, 12), np.float32)
    got = np.empty((3, 5), np.float32)
    ctx.get(got, peer=nxt(ctx), src=x[0:3, 0:5])
    want[1:4, 2:7] = got
    assert (big == want).all()
    ctx.barrier()
    strided_src = np.arange(60, dtype=np.float32).reshape(5, 12)[0:4:1, 3:11]
    ctx.put(x, peer=nxt(ctx), src=strided_src)
    ctx.barrier()
    assert (x.numpy() == strided_src).all()


def test_numpy_bfloat16_as_uint16(ctx, win):
    x = win([1, 6], rwin.bfloat16)
    bits = small_ints(rwin.bfloat16, np.arange(6) + ctx.rank)
    ctx.put(x, peer=nxt(ctx), src=bits)
    ctx.barrier()
    assert (x.numpy()[0] == small_ints(rwin.bfloat16, np.arange(6) + prv(ctx))).all()


def test_numpy_operand_errors(ctx, win):
    x = win([2, 4], rwin.float32)
    with pytest.raises(rwin.DtypeMismatchError, match="float64"):
        ctx.put(x, peer=nxt(ctx), src=np.zeros((2, 4)))
    with pytest.raises(rwin.ShapeMismatchError, match=r"\[2x3\]"):
        ctx.put(x, peer=nxt(ctx), src=np.zeros((2, 3), np.float32))
    with pytest.raises(rwin.ShapeMismatchError):
        ctx.put(x, peer=nxt(ctx), src=np.zeros((2, 2, 2), np.float32))
    with pytest.raises(rwin.InvalidArgumentError, match="contiguous"):
        ctx.put(x, peer=nxt(ctx), src=np.zeros((2, 8), np.float32)[:, ::2])
    ro = np.zeros((2, 4), np.float32)
    ro.flags.writeable = False
    ctx.put(x, peer=nxt(ctx), src=ro)  # read-only is fine as a source
    with pytest.raises(rwin.InvalidArgumentError, match="read-only"):
        ctx.get(ro, peer=nxt(ctx), src=x)
    with pytest.raises(rwin.InvalidArgumentError, match="list"):
        ctx.put(x, peer=nxt(ctx), src=[1.0] * 8)
    with pytest.raises(rwin.InvalidArgumentError, match="dst"):
        ctx.put(np.zeros((2, 4), np.float32), peer=nxt(ctx), src=x)
    with pytest.raises(rwin.InvalidArgumentError, match="src"):
        ctx.get(np.zeros((2, 4), np.float32), peer=nxt(ctx), src=np.zeros((2, 4), np.float32))


def test_numpy_nbi_operands_kept_alive_until_quiet(ctx, win):
    x = win([1, 1000], rwin.int32)
    a = np.arange(1000, dtype=np.int32) + ctx.rank
    ref = weakref.ref(a)
    ctx.put_nbi(x, peer=nxt(ctx), src=a)
    del a
    gc.collect()
    assert ref() is not None  # held by the context until completion
    ctx.quiet()
    gc.collect()
    assert ref() is None
    ctx.barrier()
    assert (x.numpy()[0] == np.arange(1000) + prv(ctx)).all()
    out = np.zeros(1000, np.int32)
    ctx.get_nbi(out, peer=nxt(ctx), src=x)
    ctx.fence(nxt(ctx))
    assert (out == np.arange(1000) + ctx.rank).all()


# --------------------------------------------------------------------------------------------- errors

ERROR_CLASSES = {
    "InvalidArgument": rwin.InvalidArgumentError, "PeerOutOfRange": rwin.PeerOutOfRangeError,
    "OutOfBounds": rwin.OutOfBoundsError, "ShapeMismatch": rwin.ShapeMismatchError,
    "DtypeMismatch": rwin.DtypeMismatchError, "Misaligned": rwin.MisalignedError,
    "WindowMismatch": rwin.WindowMismatchError, "UseAfterFree": rwin.UseAfterFreeError,
    "Timeout": rwin.TimeoutError, "PeerFailed": rwin.PeerFailedError, "Transport": rwin.TransportError,
    "Bootstrap": rwin.BootstrapError, "Unsupported": rwin.UnsupportedError,
    "CollectiveMismatch": rwin.CollectiveMismatchError,
}


def test_error_hierarchy():
    for code, cls in ERROR_CLASSES.items():
        assert issubclass(cls, rwin.Error) and cls.__name__ == code + "Error" and cls.__module__ == "rwin"
    assert issubclass(rwin.TimeoutError, TimeoutError) and issubclass(rwin.OutOfBoundsError, IndexError)
    assert issubclass(rwin.ForkedContextError, rwin.InvalidArgumentError) and issubclass(rwin.Error, RuntimeError)


def raises(cls, fn, *args, **kw):
    with pytest.raises(cls) as e:
        fn(*args, **kw)
    code = [c for c, k in ERROR_CLASSES.items() if k is cls][0]
    assert e.value.code == code and e.value.message and str(e.value) == e.value.message
    return e.value


def test_errors_from_calls(ctx, win):
    x = win([2, 4], rwin.float32)
    i = win([2, 4], rwin.int32)
    raises(rwin.PeerOutOfRangeError, ctx.put, x, peer=ctx.nranks, src=x)
    raises(rwin.PeerOutOfRangeError, ctx.notify, i, peer=-1, offsets=[0, 0], value=1)
    raises(rwin.ShapeMismatchError, ctx.put, x[0:1, :], peer=nxt(ctx), src=x)
    raises(rwin.DtypeMismatchError, ctx.put, x, peer=nxt(ctx), src=i)
    raises(rwin.DtypeMismatchError, ctx.notify, x, peer=nxt(ctx), offsets=[0, 0], value=1)
    raises(rwin.OutOfBoundsError, ctx.notify, i, peer=nxt(ctx), offsets=[2, 0], value=1)
    raises(rwin.InvalidArgumentError, ctx.notify, i, peer=nxt(ctx), offsets=[0, 0], value=2**40)
    raises(rwin.InvalidArgumentError, ctx.wait, i, offsets=[0, 0], expected=0, timeout=-1)
    raises(rwin.InvalidArgumentError, ctx.notify, i[0:1, 0:2], peer=nxt(ctx), value=1)
    e = raises(rwin.WindowMismatchError, ctx.alloc_window_buffer, 64 + 8 * ctx.rank)
    assert "bytes" in e.message
    buf = ctx.alloc_window_buffer(64)
    w = ctx.window(buf, [2, 8], dtype=rwin.int32)
    ctx.free(buf)
    raises(rwin.UseAfterFreeError, w.numpy)
    raises(rwin.UseAfterFreeError, ctx.put, w, peer=nxt(ctx), src=w)
    raises(rwin.UseAfterFreeError, ctx.window, buf, [1, 1], dtype=rwin.int32)


# --------------------------------------------------------------------------------------------- dlpack

class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def capsule_tensor(cap):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return DLTensor.from_address(get(cap, b"dltensor"))


def test_dlpack_numpy_views_without_copy(ctx, win):
    x = win([3, 4], rwin.float32)
    assert x.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(x)
    assert a.shape == (3, 4) and a.dtype == np.float32
    # numpy 1.x marks DLPack imports read-only (the legacy capsule has no flag for it): write through
    # the window's own view and read through the import.
    x.numpy()[2, 3] = 42.0
    assert a[2, 3] == 42.0 and np.shares_memory(a, x.numpy())
    s = np.from_dlpack(x[1:3, 1:3])
    assert s.shape == (2, 2) and s[1, 1] == 0 and s.strides == (16, 4)
    x.numpy()[2, 2] = 5.0
    assert s[1, 1] == 5.0
    with pytest.raises(BufferError):
        x.__dlpack__(copy=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_dlpack_capsule_fields(ctx, win, dtype):
    x = win([2, 3], dtype)
    cap = x.__dlpack__()
    t = capsule_tensor(cap)
    code = {"f": 2, "i": 0, "u": 1}[dtype.name[0]] if dtype != rwin.bfloat16 else 4
    assert (t.code, t.bits, t.lanes, t.ndim, t.device_type) == (code, 8 * dtype.itemsize, 1, 2, 1)
    assert t.data == x.numpy().ctypes.data and (t.shape[0], t.shape[1]) == (2, 3) and (t.strides[0], t.strides[1]) == (3, 1)
    del cap  # never consumed: the capsule's destructor frees it (and drops its window reference)
    gc.collect()


def test_dlpack_keeps_the_window_object_alive(ctx, win):
    buf = ctx.alloc_window_buffer(64)
    x = ctx.window(buf, [1, 16], dtype=rwin.int32)
    x.numpy()[0, 3] = 9
    ref = weakref.ref(x) if hasattr(x, "__weakref__") else None
    a = np.from_dlpack(x)
    del x
    gc.collect()
    assert a[0, 3] == 9
    del a
    gc.collect()
    if ref is not None:
        assert ref() is None
    ctx.free(buf)


def test_torch_from_dlpack_if_installed(ctx, win):
    torch = pytest.importorskip("torch")
    x = win([2, 2], rwin.float32)
    t = torch.from_dlpack(x)
    t[0, 0] = 3.0
    assert x.numpy()[0, 0] == 3.0


def test_fetching_atomics_ticket_dispenser_and_every_type(ctx, win):
    """Issue 25: fetch_add tickets from rank 0 (each handed out once), and every op on every integer type."""
    counter = win([1, 1], rwin.int64)
    owner = win([1, 20 * ctx.nranks], rwin.int64)  # rank 0's slot t: rank + 1 of who got ticket t
    me = np.array([[ctx.rank + 1]], np.int64)
    ctx.barrier()
    for _ in range(20):
        t = ctx.fetch_add(counter, peer=0, value=1)
        assert 0 <= t < 20 * ctx.nranks
        ctx.put(owner[0:1, t:t + 1], 0, me)
    ctx.quiet()
    ctx.barrier()
    if ctx.rank == 0:
        assert counter.numpy()[0, 0] == 20 * ctx.nranks
        # A ticket handed out twice would leave another slot empty.
        assert sorted(np.bincount(owner.numpy()[0], minlength=ctx.nranks + 1)[1:]) == [20] * ctx.nranks, owner.numpy()
    right = (ctx.rank + 1) % ctx.nranks
    for dt, edge, add, wrapped in [(rwin.int32, -2**31, -1, 2**31 - 1), (rwin.int64, -2**63, -1, 2**63 - 1),
                                   (rwin.uint32, 2**32 - 1, 1, 0), (rwin.uint64, -1, 1, 0)]:
        w = win([1, 2], dt)
        ctx.barrier()
        assert ctx.swap(w, peer=right, value=edge, offsets=[0, 1]) == 0
        assert ctx.atomic_fetch(w[0:1, 1:2], peer=right) == edge
        assert ctx.fetch_add(w, peer=right, value=add, offsets=[0, 1]) == edge
        assert ctx.compare_swap(w, peer=right, expected=123, desired=7, offsets=[0, 1]) == wrapped
        assert ctx.compare_swap(w[0:1, 1:2], peer=right, expected=wrapped, desired=42) == wrapped
        ctx.barrier()
        assert int(w.numpy()[0, 1]) == 42 and int(w.numpy()[0, 0]) == 0
    f = win([1, 1], rwin.float32)
    with pytest.raises(rwin.DtypeMismatchError):
        ctx.fetch_add(f, peer=right, value=1)
    i = win([1, 2], rwin.int32)
    with pytest.raises(rwin.InvalidArgumentError):
        ctx.swap(i, peer=right, value=2**31, offsets=[0, 0])


def test_fetching_atomics_nbi(ctx, win):
    """Issue 25: the _nbi forms write each old value into its own element of a numpy int64 array by quiet():
    tickets from one counter at rank 0 (int64 and both int32 lanes of one word), every ticket once; ops to
    every peer in flight at once; refused inputs raise before anything is posted."""
    k = 40
    c64 = win([1, 1], rwin.int64)
    c32 = win([1, 2], rwin.int32)
    owner = win([3, k * ctx.nranks], rwin.int64)
    w = win([1, ctx.nranks], rwin.uint32)
    # Made here, not after the fence below: allocation waits in the store without progressing the
    # transport, and over tcp a peer's fence towards this rank needs this rank's progress.
    f = win([1, 1], rwin.float32)
    me = np.array([[ctx.rank + 1]], np.int64)
    ctx.barrier()
    got = np.full(3 * k, -1, np.int64)
    for i in range(k):
        ctx.fetch_add_nbi(got, c64, 0, 1, fetch_index=i)
        ctx.fetch_add_nbi(got, c32, 0, 1, offsets=[0, 0], fetch_index=k + i)
        ctx.fetch_add_nbi(got, c32[0:1, 1:2], 0, 1, fetch_index=2 * k + i)
    ctx.fetch_add_nbi(np.zeros(1, np.int64), c64, 0, 0)  # a temporary: the binding keeps it until quiet
    ctx.quiet()
    total = k * ctx.nranks
    for r in range(3):
        t = got[r * k:(r + 1) * k]
        assert ((t >= 0) & (t < total)).all(), (r, t)
        for x in t:
            ctx.put(owner[r:r + 1, int(x):int(x) + 1], 0, me)
    ctx.barrier()
    if ctx.rank == 0:
        assert c64.numpy()[0, 0] == total and list(c32.numpy()[0]) == [total, total]
        for r in range(3):  # every slot filled by someone: each ticket was handed out once
            assert sorted(np.bincount(owner.numpy()[r], minlength=ctx.nranks + 1)[1:]) == [k] * ctx.nranks, owner.numpy()
    ctx.barrier()
    # Every peer at once, each op its own old value: element `rank` of peer p's window holds 1000 * p + rank.
    w.numpy()[0] = [1000 * ctx.rank + j for j in range(ctx.nranks)]
    ctx.barrier()
    old = np.full((2, ctx.nranks), -1, np.int64)
    for p in range(ctx.nranks):
        ctx.swap_nbi(old, w, p, 7, offsets=[0, ctx.rank], fetch_index=p)
        ctx.compare_swap_nbi(old, w[0:1, ctx.rank:ctx.rank + 1], p, 7, 9, fetch_index=ctx.nranks + p)
    ctx.quiet()
    # A swap and a compare_swap on one element are unordered: the CAS saw 7 (after the swap) or the first value.
    for p in range(ctx.nranks):
        first = 1000 * p + ctx.rank
        assert (old[0, p], old[1, p]) in [(first, 7), (first, first)], old
    right = (ctx.rank + 1) % ctx.nranks
    one = np.zeros(1, np.int64)
    ctx.atomic_fetch_nbi(one, w, right, offsets=[0, ctx.rank])
    ctx.fence(right)  # completes what went to that peer
    assert one[0] in (7, 9)
    with pytest.raises(rwin.DtypeMismatchError, match="int64 expected"):
        ctx.fetch_add_nbi(np.zeros(2, np.int32), c64, right, 1)
    with pytest.raises(rwin.OutOfBoundsError, match="fetch_index 2"):
        ctx.fetch_add_nbi(np.zeros(2, np.int64), c64, right, 1, fetch_index=2)
    with pytest.raises(rwin.InvalidArgumentError, match="C-contiguous"):
        ctx.fetch_add_nbi(np.zeros((4, 4), np.int64)[:, 1], c64, right, 1)
    with pytest.raises(rwin.InvalidArgumentError, match="numpy int64 array"):
        ctx.fetch_add_nbi([0], c64, right, 1)
    with pytest.raises(rwin.DtypeMismatchError, match="fetch_add_nbi"):
        ctx.fetch_add_nbi(np.zeros(1, np.int64), f, right, 1)
    with pytest.raises(rwin.InvalidArgumentError, match="does not fit"):
        ctx.swap_nbi(np.zeros(1, np.int64), c32, right, 2**31)
    ctx.quiet()
    ctx.barrier()
    if ctx.rank == 0:
        assert c64.numpy()[0, 0] == total  # the refused calls changed nothing
    assert "quiet()" in rwin.Context.fetch_add_nbi.__doc__


# --------------------------------------------------------------------------------------------- counters

def test_stats_count_a_ring_step(ctx, win):
    """ctx.stats(): a put and a notify to the next rank and one wait, counted exactly (issue 28)."""
    n = 1037
    src, dst = win([1, n], rwin.float32), win([1, n], rwin.float32)
    sig = win([1, 1], rwin.int64)
    ctx.barrier()
    before = ctx.stats()
    assert len(before["peers"]) == ctx.nranks and before["failed_peers"] == 0
    ctx.put(dst, peer=nxt(ctx), src=src)
    ctx.notify(sig, peer=nxt(ctx), offsets=[0, 0], value=1)
    ctx.wait(sig, offsets=[0, 0], expected=1)
    after = ctx.stats()
    mine, was = after["peers"][nxt(ctx)], before["peers"][nxt(ctx)]
    assert mine["puts"] - was["puts"] == 1 and mine["put_bytes"] - was["put_bytes"] == n * 4
    assert mine["notifies"] - was["notifies"] == 1 and mine["gets"] == was["gets"]
    assert after["total"]["puts"] - before["total"]["puts"] == 1
    assert after["waits"] - before["waits"] == 1
    assert after["waits_blocked"] - before["waits_blocked"] in (0, 1)
    assert (after["wait_ns"] > before["wait_ns"]) == (after["waits_blocked"] > before["waits_blocked"])
