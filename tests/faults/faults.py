#!/usr/bin/python3
"""rwin fault suite: ranks started by hand (no rwinrun), then killed, stopped or pestered.

  faults.py BIN_DIR [--asan-bin DIR] [--trials N] [--seed S] [--only kill,stop,stranger]
            [--transports tcp,shm,owntcp] [--bound S] [--cap S] ...      (see --help)

kill    4 ranks of `ring_shift --mode put --size 4000000 --iters <large>` (and --add-trials more with
        `--mode add`: put(Add) through the staging protocol over tcp, applied by the target's receiver thread over
        owntcp, in place over shm; and --coll-trials more of `rwin-perf` looping one collective, the cases of
        COLL_CASES in turn: each algorithm the transport runs, over mixed on 2 hosts of 2 the chain, the push
        and the host leaders' path too); after a seeded random delay past
        start-up, kill -9 a random rank (rank 0 serves the store). Every survivor must exit non-zero within
        --bound seconds of the kill (detection time, measured here per survivor), not crash (signal death,
        sanitizer report, glibc abort, assertion), and print a last error line naming the victim
        (`peer R failed`; for rank 0 also `rank 0` + `store`). Past --cap a trial is a HANG.
stop    RWIN_TIMEOUT_MS=3000; SIGSTOP rank 0, then another rank: every other rank exits non-zero within
        timeout + 5 s with a diagnostic (`timed out` / `failed`); the stopped one is then SIGCONT+killed.
stranger  while a real keyed 4-rank job runs to OK: random bytes, unauthenticated frames, a rank impostor,
        3000 idle connections during start-up, many unauthenticated SETs (rank 0's VmRSS within +20 MB);
        and (with rwin-agent-perf, the release build) strangers at an agent's own-tcp transport listener,
        which stays open: random bytes, half hellos, hellos of every kind (a wrong proof and a frame where
        one is challenged; stranger.py tcp) while a real client connects and moves data; every hello
        answered, none accepted, client and server end cleanly.

Output: one PASS/FAIL line per check, a markdown detection table, the elapsed time, then exactly
`N passed, M failed`. Exit status 0 only if nothing failed. Every process started here is killed on exit
(also on SIGTERM/SIGINT, and by PR_SET_PDEATHSIG if this script is SIGKILLed); temp files are removed.
"""
import argparse
import atexit
import ctypes
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NRANKS = 4
TRANSPORTS = {
    "tcp": {"RWIN_TRANSPORT": "ucx", "UCX_TLS": "tcp"},
    "shm": {"RWIN_TRANSPORT": "ucx", "UCX_TLS": "posix,sysv,self"},
    "verbs": {"RWIN_TRANSPORT": "verbs"},
    "owntcp": {"RWIN_TRANSPORT": "tcp"},  # rwin's own sockets (transport/tcp)
    # The same with three connections per pair and every Write of 4 KiB or more striped (RWIN_TCP_SOCKETS):
    # a rank killed while its lanes carry stripes.
    "owntcp_striped": {"RWIN_TRANSPORT": "tcp", "RWIN_TCP_SOCKETS": "3", "RWIN_TCP_STRIPE_MIN": "4K"},
    # UCX's shared memory to the ranks of the same parity, rwin's tcp to the others (transport/mixed):
    # Job.start gives rank r RWIN_HOST_ID=faulthost<r % 2> (ring shifts), faulthost<r // 2> (collectives)
    "mixed": {"RWIN_TRANSPORT": "mixed", "UCX_TLS": "posix,sysv,self", "RWIN_IFNAME": "lo"},
}
# Collectives the kill trials run in a loop (`rwin-perf -t ... -s ...`, every rank), one per trial in turn from
# a seeded start: sizes that pick each algorithm (docs/CONTRACT.md "Collectives"; over mixed the ranks sit on
# 2 hosts of 2 consecutive ranks, so large reductions go as the chain along the hosts, rows of 64 KiB+ are
# pushed, small calls go through the host leaders).
COLL_CASES = [
    ("allreduce 1M", ["-t", "allreduce", "-s", "1M"]),  # ring / pull; mixed: the chain
    ("allreduce 8", ["-t", "allreduce", "-s", "8"]),  # Bruck / mesh; mixed: the leaders
    ("allreduce 64K mesh", ["-t", "allreduce", "-s", "64K", "--mode", "mesh"]),
    ("allgather 1M", ["-t", "allgather", "-s", "1M"]),  # rows of 256 KiB: pull in shm; mixed: pushed
    ("all_to_all 64K", ["-t", "all_to_all", "-s", "64K"]),  # mixed: the leaders
    ("all_to_all 4M", ["-t", "all_to_all", "-s", "4M"]),  # rows of 1 MiB; mixed: pushed
    ("reduce_scatter 1M", ["-t", "reduce_scatter", "-s", "1M"]),
    ("broadcast 4K", ["-t", "broadcast", "-s", "4K"]),
    ("barrier", ["-t", "barrier", "-s", "8"]),
]
# What a survivor must never print: sanitizers, glibc heap checks, assertions (rwin's or UCX's), UCX's
# own fatal-signal handler, an uncaught exception.
CRASH_RE = re.compile(
    r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|double free|"
    r"free\(\): |malloc\(\): |malloc_consolidate|corrupted (size|double-linked)|Assertion|"
    r"SIGSEGV|SIGBUS|SIGABRT|Segmentation fault|Caught signal|terminate called|stack smashing")
