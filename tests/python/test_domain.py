"""rwin.Domain (issue 25 item 5): prepare -> import_table -> commit / abort -> release, the descriptors
carried by the caller.

Not collective: each test makes its own processes or domains (tests/scripts/python_agent.sh runs this
file on its own, over UCX tcp and shared memory, and over verbs in the soft-RoCE guest).
"""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rwin

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "python", "domain_job.py")
TRANSPORT = os.environ.get("AGENT_TEST_TRANSPORT") or "ucx"


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("RWIN_", "OMPI_", "PMI", "SLURM_"))}


@pytest.mark.parametrize("fault", ["stop", "kill", "none"])
def test_the_runtime_flow_example(fault):
    """Workers forked first, descriptors in the parent's frames, a mangled table aborted, the right one
    committed, ring shift + allreduce, and the faulty worker named by every survivor through fail_peer
    from the parent's heartbeat lane."""
    args = [sys.executable, EXAMPLE, "-n", "3", "--fault", fault, "--transport", TRANSPORT]
    out = subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=200)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert f"domain_job: OK (3 workers, fault {fault}" in text, text
    assert "checksum does not match" in text and "parent: aborted" in text and "parent: committed" in text, text
    assert text.count("ring shift and allreduce OK") == 3, text
    said = out.stdout  # the workers' and the parent's lines (rwin's log lines go to stderr)
    if fault != "none":
        assert said.count("the wait ended after") == 2 and said.count("rank 2 failed: ") == 2, text
    if fault == "stop":  # a hung worker: only the heartbeat lane can tell (its sockets stay open)
        assert said.count("rank 2 failed: no heartbeat for 1.0 s (the daemon's health lane) (fail_peer)") == 2, text


def pair(window=4096, ident=0xAB, **kw):
    a = rwin.Domain(ident, 0, 2, window, signals=4, transport=TRANSPORT, **kw)
    b = rwin.Domain(ident, 1, 2, window, signals=4, transport=TRANSPORT, **kw)
    return a, b


def test_two_domains_in_one_process_every_call():
    a, b = pair()
    with a, b:
        assert a.state == "prepared" and len(a.descriptor()) <= rwin.Domain.MAX_DESCRIPTOR_BYTES
        table = [a.descriptor(), b.descriptor()]
        with pytest.raises(rwin.InvalidArgumentError, match="must be committed"):
            a.put(1, 0, np.zeros(4, np.uint8))
        a.import_table(table)
        b.import_table(table)
        a.commit()
        b.commit()
        assert a.state == b.state == "committed"
        x = np.arange(256, dtype=np.float32)
        a.put_notify(1, 1024, x, signal=0, value=1)
        b.wait(0, 1)
        assert np.array_equal(b.window(np.float32)[256:512], x)
        back = np.empty(256, np.float32)
        a.get(back, 1, 1024)
        assert np.array_equal(back, x)
        b.notify(0, 3, 9, op=rwin.NotifyOp.Set)
        b.flush()
        a.wait(3, 9, cmp="==")
        assert a.signal(3) == 9 and a.signals[3] == 9 and a.test(3, 9, rwin.WaitCmp.Eq)
        with pytest.raises(rwin.OutOfBoundsError, match="window of 4096 bytes"):
            a.put(1, 4090, x)
        with pytest.raises(rwin.PeerOutOfRangeError, match="peer 2"):
            a.put(2, 0, x)
        with pytest.raises(rwin.OutOfBoundsError, match="signal 4 is outside"):
            a.notify(1, 4)
        with pytest.raises(rwin.TimeoutError, match="within 50 ms"):
            a.wait(0, 1, timeout=0.05)
        view = b.window()
    # Released by the with blocks; the view stays readable, the calls say released.
    assert b.state == "released" and view[1024:1028].tobytes() == x[:1].tobytes()
    with pytest.raises(rwin.UseAfterFreeError, match="released"):
        b.put(0, 0, x)


def test_bad_tables_are_named_and_leave_the_domain_prepared():
    a, b = pair()
    other = rwin.Domain(0xCD, 0, 2, 4096, signals=4, transport=TRANSPORT)
    bigger = rwin.Domain(0xAB, 0, 2, 8192, signals=4, transport=TRANSPORT)
    da, db = a.descriptor(), b.descriptor()
    cases = [
        ([da], rwin.InvalidArgumentError, "1 descriptors for a domain of 2"),
        ([db, da], rwin.InvalidArgumentError, "entry 0 is rank 1's descriptor"),
        ([other.descriptor(), db], rwin.InvalidArgumentError, "foreign"),
        ([bigger.descriptor(), db], rwin.WindowMismatchError, "window of 8192 bytes"),
        ([da[:-1] + bytes([da[-1] ^ 1]), db], rwin.InvalidArgumentError, "checksum does not match"),
        ([b"\0" * 64, db], rwin.InvalidArgumentError, "no 'RWDM' magic"),
        ([da, a.descriptor()], rwin.InvalidArgumentError, "entry 1 is of|entry 1 is rank 0"),
    ]
    for table, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            b.import_table(table)
        assert b.state == "prepared"
    b.import_table([da, db])
    b.abort()
    assert b.state == "prepared"
    b.import_table([da, db])
    b.commit()
    for d in (a, b, other, bigger):
        d.release()


def test_fail_peer_from_another_thread_ends_a_blocked_wait():
    a, b = pair()
    table = [a.descriptor(), b.descriptor()]
    for d in (a, b):
        d.import_table(table)
        d.commit()
    t = threading.Timer(0.3, lambda: a.fail_peer(1, "heartbeat lost"))
    t.start()
    t0 = time.monotonic()
    with pytest.raises(rwin.PeerFailedError, match=r"rank 1 failed: heartbeat lost \(fail_peer\)"):
        a.wait(0, 1, timeout=30)
    assert time.monotonic() - t0 < 20  # ended by fail_peer, long before its own deadline
    t.join()
    assert a.failed_peers == [1]
    with pytest.raises(rwin.PeerFailedError, match="put of 8 bytes at offset 0 to rank 1"):
        a.put(1, 0, np.zeros(8, np.uint8))
    a.release()
    b.release()


def test_a_domain_does_not_cross_fork():
    a = rwin.Domain(1, 0, 1, 64, transport=TRANSPORT)
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            a.descriptor()
        except rwin.InvalidArgumentError as e:
            code = 0 if "does not cross fork" in str(e) else 4
        except BaseException:  # noqa: BLE001
            code = 5
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    a.release()
