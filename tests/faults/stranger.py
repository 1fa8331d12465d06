#!/usr/bin/python3
"""A stranger on an rwin job's bootstrap store port, for the fault suite (tests/faults/faults.py).

Talks only to 127.0.0.1 (there is no host option); every loop is bounded in count and in time.

  stranger.py random --port P [--conns N] [--seconds S] [--seed X]
      connections that send random bytes (and headers with the store's magic but absurd lengths)
  stranger.py frames --port P [--seconds S]
      well-formed store frames (bootstrap/wire.h, version 1) without any key: CHECK/GET/SET of real keys
      and of a probe key. Exit 3 if the store served any of them (returned data or accepted a write).
  stranger.py idle --port P [--conns N] [--hold S]
      opens N connections and holds them without a byte; prints 'idle: N open' once they are up,
      then holds until --hold seconds pass or SIGTERM; prints how many the server closed.
  stranger.py sets --port P [--count K] [--value-bytes B] [--seconds S]
      K SETs of distinct keys with B-byte values, reconnecting (bounded) when the store drops it.
  stranger.py tcp --port P [--conns N] [--seconds S] [--seed X]
      the listener of rwin's own tcp transport (transport/tcp/tcp_wire.h; an agent's stays open):
      random bytes, half hellos, and whole hellos of every kind with a random proof followed by a
      request frame. Exit 3 if any connection was accepted (an Accept with status 0).

Every mode first waits (bounded by --wait-listen, default 20 s) for the port to accept connections.
Exit status: 0 done, 3 (frames, tcp) the store or transport served a stranger, 2 usage, 1 could not
connect at all.
"""
import argparse
import errno
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import time

HOST = "127.0.0.1"  # never anything else
MAGIC = 0x54535752
VERSION = 1
OP_SET, OP_GET, OP_ADD, OP_CHECK, OP_WAIT = 1, 2, 3, 4, 5
STATUS_OK = 0
PROBE_KEY = b"stranger/probe"
PROBE_VALUE = b"stranger-was-here"


def say(msg):
    print(f"stranger: {msg}", flush=True)


def frame(op, body):
    return struct.pack("<IHHI", MAGIC, VERSION, op, len(body)) + body


def key(k):
    return struct.pack("<I", len(k)) + k


def set_body(k, v):
    return key(k) + struct.pack("<I", len(v)) + v


def keys_body(ks):
    return struct.pack("<I", len(ks)) + b"".join(key(k) for k in ks)


