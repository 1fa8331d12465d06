"""rwin.Agent (issue 15): peers that meet at run time, between independent processes.

Not part of the SPMD suite (conftest.py leaves this file out under rwinrun): run it directly,
    PYTHONPATH=build/python UCX_TLS=tcp UCX_NET_DEVICES=lo /usr/bin/python3 -m pytest tests/python/test_agent.py
(tests/scripts/python_agent.sh runs it over UCX tcp and shared memory). This process is one agent; the
others are tests/python/agent_worker.py subprocesses (fresh interpreters, no fork) driven over pipes, with
descriptors carried as hex in the JSON lines. The UCX transport is the environment's (UCX_TLS), inherited
by the workers. AGENT_TEST_TRANSPORT=verbs (as tests/agent/ reads it) runs every agent of the file, this
one and the workers, over verbs instead (tests/rxe/guest-suite.sh, on the guest's soft-RoCE device; the
first usable device unless AGENT_TEST_IB_DEVICE names one).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rwin

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from agent_worker import pattern, sha  # noqa: E402

# Deadlines only (nothing is timed): a hung call fails the test instead of hanging it. Every process
# spends most of its time outside rwin (reading its pipe, waiting for a worker's reply), so its agent
# needs the progress thread to answer handshakes, gets and puts; test_active_peer_* runs without one.
OPTS = dict(op_timeout=15.0, connect_timeout=10.0, keepalive_interval=0.2, keepalive_timeout=2.0,
            progress_thread=True)
if os.environ.get("AGENT_TEST_TRANSPORT"):
    OPTS["transport"] = os.environ["AGENT_TEST_TRANSPORT"]
if os.environ.get("AGENT_TEST_IB_DEVICE"):
    OPTS["ib_device"] = os.environ["AGENT_TEST_IB_DEVICE"]


@pytest.fixture(autouse=True)
def _in_step():
    """Overrides conftest's SPMD barrier: these tests are not collective."""
    yield


class WorkerError(Exception):
    def __init__(self, cls, msg):
        super().__init__(f"{cls}: {msg}")
        self.cls, self.msg = cls, msg


class Worker:
    """An agent_worker.py process; call(op, **args) -> its reply (raises WorkerError for an rwin error)."""

    def __init__(self, **agent_kw):
        kw = dict(OPTS, **agent_kw)
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "agent_worker.py"), json.dumps(kw)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        hello = self.recv()
        self.address, self.pid = hello["address"], hello["pid"]

    def send(self, op, **kw):
        self.p.stdin.write(json.dumps(dict(op=op, **kw)) + "\n")
        self.p.stdin.flush()

    def recv(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"agent_worker {self.p.pid} exited (status {self.p.wait()}) without replying")
        r = json.loads(line)
        if "err" in r:
            raise WorkerError(r["err"], r["msg"])
        return r["ok"]

    def call(self, op, **kw):
        self.send(op, **kw)
        return self.recv()

    def register(self, rid, n, dtype="uint8", seed=None):
        return bytes.fromhex(self.call("register", id=rid, n=n, dtype=dtype, seed=seed))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            try:
                self.call("exit")
                self.p.wait(timeout=20)
            except Exception:
                self.kill()
        self.p.stdin.close()
        self.p.stdout.close()


@pytest.fixture
def workers():
    made = []

    def make(**kw):
        w = Worker(**kw)
        made.append(w)
        return w

    yield make
    for w in made:
        w.stop()


@pytest.fixture
def agent():
    with rwin.Agent(**OPTS) as a:
        yield a


def test_address_and_lifecycle():
    a = rwin.Agent(**OPTS)
    host, port = a.address.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert a.address in a.describe() and a.address in repr(a)
    # the transport asked for is the one in use (a verbs run cannot quietly be a UCX one)
    assert a.transport == OPTS.get("transport", "ucx") and f" {a.transport}(" in a.describe(), a.describe()
    assert not a.closed
    a.progress()  # nothing to serve: returns at once
    buf = np.zeros(16, np.int64)
    r = a.register(buf)
    a.close()
    assert a.closed and "closed" in repr(a)
    with pytest.raises(rwin.UseAfterFreeError, match="closed"):
        a.register(buf)
    with pytest.raises(rwin.UseAfterFreeError):
        _ = a.address
    r.deregister()  # after the agent: a handle that only fails or does nothing, never crashes
    with rwin.Agent("127.0.0.1:0", **OPTS) as b:  # listen may be positional
        assert b.address.startswith("127.0.0.1:")
        assert b.register(buf).nbytes == buf.nbytes
    assert b.closed