LAUNCH_VARS = re.compile(r"^(RWIN_(RANK|NRANKS|ROOT|JOB_KEY|TIMEOUT_MS|STARTUP_TIMEOUT_MS|TRANSPORT)|UCX_TLS|"
                         r"OMPI_COMM_WORLD_\w+|PMIX?_\w+|SLURM_\w+)$")

_libc = ctypes.CDLL(None, use_errno=True)


def _child_setup():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with this script even if it is SIGKILLed


class Registry:
    """Every process this suite starts (each leads its own process group) and the temp dir."""

    def __init__(self):
        self.procs = []
        self.tmp = tempfile.mkdtemp(prefix="rwin-faults.")

    def spawn(self, argv, env, out, err, stdout=None):
        with open(out, "wb") as o, open(err, "wb") as e:
            p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=stdout or o, stderr=e,
                                 start_new_session=True, preexec_fn=_child_setup)
        self.procs.append(p)
        return p

    def kill(self, p):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def leftovers(self, procs):
        """Process groups among `procs` that still have a member 2 s after kill() (a killed child of a
        rank may take a moment to be reaped by init)."""
        deadline = time.monotonic() + 2
        while True:
            left = []
            for p in procs:
                try:
                    os.killpg(p.pid, 0)
                    left.append(p.pid)
                except ProcessLookupError:
                    pass
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.02)

    def cleanup(self):
        for p in self.procs:
            self.kill(p)
        self.procs.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)


REG = None


def reserve_port():
    """A port on 127.0.0.1 for a job's root, and the socket that holds it: bound with SO_REUSEADDR and
    never listening, it keeps the kernel from handing the port to any other bind(0) or connect() while
    the job runs, and rwin's root, which also sets SO_REUSEADDR, can still listen on it. (Closing it
    at once, the usual free-port idiom, leaves a window in which another socket takes the port.)"""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1], s