def connect(port, timeout=2.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((HOST, port))
    except OSError:
        s.close()
        raise
    return s


def wait_listen(port, seconds):
    deadline = time.monotonic() + seconds
    while True:
        try:
            connect(port, 0.5).close()
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def recv_exact(s, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        s.settimeout(left)
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def read_frame(s, seconds=1.0):
    """One response frame: (status, body); raises on close/timeout/garbage."""
    deadline = time.monotonic() + seconds
    magic, version, status, length = struct.unpack("<IHHI", recv_exact(s, 12, deadline))
    if magic != MAGIC or length > (1 << 20):
        raise ValueError(f"not a store frame (magic {magic:#x}, length {length})")
    return status, recv_exact(s, length, deadline)


# ---- modes --------------------------------------------------------------------------------------

def mode_random(a):
    rng = random.Random(a.seed)
    deadline = time.monotonic() + a.seconds
    conns = sent = received = refused = 0
    for i in range(a.conns):
        if time.monotonic() >= deadline:
            break
        try:
            s = connect(a.port)
        except OSError:
            refused += 1
            continue
        conns += 1
        try:
            kind = i % 4
            if kind == 0:    # plain noise
                data = rng.randbytes(rng.randint(1, 65536))
            elif kind == 1:  # right magic, absurd length: must not make the store allocate it
                data = struct.pack("<IHHI", MAGIC, VERSION, rng.randint(0, 9), 0xFFFFFFF0) + rng.randbytes(64)
            elif kind == 2:  # right magic, wrong version / unknown op, random body
                body = rng.randbytes(rng.randint(0, 512))
                data = struct.pack("<IHHI", MAGIC, rng.randint(0, 65535), rng.randint(0, 65535), len(body)) + body
            else:            # a well-formed header whose body lies about its inner lengths
                body = struct.pack("<I", 0xFFFFFFFF) + rng.randbytes(32)
                data = frame(rng.choice([OP_SET, OP_GET, OP_ADD, OP_CHECK, OP_WAIT]), body)
            s.settimeout(0.5)
            s.sendall(data)
            sent += len(data)
            r, _, _ = select.select([s], [], [], 0.05)
            if r:
                received += len(s.recv(65536))
        except OSError:
            pass  # the store dropping us is fine
        finally:
            s.close()
    say(f"random: {conns} connections, {sent} bytes sent, {received} bytes received, {refused} refused")
    return 0


def mode_frames(a):
    served = []
    deadline = time.monotonic() + a.seconds
    real = [f"arrive/{r}".encode() for r in range(4)]
    steps = [
        ("CHECK arrive/0..3", frame(OP_CHECK, keys_body(real)),
         lambda st, b: st == STATUS_OK and len(b) == 4 and set(b) <= {0, 1} and 1 in b),
        ("SET arrive/0 (overwrite a real key)", frame(OP_SET, set_body(b"arrive/0", b"junk")), None),
        ("SET stranger/probe", frame(OP_SET, set_body(PROBE_KEY, PROBE_VALUE)), None),
        ("CHECK stranger/probe", frame(OP_CHECK, keys_body([PROBE_KEY])),
         lambda st, b: st == STATUS_OK and b == b"\x01"),
        ("GET stranger/probe", frame(OP_GET, key(PROBE_KEY)), lambda st, b: st == STATUS_OK and b == PROBE_VALUE),
        ("ADD stranger/count", frame(OP_ADD, key(b"stranger/count") + struct.pack("<q", 5)),
         lambda st, b: st == STATUS_OK and b == struct.pack("<q", 5)),
        ("GET arrive/1", frame(OP_GET, key(b"arrive/1")), None),
    ]
    s = None
    for name, data, leaked in steps:
        if time.monotonic() >= deadline:
            say(f"frames: out of time before {name}")
            break
        try:
            if s is None:
                s = connect(a.port)
            s.settimeout(1.0)
            s.sendall(data)
            st, body = read_frame(s, 1.0)
            verdict = "served" if leaked and leaked(st, body) else ("error" if st != STATUS_OK else "ok-reply")
            if verdict == "served":
                served.append(name)
            say(f"frames: {name}: status {st}, {len(body)} body bytes: {verdict}")
        except (OSError, ValueError, ConnectionError, TimeoutError) as e:
            say(f"frames: {name}: no answer ({type(e).__name__}: {e}); reconnecting")
            if s is not None:
                s.close()
            s = None
    if s is not None:
        s.close()
    if served:
        say(f"frames: the store SERVED a client without the key: {'; '.join(served)}")
        return 3
    say("frames: nothing served")
    return 0


STOP = False


def _stop(_sig, _frm):
    global STOP
    STOP = True


def mode_idle(a):
    signal.signal(signal.SIGTERM, _stop)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.conns + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, want), hard))
    socks = []
    pending = []
    deadline = time.monotonic() + a.connect_seconds
    # Non-blocking connects: a full listen backlog must not stall us past the deadline.
    for _ in range(a.conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((HOST, a.port))
        if rc in (0, errno.EINPROGRESS):
            pending.append(s)
        else:
            s.close()
    # poll, not select: these descriptors are far above FD_SETSIZE.
    poller = select.poll()
    by_fd = {s.fileno(): s for s in pending}
    for fd in by_fd:
        poller.register(fd, select.POLLOUT)
    while by_fd and time.monotonic() < deadline and not STOP:
        for fd, _ev in poller.poll(200):
            s = by_fd.pop(fd)
            poller.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                socks.append(s)
            else:
                s.close()
    for s in by_fd.values():
        s.close()
    say(f"idle: {len(socks)} open")
    end = time.monotonic() + a.hold
    poller = select.poll()
    live = {s.fileno(): s for s in socks}
    for fd in live:
        poller.register(fd, select.POLLIN)
    closed = 0
    while time.monotonic() < end and not STOP and live:
        for fd, _ev in poller.poll(200):
            try:
                gone = not live[fd].recv(4096)
            except OSError:
                gone = True
            if gone:
                poller.unregister(fd)
                del live[fd]
                closed += 1
    say(f"idle: the store closed {closed} of {len(socks)}")
    for s in socks:
        s.close()
    return 0


def mode_sets(a):
    deadline = time.monotonic() + a.seconds
    value = b"v" * a.value_bytes
    sent = done = reconnects = 0
    s = None
    for i in range(a.count):
        if time.monotonic() >= deadline or reconnects > a.max_reconnects:
            break
        data = frame(OP_SET, set_body(f"stranger/{i}".encode(), value))
        try:
            if s is None:
                s = connect(a.port)
                reconnects += 1
            s.settimeout(max(0.05, deadline - time.monotonic()))
            s.sendall(data)
            sent += len(data)
            done += 1
            # Drain replies so a store that answers each SET does not stall on a full send buffer.
            while select.select([s], [], [], 0)[0]:
                if not s.recv(65536):
                    raise ConnectionError("closed")
        except (OSError, ConnectionError):
            if s is not None:
                s.close()
            s = None
    if s is not None:
        s.close()
    say(f"sets: {done} SETs of {a.value_bytes} bytes sent ({sent >> 20} MiB) over {reconnects} connection(s)")
    return 0


TCP_MAGIC = 0x50435452  # transport/tcp/tcp_wire.h kMagic


def tcp_hello(rng):
    """A Hello {magic, version, kind, src, dst, nonce[16]}: mostly the right version, every kind."""
    return struct.pack("<IHHii16s", TCP_MAGIC, rng.choice([1, 1, 1, 2]), rng.choice([1, 2, 2, rng.randrange(65536)]),
                       rng.randrange(-2, 8), rng.randrange(-2, 8), rng.randbytes(16))


def mode_tcp(a):
    rng = random.Random(a.seed)
    deadline = time.monotonic() + a.seconds
    conns = raw = half = answered = refused = challenged = accepted = unanswered = dropped = 0
    while conns < a.conns and time.monotonic() < deadline:
        conns += 1
        try:
            s = connect(a.port)
        except OSError:
            continue
        try:
            kind = rng.randrange(4)
            if kind == 0:  # random bytes, some with the magic first
                head = struct.pack("<I", TCP_MAGIC) if rng.random() < 0.5 else b""
                s.sendall(head + rng.randbytes(rng.randrange(1, 4096)))
                raw += 1
                continue
            if kind == 1:  # half a hello, then gone
                s.sendall(tcp_hello(rng)[:rng.randrange(1, 32)])
                half += 1
                continue
            s.sendall(tcp_hello(rng))
            try:
                ch = recv_exact(s, 24, time.monotonic() + 2.0)
            except TimeoutError:
                unanswered += 1
                continue
            except (ConnectionError, OSError):
                dropped += 1  # closed without a challenge (a hello it could not parse)
                continue
            answered += 1
            if struct.unpack_from("<IHH", ch)[2] != 0:
                refused += 1
                continue
            challenged += 1
            # A proof nobody could compute, then a request frame (a 40-byte ReqHeader's worth): neither
            # may be taken for a peer's.
            s.sendall(rng.randbytes(32) + rng.randbytes(40))
            try:
                acc = recv_exact(s, 40, time.monotonic() + 2.0)
                if struct.unpack_from("<II", acc)[1] == 0:
                    accepted += 1
            except (ConnectionError, OSError, TimeoutError):
                pass  # dropped: what a wrong proof gets
        except (ConnectionError, OSError):
            dropped += 1
        finally:
            s.close()
    say(f"tcp: {conns} connections: {raw} random, {half} half hellos, {answered} hellos answered "
        f"({refused} refused, {challenged} challenged), {unanswered} unanswered within 2 s, {dropped} dropped, "
        f"{accepted} accepted")
    return 3 if accepted else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["random", "frames", "idle", "sets", "tcp"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--conns", type=int, default=200)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hold", type=float, default=30.0)
    p.add_argument("--connect-seconds", type=float, default=10.0)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--value-bytes", type=int, default=128 << 10)
    p.add_argument("--max-reconnects", type=int, default=100)
    p.add_argument("--wait-listen", type=float, default=20.0)
    a = p.parse_args()
    if not 0 < a.port < 65536 or a.conns > 20000 or a.count > 100000 or a.value_bytes > (64 << 20):
        p.error("out-of-range --port/--conns/--count/--value-bytes")
    if not wait_listen(a.port, a.wait_listen):
        say(f"nothing listens on {HOST}:{a.port} after {a.wait_listen} s")
        return 1
    modes = {"random": mode_random, "frames": mode_frames, "idle": mode_idle, "sets": mode_sets, "tcp": mode_tcp}
    return modes[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
