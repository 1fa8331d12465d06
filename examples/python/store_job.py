#!/usr/bin/env python3
"""rwin under a control plane of your own: your store, your processes, your heartbeat (docs/EMBEDDING.md).

The parent plays the runtime's control plane: it forks its workers first (before any thread), then
serves a key-value store over its own TCP socket (a dict; JSON lines), as a runtime's daemon would.
Each worker starts rwin on that store with rwin.Context(store=..., rank=r, nranks=n): no rwinrun, no
RWIN_* variable, no rwin store server or listening port. The workers run a ring shift, an allreduce
and a fetch_add ticket dispenser, and a heartbeat of their own (a key per rank, rewritten every
0.1 s); with --kill K worker K dies (SIGKILL) afterwards and every survivor, blocked in a wait for it,
is told by its heartbeat thread through ctx.fail_peer and names it.

    /usr/bin/python3 examples/python/store_job.py -n 3 [--kill 2] [--transport ucx]

Exit status 0 when every worker did what it should (the killed one excepted).
"""
import argparse
import base64
import datetime
import json
import os
import signal
import socket
import sys
import threading
import time

import _rwin_path  # noqa: F401,E402  (finds rwin: the build tree, or Debian's python3)
import numpy as np  # noqa: E402

import rwin  # noqa: E402

def say(msg):
    """One write per line: the workers share the parent's stdout, and print() may split a line in two."""
    os.write(1, (msg + "\n").encode())


HEARTBEAT_S = 0.1  # each worker rewrites its beat this often
SILENT_S = 1.5     # a beat unchanged this long is a dead worker


# ---- the control plane's store: a dict behind a socket ------------------------------------------

def serve_store(listener, stop):
    """Serves the dict to every connection (a thread per connection), until stop is set."""
    data, counters, cond = {}, {}, threading.Condition()

    def handle(conn):
        f = conn.makefile("rwb")
        for line in f:
            req = json.loads(line)
            op, ans = req["op"], {"ok": True}
            with cond:
                if op == "set":
                    data[req["key"]] = base64.b64decode(req["value"])
                    cond.notify_all()
                elif op == "get":
                    ans["value"] = base64.b64encode(data[req["key"]]).decode()
                elif op == "add":
                    counters[req["key"]] = counters.get(req["key"], 0) + req["delta"]
                    ans["value"] = counters[req["key"]]
                elif op == "check":
                    ans["value"] = all(k in data for k in req["keys"])
                elif op == "wait":
                    ans["ok"] = cond.wait_for(lambda: all(k in data for k in req["keys"]), req["timeout"])
            f.write((json.dumps(ans) + "\n").encode())
            f.flush()
        conn.close()

    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


