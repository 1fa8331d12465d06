"""rwin.Context(store=...) (issue 25): a job on the caller's own store, with no rwinrun and no RWIN_*.

Not collective: each test makes its own processes (tests/scripts/python_agent.sh runs this file on
its own, over UCX tcp and shared memory, as it runs test_agent.py).
"""
import datetime
import os
import subprocess
import sys
import threading

import pytest

import rwin

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "python", "store_job.py")
# python_agent.sh's transport switch: "verbs" in the soft-RoCE guest, else UCX (UCX_TLS from the script).
TRANSPORT = os.environ.get("AGENT_TEST_TRANSPORT") or None


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RWIN_", "OMPI_", "PMI", "SLURM_"))}
    return env


@pytest.mark.parametrize("kill", [None, 2])
def test_three_workers_on_the_callers_socket_store(kill):
    """The example: workers forked first, a dict served over the parent's socket, ring shift, allreduce,
    tickets; with kill=2 worker 2 dies and both survivors name it (their heartbeat's fail_peer, or the
    transport when it saw the connection go first)."""
    args = [sys.executable, EXAMPLE, "-n", "3"] + (["--kill", str(kill)] if kill is not None else [])
    args += ["--transport", TRANSPORT] if TRANSPORT else []
    out = subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=150)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "store_job: OK" in text, text
    assert text.count("ring shift, allreduce and 30 tickets OK") == 3, text
    if kill is not None:
        assert text.count("named the dead worker: rwin: peer failed") == 2, text
        assert text.count("peer 2 failed (") == 2, text


class DictStore:
    """An in-process store (a job of one needs no other process)."""

    def __init__(self):
        self.d, self.cond = {}, threading.Condition()

    def set(self, key, value):
        with self.cond:
            self.d[key] = bytes(value)
            self.cond.notify_all()

    def get(self, key):
        return self.d[key]

    def add(self, key, delta):
        with self.cond:
            self.d[key] = str(int(self.d.get(key, b"0")) + delta).encode()
            return int(self.d[key])

    def check(self, keys):
        return all(k in self.d for k in keys)

    def wait(self, keys, timeout=datetime.timedelta(seconds=30)):
        with self.cond:
            if not self.cond.wait_for(lambda: self.check(keys), timeout.total_seconds()):
                raise TimeoutError("wait timed out")


def test_a_job_of_one_on_a_dict_and_the_refusals():
    store = DictStore()
    with rwin.Context(store=store, rank=0, nranks=1, timeout=10, transport=TRANSPORT) as ctx:
        assert (ctx.rank, ctx.nranks) == (0, 1)
        with pytest.raises(rwin.InvalidArgumentError, match="fail_peer: peer 0 is not another rank"):
            ctx.fail_peer(0, "myself")
    assert any(k.startswith("rwin/1/") for k in store.d), sorted(store.d)
    assert all(k.startswith("rwin/") for k in store.d), sorted(store.d)

    class NoWait:
        set = get = add = check = DictStore.set

    with pytest.raises(rwin.InvalidArgumentError, match=r"has no wait\(\) method"):
        rwin.Context(store=NoWait(), rank=0, nranks=1)
    with pytest.raises(rwin.InvalidArgumentError, match="give rank= and nranks= with the store"):
        rwin.Context(store=DictStore(), rank=0)

    class Failing(DictStore):
        def add(self, key, delta):
            raise OSError("the control plane is down")

    with pytest.raises(rwin.BootstrapError, match=r"store.add raised .*the control plane is down"):
        rwin.Context(store=Failing(), rank=0, nranks=1, timeout=5)
    # A peer that never comes: Timeout naming it, at the start-up deadline.
    with pytest.raises(rwin.TimeoutError, match=r"rank 1 of 2 \(never arrived\)"):
        rwin.Context(store=DictStore(), rank=0, nranks=2, startup_timeout=0.5)