def test_register_is_zero_copy_and_keeps_the_array(agent):
    a = np.arange(64, dtype=np.int64)
    r = agent.register(a)
    assert r.array is a and r.nbytes == a.nbytes and r.registered and r.valid
    d = r.descriptor()
    assert isinstance(d, bytes) and len(d) > 16
    ba = bytearray(100)
    rb = agent.register(ba)
    with pytest.raises(BufferError):
        ba.extend(b"x")  # registered: the exporter is held, the bytearray cannot move
    rb.deregister()
    ba.extend(b"x")  # released
    r.deregister()
    assert not r.registered and "deregistered" in repr(r)
    r.deregister()  # idempotent


def test_two_processes_every_call(agent, workers):
    w = workers()
    n = 1 << 20
    data = np.zeros(n, np.uint8)
    sig = np.zeros(8, np.int64)
    rd, rs = agent.register(data), agent.register(sig)
    w.call("import", id="data", desc=rd.descriptor().hex())
    info = w.call("import", id="sig", desc=rs.descriptor().hex())
    assert info == {"nbytes": 64, "peer": agent.address}

    # put_notify into this process: the data, then the signal word (a waiter that sees it sees the data)
    w.call("put_notify", rid="data", off=4096, n=n - 8192, seed=1, srid="sig", soff=8, value=1)
    agent.wait(rs, 8, 1, cmp=rwin.WaitCmp.Ge, timeout=20)
    assert sha(data[4096:n - 4096]) == sha(pattern(1, n - 8192))
    assert not data[:4096].any() and not data[n - 4096:].any()
    # put + flush, then notify (AtomicAdd adds, Set sets)
    w.call("put", rid="data", off=0, n=4096, seed=2)
    w.call("flush")
    assert sha(data[:4096]) == sha(pattern(2, 4096))
    w.call("notify", srid="sig", soff=16, value=5)
    w.call("notify", srid="sig", soff=16, value=6)
    agent.wait(rs, 16, 11, cmp=rwin.WaitCmp.Eq)
    w.call("notify", srid="sig", soff=16, value=-3, opname="Set")
    agent.wait(rs, 16, 0, cmp=rwin.WaitCmp.Lt)
    assert sig[2] == -3
    assert agent.test(rs, 16, -3, cmp=rwin.WaitCmp.Eq)
    assert not agent.test(rs, 16, -3, cmp=rwin.WaitCmp.Ne)
    assert agent.test(rs, 8, 1)  # default cmp Ge
    assert agent.test(rs, 8, 1, cmp=">=") and agent.test(rs, 8, 2, cmp="Lt")
    # the worker gets what this process wrote
    data[100:200] = 7
    assert w.call("get", rid="data", off=100, n=100) == sha(np.full(100, 7, np.uint8))

    # the other direction: this process puts into, gets from and notifies the worker
    wd = w.register("wd", n, seed=3)
    ws = w.register("ws", 64, dtype="int64")
    remote, rsig = agent.import_region(wd), agent.import_region(ws)
    assert remote.nbytes == n and remote.peer == w.address and not remote.stale
    assert w.address in repr(remote)
    got = np.zeros(n, np.uint8)
    agent.get(got, remote, 0)
    assert sha(got) == sha(pattern(3, n))
    part = np.zeros(1000, np.uint8)
    agent.get(part, remote, 12345)
    assert sha(part) == sha(pattern(3, n)[12345:13345])
    agent.put(remote, 8, pattern(4, 1 << 16))
    agent.flush()
    assert w.call("read", id="wd", off=8, n=1 << 16) == sha(pattern(4, 1 << 16))
    agent.put_notify(remote, 1 << 19, pattern(5, 777), rsig, 0, 3)
    w.call("wait", id="ws", off=0, expected=3, cmp="Eq")
    assert w.call("read", id="wd", off=1 << 19, n=777) == sha(pattern(5, 777))
    agent.notify(rsig, 56, 42, op=rwin.NotifyOp.Set)
    agent.flush()
    assert w.call("read", id="ws", off=0, n=64, words=True) == [3, 0, 0, 0, 0, 0, 0, 42]
    assert w.call("test", id="ws", off=56, expected=42, cmp="Eq") is True
    # a region of this process imported by this process (loopback through the agent)
    self_remote = agent.import_region(rd.descriptor())
    agent.put(self_remote, 0, np.full(16, 9, np.uint8))
    agent.flush()
    assert (data[:16] == 9).all()
    # numpy views of other dtypes and bytearrays are buffers too
    f = np.zeros(256, np.float32)
    agent.get(f, remote, 0)
    assert sha(f) == sha(np.concatenate([pattern(3, n)[:8], pattern(4, 1 << 16)[:1016]]))
    b = bytearray(64)
    agent.get(b, remote, 8)
    assert bytes(b) == pattern(4, 64).tobytes()