class SocketStore:
    """The client: torch.distributed.Store's methods over one connection (one thread at a time)."""

    def __init__(self, port, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.f = self.sock.makefile("rwb")

    def _call(self, **req):
        self.f.write((json.dumps(req) + "\n").encode())
        self.f.flush()
        ans = json.loads(self.f.readline())
        return ans

    def set(self, key, value):
        self._call(op="set", key=key, value=base64.b64encode(bytes(value)).decode())

    def get(self, key):
        return base64.b64decode(self._call(op="get", key=key)["value"])

    def add(self, key, delta):
        return self._call(op="add", key=key, delta=delta)["value"]

    def check(self, keys):
        return self._call(op="check", keys=list(keys))["value"]

    def wait(self, keys, timeout=datetime.timedelta(seconds=30)):
        if not self._call(op="wait", keys=list(keys), timeout=timeout.total_seconds())["ok"]:
            raise TimeoutError(f"wait for {len(keys)} keys timed out")


# ---- a worker -------------------------------------------------------------------------------------

def heartbeat(port, ctx, rank, n, stop):
    """Beats under hb/<rank> and tells rwin of a peer whose beat stopped (its own connection)."""
    store = SocketStore(port)
    last, changed, told = {}, {}, set()
    beat = 0
    while not stop.is_set():
        beat += 1
        store.set(f"hb/{rank}", str(beat).encode())
        now = time.monotonic()
        for p in range(n):
            if p == rank or p in told:
                continue
            seen = store.get(f"hb/{p}") if store.check([f"hb/{p}"]) else b""
            if seen != last.get(p):
                last[p], changed[p] = seen, now
            elif now - changed[p] > SILENT_S:
                ctx.fail_peer(p, f"heartbeat of worker {p} silent for {SILENT_S} s")
                told.add(p)
        time.sleep(HEARTBEAT_S)


def worker(port, rank, n, kill, transport):
    ctx = rwin.Context(store=SocketStore(port), rank=rank, nranks=n, transport=transport, timeout=30)
    stop = threading.Event()
    hb = threading.Thread(target=heartbeat, args=(port, ctx, rank, n, stop), daemon=True)
    hb.start()
    try:
        right, left = (rank + 1) % n, (rank - 1) % n
        # Ring shift: my row into the right neighbour's window, then a notify it waits for.
        size = 1024
        buf = ctx.alloc_window_buffer(size * 4)
        y = ctx.window(buf, [1, size], dtype=rwin.float32)
        sig = ctx.window(ctx.alloc_window_buffer(8 * 2), [1, 2], dtype=rwin.int64)
        x = (np.arange(size, dtype=np.float32) + 1000 * rank).reshape(1, size)
        ctx.put(y, right, x)
        ctx.notify(sig, peer=right, offsets=[0, 0], value=1)
        ctx.wait(sig, offsets=[0, 0], expected=1)
        assert np.array_equal(y.numpy()[0], np.arange(size, dtype=np.float32) + 1000 * left), "ring shift"
        # Allreduce across the workers.
        z = ctx.window(ctx.alloc_window_buffer(16 * 4), [1, 16], dtype=rwin.float32)
        z.numpy()[0] = rank + 1
        ctx.allreduce(z)
        assert np.all(z.numpy() == n * (n + 1) / 2), z.numpy()
        # Tickets from worker 0's counter: each handed out once.
        counter = ctx.window(ctx.alloc_window_buffer(8), [1, 1], dtype=rwin.int64)
        ctx.barrier()
        mine = [ctx.fetch_add(counter, peer=0, value=1) for _ in range(10)]
        ctx.barrier()
        app = SocketStore(port)  # the control plane's own keys, beside rwin's
        app.set(f"tickets/{rank}", json.dumps(mine).encode())
        app.wait([f"tickets/{p}" for p in range(n)])
        all_tickets = sorted(t for p in range(n) for t in json.loads(app.get(f"tickets/{p}")))
        assert all_tickets == list(range(10 * n)), all_tickets
        say(f"worker {rank}: ring shift, allreduce and {10 * n} tickets OK")
        if kill is None:
            return 0
        if rank == kill:
            os.kill(os.getpid(), signal.SIGKILL)
        try:  # worker `kill` never notifies: only its death ends this wait
            ctx.wait(sig, offsets=[0, 1], expected=1, timeout=25)
        except rwin.PeerFailedError as e:
            assert f"peer {kill} failed" in str(e), e
            say(f"worker {rank}: named the dead worker: {e}")
            return 0
        say(f"worker {rank}: the wait for worker {kill} ended without an error")
        return 1
    finally:
        stop.set()
        hb.join()
        ctx.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3, help="workers")
    ap.add_argument("--kill", type=int, default=None, help="this worker dies (SIGKILL) after the work")
    ap.add_argument("--transport", default=None, help="ucx (default) or verbs")
    args = ap.parse_args()
    # The control plane's socket, bound before the fork so the workers know its port.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    pids = []
    for r in range(args.n):  # workers first, before any thread (the runtime's order)
        pid = os.fork()
        if pid == 0:
            listener.close()
            code = 1
            try:
                code = worker(port, r, args.n, args.kill, args.transport)
            except Exception as e:  # noqa: BLE001 - report whatever failed, then exit non-zero
                say(f"worker {r}: {type(e).__name__}: {e}")
            finally:
                sys.stdout.flush()
                os._exit(code)
        pids.append(pid)
    stop = threading.Event()
    server = threading.Thread(target=serve_store, args=(listener, stop), daemon=True)
    server.start()
    ok = True
    for r, pid in enumerate(pids):
        _, status = os.waitpid(pid, 0)
        expected_kill = args.kill == r
        if expected_kill:
            ok &= os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        else:
            ok &= os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    stop.set()
    say("store_job: OK" if ok else "store_job: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
