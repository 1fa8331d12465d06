"""Helper of test_process.py: the runtime's pattern, one Python process that forks a worker which then
creates its Context. argv: ROOT RANK NRANKS. The worker joins a job of its own at ROOT, runs a ring step,
and then the last rank's worker leaves without closing: the others must see rwin.PeerFailedError.
Exit status: the worker's (0 = all as expected)."""
import os
import sys

import numpy as np

import rwin


def worker(root, r, n):
    with rwin.Context(rank=r, nranks=n, root=root, timeout=20) as c:
        buf = c.alloc_window_buffer(64)
        x = c.window(buf, [1, 4], dtype=rwin.int32)
        sig = c.window(buf, [1, 2], dtype=rwin.int32, offset=32)
        c.put(x, peer=(r + 1) % n, src=np.full(4, 10 + r, np.int32))
        c.notify(sig, peer=(r + 1) % n, offsets=[0, 0], value=1)
        c.wait(sig, offsets=[0, 0], expected=1)
        if not (x.numpy() == 10 + (r + n - 1) % n).all():
            print(f"worker {r}: got {x.numpy()}", file=sys.stderr)
            return 3
        c.barrier()
        if r == n - 1:
            os._exit(0)  # no close: the job loses this rank
        try:
            c.barrier()
            print(f"worker {r}: barrier passed without rank {n - 1}", file=sys.stderr)
            return 4
        except rwin.PeerFailedError as e:
            if e.code != "PeerFailed" or str(n - 1) not in e.message:
                print(f"worker {r}: unexpected message: {e.message}", file=sys.stderr)
                return 5
    return 0


def main():
    root, r, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = worker(root, r, n)
        except BaseException as e:  # noqa: BLE001
            print(f"worker {r}: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
