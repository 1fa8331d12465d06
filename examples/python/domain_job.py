#!/usr/bin/env python3
"""rwin as the data plane of a runtime's "global comm domain" (docs/EMBEDDING.md, section 6).

The parent plays the runtime's per-host daemon: it forks its workers first (before any rwin object
or thread exists), talks to each over its own socket in its own frames (u32 length | u8 type |
payload), and runs the transaction:

    prepare   every worker: d = rwin.Domain(id, rank, n, window_bytes) -> its descriptor (a frame)
    import    the parent sends every worker the table of descriptors; each imports and answers
    commit    when every import succeeded; otherwise abort (back to prepared) and a new table
    release   at the end

The first table the parent sends has one entry mangled on purpose (as a broken frame would be): the
worker that sees it answers with the error, and the parent aborts the transaction and sends the
right table. Then the workers run a ring shift and an allreduce built from put_notify / wait, and
beat a heartbeat every 0.2 s over their socket (the runtime's health lane). With --fault, one worker
is stopped (SIGSTOP: hung, its sockets stay open) or killed while the others wait for it; the parent
sees its heartbeat stop for 1.0 s, tells the survivors, and each survivor's lane calls
d.fail_peer(rank, reason): the blocked wait raises PeerFailedError naming that rank.

    /usr/bin/python3 examples/python/domain_job.py -n 3 [--fault stop|kill|none] [--transport ucx]

Exit status 0 when every worker did what it should (the faulty one excepted).
"""
import argparse
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

import _rwin_path  # noqa: F401,E402  (finds rwin: the build tree, or Debian's python3)
import numpy as np  # noqa: E402

import rwin  # noqa: E402

HEARTBEAT_S = 0.2  # the runtime's health lane: a frame every 0.2 s
SILENT_S = 1.0     # no frame for this long: the worker failed
DOMAIN_ID = 0x1D0A1
ELEMS = 1 << 16    # float32 elements per rank in the ring shift and in the allreduce

# Frame types of this control plane (ours, not rwin's).
DESC, TABLE, IMPORTED, COMMIT, ABORT, BEAT, FAILED, RESULT, READY, RELEASE = range(1, 11)


def say(msg):
    """One write per line: the workers share the parent's stdout."""
    os.write(1, (msg + "\n").encode())


def send_frame(sock, kind, payload=b""):
    sock.sendall(struct.pack("<IB", len(payload) + 1, kind) + payload)


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the other side closed the socket")
        buf += chunk
    return bytes(buf)


def recv_frame(sock):
    (length,) = struct.unpack("<I", recv_exact(sock, 4))
    body = recv_exact(sock, length)
    return body[0], body[1:]


def pack_list(items):
    return b"".join(struct.pack("<H", len(x)) + x for x in items)


def unpack_list(payload):
    out, at = [], 0
    while at < len(payload):
        (n,) = struct.unpack_from("<H", payload, at)
        out.append(payload[at + 2:at + 2 + n])
        at += 2 + n
    return out


# ---- a worker ------------------------------------------------------------------------------------