def test_three_processes(agent, workers):
    w1, w2 = workers(), workers()
    n = 1 << 18
    # one importing from two: this process puts into each worker and notifies each
    r1 = agent.import_region(w1.register("d", n))
    s1 = agent.import_region(w1.register("s", 8, dtype="int64"))
    r2 = agent.import_region(w2.register("d", n))
    s2 = agent.import_region(w2.register("s", 8, dtype="int64"))
    assert {r1.peer, r2.peer} == {w1.address, w2.address} and w1.address != w2.address
    agent.put_notify(r1, 0, pattern(11, n), s1, 0, 1)
    agent.put_notify(r2, 0, pattern(12, n), s2, 0, 1)
    w1.call("wait", id="s", off=0, expected=1)
    w2.call("wait", id="s", off=0, expected=1)
    assert w1.call("read", id="d", off=0, n=n) == sha(pattern(11, n))
    assert w2.call("read", id="d", off=0, n=n) == sha(pattern(12, n))
    # two importing from one: both workers put into halves of this process's region, adding to one word
    data = np.zeros(2 * n, np.uint8)
    sig = np.zeros(1, np.int64)
    rd, rs = agent.register(data), agent.register(sig)
    for w in (w1, w2):
        w.call("import", id="td", desc=rd.descriptor().hex())
        w.call("import", id="ts", desc=rs.descriptor().hex())
    w1.send("put_notify", rid="td", off=0, n=n, seed=21, srid="ts", soff=0, value=1)
    w2.send("put_notify", rid="td", off=n, n=n, seed=22, srid="ts", soff=0, value=1)
    assert w1.recv() is None and w2.recv() is None
    agent.wait(rs, 0, 2)
    assert sig[0] == 2
    assert sha(data[:n]) == sha(pattern(21, n)) and sha(data[n:]) == sha(pattern(22, n))
    # and a worker gets from the other worker (both imported from each other's descriptors)
    w1.call("import", id="peer", desc=w2.register("x", 4096, seed=23).hex())
    assert w1.call("get", rid="peer", off=0, n=4096) == sha(pattern(23, 4096))


def test_stale_descriptor_after_deregister(agent, workers):
    w = workers()
    buf = np.zeros(4096, np.uint8)
    r = agent.register(buf)
    desc = r.descriptor()
    w.call("import", id="r", desc=desc.hex())
    w.call("put", rid="r", off=0, n=64, seed=1)
    w.call("flush")
    assert sha(buf[:64]) == sha(pattern(1, 64))
    r.deregister()
    buf[:] = 0
    # the importer's later uses fail naming the region; nothing reaches the memory
    for op, kw in (("put", dict(rid="r", off=0, n=64, seed=2)), ("get", dict(rid="r", off=0, n=64))):
        with pytest.raises(WorkerError) as e:
            w.call(op, **kw)
            w.call("flush")
        assert e.value.cls in ("UseAfterFreeError", "InvalidArgumentError", "PeerFailedError"), e.value
        assert agent.address in e.value.msg and ("deregistered" in e.value.msg or "stale" in e.value.msg), e.value.msg
    assert not buf.any()
    assert w.call("stale", id="r") is True  # the importer learned it from the owner
    with pytest.raises(WorkerError) as e:  # a fresh import of the stale descriptor
        w.call("import", id="again", desc=desc.hex())
    assert agent.address in e.value.msg
    with pytest.raises(rwin.UseAfterFreeError, match="deregistered"):
        r.descriptor()
    # the same memory registered again is a new generation: the old descriptor stays stale
    r2 = agent.register(buf)
    assert r2.descriptor() != desc
    with pytest.raises(WorkerError):
        w.call("put", rid="r", off=0, n=64, seed=3)
        w.call("flush")
    assert not buf.any()
    w.call("import", id="r2", desc=r2.descriptor().hex())
    w.call("put", rid="r2", off=0, n=64, seed=4)
    w.call("flush")
    assert sha(buf[:64]) == sha(pattern(4, 64))
    # local uses of a deregistered signal region
    s = np.zeros(2, np.int64)
    rs = agent.register(s)
    rs.deregister()
    with pytest.raises(rwin.UseAfterFreeError, match="deregistered"):
        agent.wait(rs, 0, 1, timeout=1)