def read(path, limit=1 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def short(text, n=150):
    text = text.strip().replace("\n", " | ")
    return text if len(text) <= n else text[: n - 3] + "..."


class Rank:
    def __init__(self, job, r, p, out, err, ready):
        self.job, self.r, self.p, self.out, self.err, self.ready = job, r, p, out, err, ready
        self.exit_t = None  # time.monotonic() when seen exited

    def poll(self):
        if self.exit_t is None and self.p.poll() is not None:
            self.exit_t = time.monotonic()
        return self.exit_t is not None

    def stdout(self):
        return read(self.out)

    def stderr(self):
        return read(self.err)

    def last_error_line(self):
        """The program's own last error line (`ring_shift: ...`, `rwin-perf: ...`), else the last non-empty line."""
        lines = [l for l in self.stderr().splitlines() if l.strip()]
        own = [l for l in lines if l.startswith(self.job.prog + ":")]
        if own:
            return own[-1]
        if lines:
            return lines[-1]
        out = [l for l in self.stdout().splitlines() if l.strip()]
        return out[-1] if out else ""

    def crash(self):
        """None, or why this process counts as crashed."""
        rc = self.p.returncode
        if rc is not None and rc < 0:
            return f"killed by {signal.Signals(-rc).name}"
        for text in (self.stderr(), self.stdout()):
            m = CRASH_RE.search(text)
            if m:
                line = text[text.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0]
                return f"report: {short(line, 120)}"
        return None


class Job:
    """NRANKS ring_shift (or `prog`) processes started by hand, meeting at a store on 127.0.0.1. Over mixed,
    rank r's host is r % 2 (`hosts="parity"`: every ring neighbour on the other host) or r // 2 ("block")."""

    seq = 0

    def __init__(self, bin_dir, transport, args, extra_env=None, key=None, prog="ring_shift", hosts="parity"):
        Job.seq += 1
        self.bin, self.args, self.prog, self.hosts = bin_dir, args, prog, hosts
        self.dir = os.path.join(REG.tmp, f"job{Job.seq}")
        os.makedirs(self.dir)
        self.port, self.port_hold = reserve_port()  # held for the job's life (the object's)
        self.key = key or secrets.token_hex(32)
        env = {k: v for k, v in os.environ.items() if not LAUNCH_VARS.match(k)}
        env.update(TRANSPORTS[transport])
        env.update({"RWIN_NRANKS": str(NRANKS), "RWIN_ROOT": f"127.0.0.1:{self.port}", "RWIN_JOB_KEY": self.key,
                    "RWIN_STARTUP_TIMEOUT_MS": "20000"})
        env.update(extra_env or {})
        self.env = env
        self.ranks = {}

    def start(self, r, tag=None, env=None):
        tag = tag or f"r{r}"
        e = dict(self.env, RWIN_RANK=str(r), **(env or {}))
        if e.get("RWIN_TRANSPORT") == "mixed":
            e["RWIN_HOST_ID"] = f"faulthost{r % 2 if self.hosts == 'parity' else r // 2}"
        ready = os.path.join(self.dir, f"{tag}.ready")
        out, err = os.path.join(self.dir, f"{tag}.out"), os.path.join(self.dir, f"{tag}.err")
        p = REG.spawn([os.path.join(self.bin, self.prog), *self.args, "--ready-file", ready], e, out, err)
        rank = Rank(self, r, p, out, err, ready)
        if tag == f"r{r}":
            self.ranks[r] = rank
        return rank

    def start_all(self):
        for r in range(NRANKS):
            self.start(r)

    def wait_ready(self, seconds):
        """True once every rank made its ready file; False if one exited first or time ran out."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if all(os.path.exists(k.ready) for k in self.ranks.values()):
                return True
            if any([k.poll() for k in self.ranks.values()]):
                return False
            time.sleep(0.01)
        return False

    def wait_exit(self, ranks, until):
        """Polls every rank each round (no short-circuit: each exit time is taken when it happens)."""
        while True:
            done = [k.poll() for k in ranks]
            if all(done) or time.monotonic() >= until:
                return all(done)
            time.sleep(0.005)

    def finish(self):
        """Kill what is left; returns the process groups that survived the kill (should be none)."""
        procs = [k.p for k in self.ranks.values()]
        for p in procs:
            REG.kill(p)
        return REG.leftovers(procs)

    def ok(self):
        """None if the job ran to OK on every rank, else why not."""
        bad = []
        for r, k in sorted(self.ranks.items()):
            out, rc = k.stdout(), k.p.returncode
            if rc != 0 or not re.search(r"^OK$", out, re.M) or k.crash():
                bad.append(f"rank {r} rc={rc} {k.crash() or ''} last: {short(k.last_error_line(), 100)!r}")
        if 0 in self.ranks and "all ranks OK" not in self.ranks[0].stdout():
            bad.append("rank 0 printed no 'all ranks OK'")
        return "; ".join(bad) if bad else None


class Suite:
    def __init__(self, a):
        self.a = a
        self.passed = self.failed = 0
        self.rows = []

    def check(self, ok, text):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'PASS' if ok else 'FAIL'} {text}", flush=True)

    # ---- kill -9 -----------------------------------------------------------------------------------
    def kill_trials(self, build, bin_dir, transport, rng, mode="put", trials=None):
        a = self.a
        trials = a.trials if trials is None else trials
        if trials <= 0:
            return
        stats = {"ok": 0, "hang": 0, "crash": 0, "wrong": 0, "slow": 0, "other": 0}
        times = []
        lo, hi = a.delay
        first_case = rng.randrange(len(COLL_CASES)) if mode == "coll" else 0  # (the put trials' draws as before)
        for i in range(1, trials + 1):
            victim, delay = rng.randrange(NRANKS), rng.uniform(lo, hi)
            env = {"RWIN_TIMEOUT_MS": str(a.timeout_ms)}
            if mode == "coll":
                # 5e6 calls outlast the delay before the kill; rwin-perf keeps a sample per call (40 MB: more
                # made the 2 GiB soft-RoCE guest's OOM killer take survivors).
                label, args = COLL_CASES[(first_case + i - 1) % len(COLL_CASES)]
                job = Job(bin_dir, transport, [*args, "-n", "5000000", "--max-bytes", str(1 << 60), "--no-pin",
                                               "--timeout-ms", str(a.timeout_ms)], env, prog="rwin-perf", hosts="block")
                what = f"coll {label}"
            else:
                job = Job(bin_dir, transport, ["--mode", mode, "--size", str(a.size), "--iters", "100000000"], env)
                what = "" if mode == "put" else mode
            job.start_all()
            name = f"kill {build} {transport}{' ' + what if what else ''} {i}/{trials}: rank {victim}"
            flags, detail = self.one_kill(job, victim, delay, times)
            left = job.finish()
            if left:
                flags.add("hang")
                detail += f"; process groups left after kill: {left}"
            # A trial counts in every column it qualifies for (a hang trial may also have crashed).
            for f in flags or {"ok"}:
                stats[f] += 1
            self.check(not flags, f"{name} [{','.join(sorted(flags)) or 'ok'}] {detail}")
        self.rows.append((build if mode == "put" else f"{build} {mode}", transport, trials, stats, times))

    def one_kill(self, job, victim, delay, times):
        a = self.a
        if not job.wait_ready(a.startup_cap):
            why = "; ".join(f"rank {r} rc={k.p.returncode} {short(k.last_error_line(), 80)!r}"
                            for r, k in job.ranks.items() if k.poll()) or f"not started after {a.startup_cap} s"
            return {"other"}, f"start-up failed: {why}"
        end = time.monotonic() + delay
        while time.monotonic() < end:  # a rank ending on its own before the kill spoils the trial
            if any([k.poll() for k in job.ranks.values()]):
                gone = [r for r, k in job.ranks.items() if k.poll()]
                return {"other"}, f"rank(s) {gone} exited before the kill: " + "; ".join(
                    short(job.ranks[r].last_error_line(), 80) for r in gone)
            time.sleep(0.005)
        os.kill(job.ranks[victim].p.pid, signal.SIGKILL)
        t_kill = time.monotonic()
        survivors = [k for r, k in sorted(job.ranks.items()) if r != victim]
        job.wait_exit(survivors, t_kill + a.cap)
        flags, parts, lines = set(), [], {}
        for k in survivors:
            if not k.poll():
                parts.append(f"r{k.r} still running at {a.cap:g} s")
                flags.add("hang")
                continue
            dt = k.exit_t - t_kill
            times.append(dt)
            rc, crash, line = k.p.returncode, k.crash(), k.last_error_line()
            named = re.search(rf"\bpeer {victim} failed\b", line) or (
                victim == 0 and re.search(r"\brank 0\b", line) and "store" in line)
            if crash:
                flags.add("crash")
            elif rc == 0 or not named:
                flags.add("wrong")
            if dt > a.bound:
                flags.add("slow")
            parts.append(f"r{k.r} rc={rc} {dt:.2f}s" + (f" CRASH {crash}" if crash else ""))
            lines.setdefault(short(line, 160), []).append(k.r)
        msg = "; ".join(f"r{','.join(map(str, rs))}: {l!r}" for l, rs in lines.items())
        return flags, f"killed after {delay:.2f} s; {', '.join(parts)}; last lines {msg}"

    # ---- SIGSTOP --------------------------------------------------------------------------------------
    def stop_trial(self, build, bin_dir, transport, victim, rng):
        a = self.a
        timeout_ms, grace = 3000, 5.0
        job = Job(bin_dir, transport, ["--mode", "put", "--size", str(a.size), "--iters", "100000000"],
                  {"RWIN_TIMEOUT_MS": str(timeout_ms)})
        job.start_all()
        name = f"stop {build} {transport}: SIGSTOP rank {victim}"
        if not job.wait_ready(a.startup_cap):
            job.finish()
            return self.check(False, f"{name}: start-up failed")
        time.sleep(rng.uniform(0.3, 1.0))
        vk = job.ranks[victim]
        if vk.poll():
            job.finish()
            return self.check(False, f"{name}: rank {victim} exited before SIGSTOP")
        os.killpg(vk.p.pid, signal.SIGSTOP)
        t_stop = time.monotonic()
        others = [k for r, k in sorted(job.ranks.items()) if r != victim]
        bound = timeout_ms / 1000 + grace
        job.wait_exit(others, t_stop + max(bound, a.cap))
        bad, parts = [], []
        for k in others:
            if not k.poll():
                bad.append(f"r{k.r} still running at {max(bound, a.cap):g} s")
                continue
            dt, rc, crash, line = k.exit_t - t_stop, k.p.returncode, k.crash(), k.last_error_line()
            parts.append(f"r{k.r} rc={rc} {dt:.2f}s {short(line, 110)!r}")
            if crash:
                bad.append(f"r{k.r} crashed: {crash}")
            if rc == 0:
                bad.append(f"r{k.r} exited 0")
            if dt > bound:
                bad.append(f"r{k.r} took {dt:.2f} s > {bound:g} s")
            if not re.search(r"timed out|timeout|failed", line):
                bad.append(f"r{k.r} no diagnostic")
        # SIGCONT + kill the stopped one; then nothing of the job may be left.
        left = job.finish()
        if left:
            bad.append(f"process groups left: {left}")
        self.check(not bad, f"{name} (timeout {timeout_ms} ms + {grace:g} s): " + "; ".join(bad + parts))

    # ---- strangers ---------------------------------------------------------------------------------
    def stranger(self, job, mode, *args):
        out = os.path.join(job.dir, f"stranger-{mode}.out")
        p = REG.spawn(["/usr/bin/python3", os.path.join(HERE, "stranger.py"), mode, "--port", str(job.port),
                       *map(str, args)], None, out, out + ".err")
        return p, out

    def wait_proc(self, p, seconds):
        try:
            return p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            REG.kill(p)
            return None

    def stranger_checks(self, build, bin_dir):
        a = self.a
        base = ["--mode", "put", "--size", "100000", "--iters", "100000000", "--seconds"]
        tr = "shm" if "shm" in a.transports else a.transports[0]  # the store is TCP whatever UCX uses

        def job_ok(job, name, extra=""):
            job.wait_exit(list(job.ranks.values()), time.monotonic() + a.cap)
            why = job.ok()
            left = job.finish()
            if left:
                why = (why or "") + f" process groups left: {left}"
            self.check(why is None, f"stranger {build} {name}: real job {'OK' if why is None else why}{extra}")

        # (a) random bytes, from the moment rank 0 listens until the job has started up.
        job = Job(bin_dir, tr, base + ["3"])
        job.start_all()
        p, out = self.stranger(job, "random", "--conns", 300, "--seconds", 2.5, "--seed", a.seed)
        rc = self.wait_proc(p, 30)
        job_ok(job, "random bytes", f"; {short(read(out), 160)} (rc={rc})")

        # (b) well-formed frames without the key, once every key of the start-up exists.
        job = Job(bin_dir, tr, base + ["3"])
        job.start_all()
        ready = job.wait_ready(a.startup_cap)
        p, out = self.stranger(job, "frames", "--seconds", 10)
        rc = self.wait_proc(p, 30)
        lines = [l.replace("stranger: frames: ", "") for l in read(out).splitlines()]
        self.check(ready and rc == 0, f"stranger {build} unauthenticated frames served nothing (rc={rc}): "
                   + short(" | ".join(lines), 600))
        job_ok(job, "unauthenticated frames")

        # (c) a rank impostor: same RWIN_RANK=2, same key, once the real rank 2 has joined.
        job = Job(bin_dir, tr, base + ["4"])
        job.start_all()
        ready = job.wait_ready(a.startup_cap)
        imp = job.start(2, tag="impostor", env={"RWIN_STARTUP_TIMEOUT_MS": "10000"})
        imp.job.wait_exit([imp], time.monotonic() + a.cap)
        done = imp.poll()
        rc = imp.p.returncode
        crash = imp.crash() if done else None  # (a SIGKILL from us below is no crash)
        text = imp.stderr() + imp.stdout()
        REG.kill(imp.p)
        logged = "already joined" in job.ranks[0].stderr()
        self.check(ready and done and rc != 0 and "already joined" in text and not crash,
                   f"stranger {build} rank impostor refused: rc={rc}"
                   f"{'' if done else f' (still running after {a.cap:g} s, killed)'} {crash or ''}"
                   f" last: {short(imp.last_error_line(), 140)!r}; rank 0 logged it: {logged}")
        job_ok(job, "rank impostor")

        # (d) 3000 idle connections held open from before ranks 1..3 start.
        job = Job(bin_dir, tr, base + ["1"])
        job.start(0)
        p, out = self.stranger(job, "idle", "--conns", 3000, "--hold", a.cap + 30, "--connect-seconds", 10)
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and "idle: " not in read(out) and p.poll() is None:
            time.sleep(0.02)
        opened = short(read(out), 80)
        for r in range(1, NRANKS):
            job.start(r)
        job.wait_exit(list(job.ranks.values()), time.monotonic() + a.cap)
        p.send_signal(signal.SIGTERM)
        self.wait_proc(p, 10)
        job_ok(job, "3000 idle connections during start-up", f"; {short(read(out), 160)}")

        # (e) memory: many SETs without the key; rank 0's VmRSS afterwards within +20 MB.
        job = Job(bin_dir, tr, base + ["8"])
        job.start_all()
        ready = job.wait_ready(a.startup_cap)
        time.sleep(0.3)
        before = vmrss_kb(job.ranks[0].p.pid)
        p, out = self.stranger(job, "sets", "--count", 1000, "--value-bytes", 128 << 10, "--seconds", 5)
        rc = self.wait_proc(p, 30)
        time.sleep(0.3)
        after = vmrss_kb(job.ranks[0].p.pid)
        alive = not job.ranks[0].poll()
        grew = (after - before) / 1024 if before and after else float("nan")
        self.check(ready and alive and grew <= 20,
                   f"stranger {build} rank 0 VmRSS {before} kB -> {after} kB (+{grew:.1f} MB, bound +20 MB)"
                   f"{'' if alive else ' (rank 0 ended before the second reading)'}; {short(read(out), 120)}")
        job_ok(job, "unauthenticated SETs")

        # (f) an agent's listener over rwin's own tcp transport, which stays open for run-time peers:
        # strangers (stranger.py tcp) while a real client connects and moves data through it. Needs
        # rwin-agent-perf (the release build; the ASan tree has no benchmarks).
        if os.access(os.path.join(bin_dir, "rwin-agent-perf"), os.X_OK):
            self.agent_tcp_strangers(build, bin_dir)

    def agent_tcp_strangers(self, build, bin_dir):
        a = self.a
        Job.seq += 1
        d = os.path.join(REG.tmp, f"agent{Job.seq}")
        os.makedirs(d)
        tool = os.path.join(bin_dir, "rwin-agent-perf")
        common = ["--transport", "tcp", "--max-bytes", "1M", "--iters", "2000", "--bw-iters", "50"]
        desc = os.path.join(d, "desc")
        env = {k: v for k, v in os.environ.items() if not LAUNCH_VARS.match(k)}
        sout = os.path.join(d, "server.out")
        server = REG.spawn([tool, *common, "--progress-thread", "server", "--desc", desc], env, sout, sout + ".err")
        port = None
        deadline = time.monotonic() + a.startup_cap
        while port is None and time.monotonic() < deadline and server.poll() is None:
            m = re.search(r"tcp\(127\.0\.0\.1:(\d+)\)", read(sout))
            port = int(m.group(1)) if m else None
            time.sleep(0.02)
        if port is None:
            REG.kill(server)
            self.check(False, f"stranger {build} agent over tcp: no transport port announced "
                       f"({short(read(sout) + read(sout + '.err'), 200)})")
            return
        out = os.path.join(d, "stranger-tcp.out")
        p = REG.spawn(["/usr/bin/python3", os.path.join(HERE, "stranger.py"), "tcp", "--port", str(port),
                       "--conns", "1500", "--seconds", "6", "--seed", str(a.seed)], None, out, out + ".err")
        time.sleep(0.5)  # strangers first, then the real client among them
        cout = os.path.join(d, "client.out")
        client = REG.spawn([tool, *common, "client", "--desc", desc], env, cout, cout + ".err")
        crc = self.wait_proc(client, a.cap + 30)
        src = self.wait_proc(server, 20)
        rc = self.wait_proc(p, 30)
        text = read(out)
        m = re.search(r"(\d+) hellos answered", text)
        late = re.search(r"(\d+) unanswered", text)
        self.check(crc == 0 and "get MiB/s" in read(cout),
                   f"stranger {build} agent over tcp: the real client ran beside them (rc={crc}) "
                   f"{short(read(cout + '.err'), 160) if crc != 0 else ''}")
        self.check(src == 0, f"stranger {build} agent over tcp: the server ended cleanly (rc={src}) "
                   f"{short(read(sout + '.err'), 160) if src != 0 else ''}")
        answered = m is not None and int(m.group(1)) > 0 and late is not None and late.group(1) == "0"
        self.check(rc == 0 and answered,
                   f"stranger {build} agent over tcp: every hello answered, none accepted (rc={rc}): "
                   f"{short(text, 300)}")

    # ---- report --------------------------------------------------------------------------------------
    def table(self):
        if not self.rows:
            return
        a = self.a
        print(f"\nDetection table: kill -9 of a random rank of 4 (`ring_shift --mode put --size {a.size}`; \"add\": --mode"
              f" add; \"coll\": rwin-perf looping a collective of COLL_CASES), ranks started by hand; detection = kill to a survivor's exit, per survivor; bound {a.bound:g} s, hang = still"
              f" running {a.cap:g} s after the kill; a trial counts in every failure column it qualifies for;"
              f" RWIN_TIMEOUT_MS={a.timeout_ms}; seed {a.seed}.")
        print(f"Command: tests/faults/run.sh {' '.join(sys.argv[1:])}\n")
        print("| build | transport | trials | ok | hangs | crashes | wrong message | slow (> bound) | other |"
              " detection p50 (s) | max (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for build, tr, n, s, times in self.rows:
            p50 = f"{statistics.median(times):.2f}" if times else "-"
            mx = f"{max(times):.2f}" if times else "-"
            if s["hang"]:
                mx = f"> {a.cap:g}"
            print(f"| {build} | {tr} | {n} | {s['ok']} | {s['hang']} | {s['crash']} | {s['wrong']} | {s['slow']} |"
                  f" {s['other']} | {p50} | {mx} |")
        print()


def vmrss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    global REG
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bin", help="build bin dir (ring_shift)")
    p.add_argument("--asan-bin", help="an ASan+UBSan build's bin dir: the same kill trials again with it")
    p.add_argument("--asan-only", action="store_true",
                   help="with --asan-bin: only the ASan build's trials (run-all.sh runs the release build's"
                        " earlier, while the ASan build compiles); bin is still checked")
    p.add_argument("--trials", type=int, default=20, help="kill trials per transport and build (default 20)")
    p.add_argument("--stop-one", action="store_true",
                   help="one SIGSTOP trial per transport: rank 0 (the store) for the first, another rank for the rest")
    p.add_argument("--add-trials", type=int, default=3,
                   help="kill trials of ring_shift --mode add (put(Add)) per transport and build (default 3)")
    p.add_argument("--coll-trials", type=int, default=None,
                   help="kill trials during a collective (rwin-perf, the cases of COLL_CASES in turn) per transport and"
                        f" build (default {len(COLL_CASES)}: each case once; 0 where bin has no rwin-perf, a tree built"
                        " without benchmarks)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    p.add_argument("--only", default="kill,stop,stranger", help="comma list of kill, stop, stranger")
    p.add_argument("--transports", default="tcp,shm,owntcp,owntcp_striped,mixed",
                   help="comma list of tcp (UCX's), shm, owntcp (RWIN_TRANSPORT=tcp), owntcp_striped (the same, 3 sockets"
                        " per pair), mixed (shm to even or odd"
                        " ranks, own tcp to the others), verbs (default tcp,shm,owntcp,owntcp_striped,mixed)")
    p.add_argument("--size", type=int, default=4000000, help="ring_shift --size for kill/stop trials")
    p.add_argument("--delay", default="0.3:2.5", help="kill delay range after start-up, s (default 0.3:2.5)")
    p.add_argument("--bound", type=float, default=5.0, help="detection bound, s (default 5; verbs: 10)")
    p.add_argument("--cap", type=float, default=30.0, help="per-trial hard cap, s: past it a HANG (default 30)")
    p.add_argument("--timeout-ms", type=int, default=15000,
                   help="RWIN_TIMEOUT_MS in kill trials (default 15000: far above the bound, so an operation"
                        " timeout is not mistaken for detection, and with the store's up-to-10 s shutdown grace"
                        " still inside the cap, so 'timed out' and 'hung' stay apart)")
    p.add_argument("--startup-cap", type=float, default=30.0, help="s to wait for start-up (default 30)")
    a = p.parse_args()
    a.only = a.only.split(",")
    a.transports = a.transports.split(",")
    a.delay = tuple(float(x) for x in a.delay.split(":"))
    if a.seed is None:
        a.seed = secrets.randbelow(1 << 31)
    for t in a.transports:
        if t not in TRANSPORTS:
            p.error(f"unknown transport {t}")
    builds = [("release", os.path.abspath(a.bin))]
    if a.asan_bin:
        builds.append(("asan", os.path.abspath(a.asan_bin)))
    elif a.asan_only:
        p.error("--asan-only needs --asan-bin")
    for _, b in builds:
        if not os.access(os.path.join(b, "ring_shift"), os.X_OK):
            p.error(f"no ring_shift in {b}")
    # The trials during a collective need rwin-perf, a benchmark: the sanitizer trees do not build it
    # (their multi-process tests MemberDyingMid* kill a member inside each algorithm instead).
    coll_builds = {b for _, b in builds if os.access(os.path.join(b, "rwin-perf"), os.X_OK)}
    if a.coll_trials is None:
        a.coll_trials = len(COLL_CASES) if os.path.abspath(a.bin) in coll_builds else 0
        if not a.coll_trials:
            print(f"faults: no rwin-perf in {a.bin} (built without benchmarks): no kill trials during a collective")
    elif a.coll_trials > 0 and "kill" in a.only and os.path.abspath(a.bin) not in coll_builds:
        p.error(f"--coll-trials {a.coll_trials}: no rwin-perf in {a.bin}")

    run_builds = builds[1:] if a.asan_only else builds
    REG = Registry()
    atexit.register(REG.cleanup)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    t0 = time.monotonic()
    print(f"faults: seed {a.seed}; builds {', '.join(f'{n}={b}' for n, b in run_builds)}; transports"
          f" {','.join(a.transports)}; {a.trials} kill trials each ({a.add_trials} add, {a.coll_trials} during a"
          f" collective: builds with rwin-perf, {', '.join(n for n, b in run_builds if b in coll_builds) or 'none'});"
          f" checks {','.join(a.only)}", flush=True)
    s = Suite(a)
    rng = random.Random(a.seed)
    try:
        for build, b in run_builds:
            if "kill" in a.only:
                for t in a.transports:
                    s.kill_trials(build, b, t, rng)
                    s.kill_trials(build, b, t, rng, mode="add", trials=a.add_trials)
                    if b in coll_builds:
                        s.kill_trials(build, b, t, rng, mode="coll", trials=a.coll_trials)
        b = builds[0][1]
        if "stop" in a.only and not a.asan_only:
            for i, t in enumerate(a.transports):
                # rank 0 serves the store: stopping it and stopping another rank are different faults.
                # --stop-one (the CI tier): rank 0 for the first transport, another rank for the rest.
                if not a.stop_one or i == 0:
                    s.stop_trial("release", b, t, 0, rng)
                if not a.stop_one or i > 0:
                    s.stop_trial("release", b, t, rng.randrange(1, NRANKS), rng)
        if "stranger" in a.only:
            for build, b in run_builds:
                s.stranger_checks(build, b)
    finally:
        REG.cleanup()
    s.table()
    print(f"faults: elapsed {time.monotonic() - t0:.0f} s")
    print(f"{s.passed} passed, {s.failed} failed")
    return 0 if s.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