def worker(rank, n, sock, args):
    window_bytes = (2 + n) * ELEMS * 4  # [my slice | the slice from rank-1 | n allreduce inputs]
    d = rwin.Domain(DOMAIN_ID, rank, n, window_bytes, signals=8, transport=args.transport, op_timeout=args.timeout)
    send_frame(sock, DESC, d.descriptor())
    # The transaction: import each table the parent sends until it commits.
    while True:
        kind, payload = recv_frame(sock)
        if kind == TABLE:
            try:
                d.import_table(unpack_list(payload))
                send_frame(sock, IMPORTED, b"ok")
            except rwin.Error as e:
                send_frame(sock, IMPORTED, str(e).encode())
        elif kind == ABORT:
            d.abort()
        elif kind == COMMIT:
            d.commit()
            break
    send_lock = threading.Lock()

    def send(kind, payload=b""):
        with send_lock:
            send_frame(sock, kind, payload)

    # The health lane: beats, and passes the parent's verdicts on to rwin.
    stop = threading.Event()

    def lane():
        sock.settimeout(HEARTBEAT_S)
        while not stop.is_set():
            send(BEAT)
            try:
                kind, payload = recv_frame(sock)
            except socket.timeout:
                continue
            except (EOFError, OSError):
                return
            if kind == FAILED:
                dead, reason = payload.split(b" ", 1)
                d.fail_peer(int(dead), reason.decode())
            elif kind == RELEASE:
                stop.set()

    t = threading.Thread(target=lane, daemon=True)
    t.start()
    w = d.window(np.float32)
    mine, recv, red = w[:ELEMS], w[ELEMS:2 * ELEMS], w[2 * ELEMS:].reshape(n, ELEMS)
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    # Ring shift: my slice into the next rank's second slot, signal 0 says it landed.
    mine[:] = np.arange(ELEMS, dtype=np.float32) + 1000 * rank
    d.put_notify(nxt, ELEMS * 4, mine, signal=0, value=1)
    d.wait(0, 1)
    ok = np.array_equal(recv, np.arange(ELEMS, dtype=np.float32) + 1000 * prv)
    # Allreduce (sum): my vector into every rank's slot [rank], signal 1 counts arrivals.
    vec = np.full(ELEMS, rank + 1, dtype=np.float32)
    for p in range(n):
        d.put_notify(p, (2 + rank) * ELEMS * 4, vec, signal=1, value=1)
    d.wait(1, n)
    ok = ok and np.all(red.sum(axis=0) == n * (n + 1) / 2)
    say(f"worker {rank}: ring shift and allreduce {'OK' if ok else 'WRONG'}")
    result = "OK" if ok else "WRONG"
    if args.fault != "none":
        # Round two: every rank notifies every other one (signal 2) and waits for all of them. The
        # faulty rank (the last) is stopped or killed by the parent first and never sends: each
        # survivor's wait must end with PeerFailedError naming it.
        faulty = n - 1
        send(READY)
        if rank == faulty:
            stop.wait(args.timeout)  # the parent stops or kills this process now
            return 1
        time.sleep(0.6)  # the parent acts 0.3 s after the last READY
        for p in range(n - 1):
            if p != rank:
                d.notify(p, 2, 1)
        t0 = time.monotonic()
        try:
            d.wait(2, n - 1)
            result = "WRONG: the wait for the faulty rank returned"
        except rwin.PeerFailedError as e:
            say(f"worker {rank}: the wait ended after {time.monotonic() - t0:.1f} s: {e}")
            if f"rank {faulty} failed" not in str(e):
                result = f"WRONG: the error does not name rank {faulty}: {e}"
    send(RESULT, result.encode())
    t.join(timeout=args.timeout)
    d.release()
    return 0 if result == "OK" else 1