def test_register_deregister_cycles(agent, workers):
    buf = np.zeros(1 << 16, np.uint8)
    descs = set()
    for _ in range(1000):
        r = agent.register(buf)
        descs.add(r.descriptor())
        r.deregister()
    assert len(descs) == 1000  # every registration a new generation
    w = workers()
    r = agent.register(buf)
    w.call("import", id="r", desc=r.descriptor().hex())
    w.call("put", rid="r", off=0, n=1 << 16, seed=5)
    w.call("flush")
    assert sha(buf) == sha(pattern(5, 1 << 16))


# Over UCX's shared memory a process killed while it writes into our receive FIFO blocks that FIFO
# for every peer (docs/AGENT.md, "Peers killed over shared memory"): there the victim is frozen at
# rest (every reply of its received, every thread stopped) and killed while our puts to it are in flight.
SHM = "posix" in os.environ.get("UCX_TLS", "") and OPTS.get("transport", "ucx") == "ucx"


def test_peer_killed_mid_transfer(agent, workers):
    victim = workers()
    n = 32 << 20
    remote = agent.import_region(victim.register("d", n))
    src = pattern(1, n)
    done, err = [0], []
    if SHM:
        agent.put(remote, 0, src)
        agent.flush()
        agent.get(np.zeros(8, np.uint8), remote, 0)
        os.kill(victim.p.pid, signal.SIGSTOP)
        os.waitpid(victim.p.pid, os.WUNTRACED)  # returns once every thread of it has stopped

    def pump():
        try:
            while True:
                agent.put(remote, 0, src)
                agent.flush()
                done[0] += 1
        except rwin.Error as e:
            err.append(e)

    t = threading.Thread(target=pump)
    t.start()
    while done[0] < (0 if SHM else 2) and t.is_alive():
        time.sleep(0.01)
    if SHM:
        time.sleep(0.1)  # the pump's first put waits on the frozen victim (if not yet posted, it fails the same way)
    victim.kill()  # SIGKILL while transfers are in flight
    t.join(60)
    assert not t.is_alive(), "put/flush did not return after the peer was killed"
    assert err, "no error after the peer was killed"
    assert isinstance(err[0], rwin.PeerFailedError), err[0]
    assert victim.address in str(err[0]), err[0]
    # later uses fail the same way, at once
    with pytest.raises(rwin.PeerFailedError, match=victim.address.replace(".", r"\.")):
        agent.get(np.zeros(8, np.uint8), remote, 0)
    # a flush reports the victim's puts left unflushed (once, naming it), then the victim is forgotten
    try:
        agent.flush()
    except rwin.PeerFailedError as e:
        assert victim.address in str(e), e
    agent.flush()
    # and the survivor keeps working with a third peer
    w = workers()
    r = agent.import_region(w.register("d", 1 << 20, seed=6))
    got = np.zeros(1 << 20, np.uint8)
    agent.get(got, r, 0)
    assert sha(got) == sha(pattern(6, 1 << 20))
    agent.put(r, 0, pattern(7, 4096))
    agent.flush()
    assert w.call("read", id="d", off=0, n=4096) == sha(pattern(7, 4096))


def passive_round(agent, w, seed):
    """Puts, notifies and gets into a passive worker's regions; every check is a get from it."""
    remote = agent.import_region(w.register("d", 1 << 20, seed=seed))
    sig = agent.import_region(w.register("s", 16, dtype="int64"))
    return remote, sig


