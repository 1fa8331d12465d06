"""rwin: one-sided RDMA windows for Python, shaped like the runtime's ``pld`` module.

    import rwin
    with rwin.Context() as ctx:               # rank/size/root from the launcher (rwinrun, mpirun, srun)
        buf = ctx.alloc_window_buffer(4096)   # collective; name optional ("buffer#0", "buffer#1", ...)
        x = ctx.window(buf, [1, 1024], dtype=rwin.float32, offset=0)   # offset in bytes
        x.numpy()[:] = ctx.rank               # zero-copy view of this rank's copy
        ctx.put(x[0:1, 0:512], peer=(ctx.rank + 1) % ctx.nranks, src=x[0:1, 512:1024])

Run under the launcher:  build/bin/rwinrun -n 2 -- /usr/bin/python3 prog.py  (PYTHONPATH=build/python).

Semantics (see README.md "Python"):
- Windows are 2-D. ``x[r0:r1, c0:c1]`` / ``x[r, c]`` make slices (offsets + shape, no copy); steps other
  than 1 raise rwin.InvalidArgumentError; negative or out-of-range indices raise rwin.OutOfBoundsError
  (which is also an IndexError). Slices of slices are relative to the slice.
- ``put``'s src and ``get``'s dst may be numpy arrays (C-contiguous, or 2-D with contiguous rows and a row
  stride; 1-D for a one-row or one-column slice): plain local memory, no copy, same dtype (bfloat16: a
  uint16 array of the bits) and shape as the window side, else DtypeMismatchError / ShapeMismatchError.
- Errors are rwin.Error subclasses per C++ ErrorCode, with ``.code`` (the code's name, "Timeout") and
  ``.message`` (the C++ text). Some also derive from the matching builtin: TimeoutError, IndexError,
  ValueError (InvalidArgument, Misaligned, ShapeMismatch, PeerOutOfRange), TypeError (DtypeMismatch).
- Blocking calls release the GIL. A Context is used by one thread at a time (calls are serialised).
- Fork: a Context made before os.fork() raises rwin.ForkedContextError (an InvalidArgumentError) in the
  child; its close() there only detaches (the parent keeps its connections). ``ctx.rank``/``nranks``
  still read there. A Context created in the child works.
- numpy views / DLPack exports of a window must not be used after ``ctx.close()`` or freeing its buffer.

Peers that meet at run time (issue 15), no launcher, no job:

    agent = rwin.Agent(listen="127.0.0.1:0"); agent.address     # progress_thread=True for a passive server
    region = agent.register(array)              # writable C-contiguous buffer (numpy), no copy
    desc = region.descriptor()                  # bytes: carry them over your own control channel
    remote = agent.import_region(desc)          # in the peer; connects on first use
    agent.put(remote, offset, array); agent.get(array, remote, offset); agent.flush()   # offsets in bytes
    agent.put_notify(remote, offset, array, signal_remote, signal_offset, value)
    agent.wait(local_signal_region, offset, expected, cmp=rwin.WaitCmp.Ge, timeout=30)  # int64 signal words

- A Region holds its array until ``region.deregister()`` (a Region collected while registered is
  deregistered first); the importers' later uses then raise UseAfterFreeError naming the region.
- Signal regions are int64 arrays (else DtypeMismatchError); signal offsets are multiples of 8
  (MisalignedError); offsets outside a region raise OutOfBoundsError; a failed peer PeerFailedError.
- Thread safety: any thread may call an Agent; calls are serialised (a wait holds the agent until it
  returns), every blocking call releases the GIL. An Agent does not cross os.fork().

A domain the caller wires up itself (issue 25; docs/EMBEDDING.md), the runtime's prepare / import /
commit seam, with the descriptors carried in the caller's own frames:

    d = rwin.Domain(domain_id, rank, nranks, window_bytes, signals=64)   # prepare (after fork)
    send(d.descriptor())                        # <= rwin.Domain.MAX_DESCRIPTOR_BYTES (256)
    d.import_table(table); d.commit()           # table: every rank's descriptor in rank order; or d.abort()
    w = d.window(numpy.float32)                 # numpy view of the local window, no copy
    d.put_notify(peer, offset, array, signal, 1); d.wait(signal, 1)
    d.fail_peer(rank, "no heartbeat")           # from the caller's health lane, any thread
    d.release()
"""
from ._rwin import (  # noqa: F401
    Agent, Domain, RemoteRegion, Region,
    AllreduceMode, AtomicType, BootstrapError, Context, DType, DtypeMismatchError, Error, ForkedContextError,
    InvalidArgumentError, MisalignedError, NotifyOp, OutOfBoundsError, PeerFailedError, PeerOutOfRangeError,
    ReduceOp, ShapeMismatchError, Slice, CollectiveMismatchError, Team, TimeoutError, TransportError, UnsupportedError, UseAfterFreeError, View,
    WaitCmp, Window, WindowBuffer, WindowMismatchError,
    bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    __version__,
)
dtypes = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