# ---- the parent: the runtime's daemon ------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=3, help="workers (>= 2; >= 3 with --fault)")
    ap.add_argument("--fault", choices=["stop", "kill", "none"], default="stop",
                    help="what happens to the last worker in round two")
    ap.add_argument("--transport", default="ucx", help="the domain's transport: ucx or verbs")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds: every rwin call's deadline")
    args = ap.parse_args()
    n = args.n
    if n < 2 or (args.fault != "none" and n < 3):
        ap.error("need -n >= 2, and >= 3 with a fault")

    # Fork first, before any rwin object or thread.
    socks, pids = [], []
    for rank in range(n):
        parent_end, child_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            parent_end.close()
            for s in socks:
                s.close()
            code = 1
            try:
                code = worker(rank, n, child_end, args)
            except Exception as e:  # noqa: BLE001  (reported, then the exit status says it)
                say(f"worker {rank}: {type(e).__name__}: {e}")
            os._exit(code)
        child_end.close()
        socks.append(parent_end)
        pids.append(pid)

    deadline = time.monotonic() + args.timeout
    failed = False
    # prepare: every descriptor, in rank order.
    table = []
    for rank, s in enumerate(socks):
        kind, desc = recv_frame(s)
        assert kind == DESC
        table.append(desc)
    say(f"parent: {n} descriptors of {min(map(len, table))}-{max(map(len, table))} bytes "
        f"(the field holds {rwin.Domain.MAX_DESCRIPTOR_BYTES})")

    # import: a first table with one entry mangled in transit, then the right one.
    def transaction(tbl):
        for s in socks:
            send_frame(s, TABLE, pack_list(tbl))
        answers = [recv_frame(s)[1].decode() for s in socks]
        bad = [(r, a) for r, a in enumerate(answers) if a != "ok"]
        for s in socks:
            send_frame(s, ABORT if bad else COMMIT)
        return bad

    mangled = list(table)
    mangled[0] = mangled[0][:-1] + bytes([mangled[0][-1] ^ 1])
    bad = transaction(mangled)
    if not bad:
        say("parent: a mangled table was imported: WRONG")
        failed = True
    else:
        say(f"parent: aborted (worker {bad[0][0]}: {bad[0][1]})")
    bad = transaction(table)
    if bad:
        say(f"parent: the right table failed: {bad}")
        return 1
    say("parent: committed")

    # The health lane: beats in, verdicts out; results collected.
    last = [time.monotonic()] * n
    results, ready, dead, closed = {}, set(), set(), set()
    faulty = n - 1
    while len(results) + len(dead) < n and time.monotonic() < deadline:
        live = [s for r, s in enumerate(socks) if r not in dead and r not in results]
        readable, _, _ = select.select(live, [], [], HEARTBEAT_S / 2)
        now = time.monotonic()
        for s in readable:
            r = socks.index(s)
            try:
                kind, payload = recv_frame(s)
            except EOFError:
                closed.add(r)  # its process is gone: no need to wait for the heartbeat to lapse
                continue
            last[r] = now
            if kind == RESULT:
                results[r] = payload.decode()
            elif kind == READY:
                ready.add(r)
        if args.fault != "none" and len(ready) == n and faulty not in dead and faulty not in results:
            if not getattr(main, "faulted", False):
                main.faulted = True
                time.sleep(0.3)  # the others are blocked in their wait now
                os.kill(pids[faulty], signal.SIGSTOP if args.fault == "stop" else signal.SIGKILL)
                say(f"parent: worker {faulty} {'stopped' if args.fault == 'stop' else 'killed'}")
        for r in range(n):
            if r in dead or r in results:
                continue
            if r in closed:
                why = "its socket to the daemon closed (the daemon's health lane)"
            elif now - last[r] > SILENT_S:
                why = f"no heartbeat for {SILENT_S} s (the daemon's health lane)"
            else:
                continue
            dead.add(r)
            say(f"parent: worker {r}: {why}: telling the others")
            for q, s in enumerate(socks):
                if q not in dead and q not in results:
                    send_frame(s, FAILED, f"{r} {why}".encode())
    for q, s in enumerate(socks):
        if q not in dead:
            try:
                send_frame(s, RELEASE)
            except OSError:
                pass
    for r, pid in enumerate(pids):
        if r in dead:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if r not in dead and (os.waitstatus_to_exitcode(status) != 0 or results.get(r) != "OK"):
            say(f"parent: worker {r}: {results.get(r, 'no result')}, exit {os.waitstatus_to_exitcode(status)}")
            failed = True
    want_dead = {faulty} if args.fault != "none" else set()
    if dead != want_dead:
        say(f"parent: failed workers {sorted(dead)}, expected {sorted(want_dead)}")
        failed = True
    say(f"domain_job: {'FAILED' if failed else 'OK'} ({n} workers, fault {args.fault}, {args.transport})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