def serve_passive(agent, remote, sig, seed):
    got = np.zeros(1 << 20, np.uint8)
    agent.get(got, remote, 0)
    assert sha(got) == sha(pattern(seed, 1 << 20))
    agent.put(remote, 4096, pattern(seed + 1, 8192))
    agent.put_notify(remote, 65536, pattern(seed + 2, 100), sig, 0, 1)
    agent.notify(sig, 8, 5)
    agent.notify(sig, 8, 5)
    agent.flush()
    back = np.zeros(8192, np.uint8)
    agent.get(back, remote, 4096)
    assert sha(back) == sha(pattern(seed + 1, 8192))
    words = np.zeros(2, np.int64)
    agent.get(words, sig, 0)
    assert words.tolist() == [1, 10]


def test_passive_server_asleep(agent, workers):
    w = workers(progress_thread=True)
    remote, sig = passive_round(agent, w, 31)
    assert w.call("sleep", seconds=600) == "sleeping"  # time.sleep in the worker's only Python thread
    serve_passive(agent, remote, sig, 31)
    w.kill()


def test_passive_server_blocked_in_read(agent, workers):
    w = workers(progress_thread=True)
    remote, sig = passive_round(agent, w, 41)
    assert w.call("block") == "blocked"
    serve_passive(agent, remote, sig, 41)
    w.p.stdin.write("\n")
    w.p.stdin.flush()
    assert w.recv() == "woken"
    # the worker's own view agrees with what the gets saw
    assert w.call("read", id="d", off=65536, n=100) == sha(pattern(43, 100))
    assert w.call("read", id="s", off=0, n=16, words=True) == [1, 10]


def test_passive_server_blocked_in_grpc(agent, workers):
    import grpc  # python3-grpcio (.ci/setup.sh installs it)
    from concurrent import futures
    gate = threading.Event()

    def wait(request, context):
        gate.wait(60)
        return b"released"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "test.Gate", {"Wait": grpc.unary_unary_rpc_method_handler(wait)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        w = workers(progress_thread=True)
        remote, sig = passive_round(agent, w, 51)
        assert w.call("grpc_block", target=f"127.0.0.1:{port}") == "calling"
        serve_passive(agent, remote, sig, 51)
        gate.set()
        assert w.recv() == "released"
        assert w.call("read", id="s", off=0, n=16, words=True) == [1, 10]
    finally:
        server.stop(None)


def test_idle_progress_thread_sleeps(workers, monkeypatch):
    """An idle progress thread sleeps on descriptors, never on the timer, and still wakes for a get
    (the default over UCX: RWIN_AGENT_UCX_WAKEUP unset; verbs always sleeps)."""
    monkeypatch.delenv("RWIN_AGENT_UCX_WAKEUP", raising=False)  # the default, for this agent and the worker's
    w = workers(progress_thread=True)
    with rwin.Agent(**OPTS) as agent:
        idle_round(agent, w)


def idle_round(agent, w):
    remote = agent.import_region(w.register("d", 4096, seed=71))
    got = np.zeros(4096, np.uint8)
    agent.get(got, remote, 0)  # connected both ways: keepalives run while idle
    before = agent.stats()
    assert {"thread_rounds", "thread_sleeps", "thread_timer_sleeps", "puts", "gets", "errors", "peers"} <= set(before)
    time.sleep(0.3)
    after = agent.stats()
    assert after["thread_timer_sleeps"] == before["thread_timer_sleeps"]
    assert after["thread_sleeps"] > before["thread_sleeps"]
    got[:] = 0
    agent.get(got, remote, 0)  # the worker's thread slept as well: the request wakes it
    assert sha(got) == sha(pattern(71, 4096))


def test_active_peer_without_progress_thread(agent, workers):
    """A peer without the progress thread is served while it is inside rwin (here: agent.wait)."""
    w = workers(progress_thread=False)
    desc_d = w.register("d", 4096, seed=61)
    desc_s = w.register("s", 8, dtype="int64")
    w.send("wait", id="s", off=0, expected=1, cmp="Ge", timeout=20)  # blocks in agent.wait: it progresses
    remote, sig = agent.import_region(desc_d), agent.import_region(desc_s)
    got = np.zeros(4096, np.uint8)
    agent.get(got, remote, 0)
    assert sha(got) == sha(pattern(61, 4096))
    agent.put_notify(remote, 0, pattern(62, 4096), sig, 0, 1)
    assert w.recv() is None  # its wait saw the signal
    assert w.call("read", id="d", off=0, n=4096) == sha(pattern(62, 4096))


def test_bad_arguments(agent, workers):
    w = workers()
    remote = agent.import_region(w.register("d", 4096))
    sig = agent.import_region(w.register("s", 64, dtype="int64"))
    local_u8 = agent.register(np.zeros(64, np.uint8))
    local_sig = agent.register(np.zeros(8, np.int64))
    # offsets outside the remote region: refused here, naming the region's size
    with pytest.raises(rwin.OutOfBoundsError, match="4096"):
        agent.put(remote, 4090, np.zeros(8, np.uint8))
    with pytest.raises(rwin.OutOfBoundsError):
        agent.get(np.zeros(8, np.uint8), remote, 4096)
    with pytest.raises(rwin.OutOfBoundsError, match="negative"):
        agent.put(remote, -1, np.zeros(8, np.uint8))
    with pytest.raises(rwin.OutOfBoundsError):
        agent.notify(sig, 64, 1)
    # signal words are aligned int64
    with pytest.raises(rwin.MisalignedError):
        agent.notify(sig, 4, 1)
    with pytest.raises(rwin.MisalignedError):
        agent.put_notify(remote, 0, np.zeros(8, np.uint8), sig, 12, 1)
    with pytest.raises(rwin.MisalignedError, match="multiple of 8"):
        agent.wait(local_sig, 4, 1, timeout=1)
    with pytest.raises(rwin.DtypeMismatchError, match="int64"):
        agent.wait(local_u8, 0, 1, timeout=1)
    with pytest.raises(rwin.DtypeMismatchError):
        agent.test(agent.register(np.zeros(8, np.float64)), 0, 1)
    with pytest.raises(rwin.OutOfBoundsError):
        agent.test(local_sig, 64, 1)
    with pytest.raises(rwin.TimeoutError):
        agent.wait(local_sig, 0, 1, timeout=0.2)
    with pytest.raises(rwin.InvalidArgumentError, match="WaitCmp"):
        agent.wait(local_sig, 0, 0, cmp="~", timeout=1)
    # descriptors
    for bad in (b"", b"garbage", bytes(200), local_sig.descriptor()[:-3]):
        with pytest.raises(rwin.InvalidArgumentError):
            agent.import_region(bad)
    # buffers
    ro = np.zeros(8, np.uint8)
    ro.setflags(write=False)
    with pytest.raises(rwin.InvalidArgumentError, match="writable"):
        agent.register(ro)
    with pytest.raises(rwin.InvalidArgumentError, match="C-contiguous"):
        agent.register(np.zeros((8, 8), np.uint8)[:, 1])
    with pytest.raises(rwin.InvalidArgumentError, match="empty"):
        agent.register(np.zeros(0, np.uint8))
    with pytest.raises(rwin.InvalidArgumentError, match="writable"):
        agent.get(b"12345678", remote, 0)
    with pytest.raises(rwin.InvalidArgumentError, match="RemoteRegion"):
        agent.put(local_u8, 0, np.zeros(8, np.uint8))
    with pytest.raises(rwin.InvalidArgumentError, match="Region"):
        agent.wait(sig, 0, 1)
    with pytest.raises(TypeError):
        agent.put(remote, 0.5, np.zeros(8, np.uint8))
    with rwin.Agent(**OPTS) as other:  # handles of one agent are refused by another, naming both
        with pytest.raises(rwin.InvalidArgumentError, match="not of"):
            other.put(remote, 0, np.zeros(8, np.uint8))
        with pytest.raises(rwin.InvalidArgumentError, match="not of"):
            other.test(local_sig, 0, 0)
    with pytest.raises(rwin.InvalidArgumentError, match="op_timeout"):
        rwin.Agent(op_timeout=0)
    with pytest.raises(rwin.Error):
        rwin.Agent(listen="not an address")
    with pytest.raises(rwin.Error):
        rwin.Agent(transport="carrier-pigeon")
    # the agent still works after all of that
    agent.put(remote, 0, pattern(9, 4096))
    agent.flush()
    assert w.call("read", id="d", off=0, n=4096) == sha(pattern(9, 4096))


def _parse_metrics(text):
    """{(name, frozenset(labels)): value} of a Prometheus text scrape: with prometheus_client's parser
    when installed (python3-prometheus-client; it also checks the format), else a strict local one."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        text_string_to_metric_families = None
    out = {}
    if text_string_to_metric_families is not None:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, frozenset(s.labels.items()))] = s.value
        return out
    import re
    typed = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)', line)
        assert m, line
        assert m.group(1) in typed, line
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2)))
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def _metric(samples, name, **labels):
    hits = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def test_metrics_scrape(workers):
    """An agent with metrics on 127.0.0.1:0 (issue 28): a known sequence of calls to a worker's regions,
    then a scrape over HTTP (urllib) with exact counts, by operation and by peer."""
    import urllib.error
    import urllib.request
    w = workers()
    wd = w.register("wd", 1 << 16, seed=3)
    ws = w.register("ws", 64, dtype="int64")
    with rwin.Agent(**OPTS, metrics="127.0.0.1:0") as a:
        addr = a.metrics_address
        host, port = addr.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        remote, rsig = a.import_region(wd), a.import_region(ws)
        for i in range(3):
            a.put(remote, i * 1000, pattern(4, 1000))
        got = np.zeros(500, np.uint8)
        a.get(got, remote, 0)
        a.get(got, remote, 100)
        a.put_notify(remote, 8192, pattern(5, 100), rsig, 0, 1)
        for _ in range(3):
            a.notify(rsig, 8, 1)
        a.notify(rsig, 16, 7, op=rwin.NotifyOp.Set)
        a.flush()
        with pytest.raises(rwin.Error):
            a.put(remote, (1 << 16) - 10, np.zeros(11, np.uint8))
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=20) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode()
        s = _parse_metrics(text)
        me = a.address
        assert _metric(s, "rwin_agent_operations_total", op="put", agent=me) == 3
        assert _metric(s, "rwin_agent_operations_total", op="get") == 2
        assert _metric(s, "rwin_agent_operations_total", op="put_notify") == 1
        assert _metric(s, "rwin_agent_operations_total", op="notify") == 4
        assert _metric(s, "rwin_agent_operations_total", op="flush") == 1
        assert _metric(s, "rwin_agent_bytes_total", op="put") == 3000
        assert _metric(s, "rwin_agent_bytes_total", op="get") == 1000
        assert _metric(s, "rwin_agent_bytes_total", op="put_notify") == 100
        assert _metric(s, "rwin_agent_errors_total", op="put") == 1
        assert _metric(s, "rwin_agent_imports_total") == 2
        assert _metric(s, "rwin_agent_peers", direction="outbound") == 1
        assert _metric(s, "rwin_agent_peer_operations_total", peer=w.address, op="put") == 3
        assert _metric(s, "rwin_agent_peer_bytes_total", peer=w.address, op="get") == 1000
        st = a.stats()
        assert (st["puts"], st["put_bytes"], st["gets"], st["errors"], st["imports"]) == (3, 3000, 2, 1, 2)
        assert w.call("read", id="ws", off=0, n=64, words=True)[:3] == [1, 3, 7]
        # only GET /metrics
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://{addr}/", timeout=20)
        assert e.value.code == 404
    assert a.closed


def test_metrics_file_and_bad_specs(tmp_path):
    path = tmp_path / "agent.prom"
    with rwin.Agent(**OPTS, metrics=f"file:{path}", metrics_interval=3600) as a:
        assert a.metrics_address == f"file:{path}"
        a.register(np.zeros(4096, np.uint8))
    s = _parse_metrics(path.read_text())  # the last write, at close
    assert _metric(s, "rwin_agent_regions_registered_total") == 1
    assert _metric(s, "rwin_agent_regions") == 0
    with rwin.Agent(**OPTS) as a:
        assert a.metrics_address == ""
    with pytest.raises(rwin.InvalidArgumentError, match=r"AgentOptions::metrics='nonsense'.*no ':port'"):
        rwin.Agent(**OPTS, metrics="nonsense")
    with pytest.raises(rwin.InvalidArgumentError, match="no path"):
        rwin.Agent(**OPTS, metrics="http://127.0.0.1:0/metrics")
