#!/usr/bin/env python3
"""The same tensor moved through gRPC streaming (the runtime's current path: 1 MiB chunks, bytes
messages, python3-grpcio) and through an rwin.Agent (put + flush, put_notify + flush, get), in one run.

  PYTHONPATH=build/python UCX_TLS=tcp UCX_NET_DEVICES=lo /usr/bin/python3 bench/agent_vs_grpc.py \
      --label loopback --out bench/results/agent-grpc

--role both (default) starts the server half as a subprocess on --host; --role server / client run the
halves apart (bench/agent_vs_grpc_netns.sh: one per network namespace). The server is passive: its main
thread sits in gRPC's wait_for_termination, its agent's progress thread serves the puts and gets.

Per size, interleaved: gRPC push (client streams chunks, the server copies them into its tensor and
answers), gRPC pull (the server streams its tensor, the client copies), rwin put + flush, rwin
put_notify + flush, rwin get. Latency: p50 (and mean) of single transfers; bandwidth: size x iterations
/ elapsed of back-to-back transfers, each complete before the next. Every path's data is checked
after its timed loop. Also: first-use connection set-up (a fresh agent's first import_region, which
connects and handshakes) and the first put + flush after it.
Writes OUT/LABEL.csv, OUT/LABEL.md (table and goal verdicts) and OUT/LABEL.png (gnuplot).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc
import numpy as np

import rwin

CHUNK = 1 << 20
SVC = "bench.Tensor"
KEEPALIVE = 300.0  # seconds; see serve()
GRPC_OPTS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(s[:-1] if s[-1:] in "KMG" else s) * mult


def size_text(n):
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return str(n)


def pattern(n, seed):
    return ((np.arange(n, dtype=np.int64) * 13 + seed) % 251).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------
# Server

def serve(args):
    cap = max(parse_size(s) for s in args.sizes.split(","))
    # keepalive_timeout: the client's agent has no progress thread and is silent while a 256 MiB gRPC
    # transfer runs (seconds); the default 5 s would declare it failed.
    agent = rwin.Agent(listen=f"{args.host}:0", transport=args.transport, progress_thread=True, op_timeout=120,
                       keepalive_timeout=KEEPALIVE, **({"ib_device": args.ib_device} if args.ib_device else {}))
    buf = np.zeros(cap, np.uint8)
    sig = np.zeros(8, np.int64)
    rbuf, rsig = agent.register(buf), agent.register(sig)
    stop = futures.Future()
    spin = threading.Event()
    spinning = threading.Event()

    def spinner():  # --server-progress spin: this thread drives the agent while the client's rwin ops run
        while not stop.done():
            if not spin.wait(0.05):
                continue
            spinning.set()
            while spin.is_set():
                agent.progress()
            spinning.clear()

    threading.Thread(target=spinner, daemon=True).start()

    def spin_rpc(req, ctx):
        if req == b"\x01":
            spin.set()
            spinning.wait(10)
        else:
            spin.clear()
        return b""

    def setup(req, ctx):
        return json.dumps({"data": rbuf.descriptor().hex(), "sig": rsig.descriptor().hex(),
                           "agent": agent.address, "capacity": cap}).encode()

    def push(it, ctx):  # the runtime's receive: chunks copied into the tensor as they arrive
        off = 0
        for chunk in it:
            n = len(chunk)
            buf[off:off + n] = np.frombuffer(chunk, np.uint8)
            off += n
        return off.to_bytes(8, "little")

    def pull(req, ctx):
        n = int.from_bytes(req, "little")
        for off in range(0, n, CHUNK):
            yield buf[off:min(n, off + CHUNK)].tobytes()

    def stop_rpc(req, ctx):
        stop.set_result(None)
        return b""

    h = grpc.method_handlers_generic_handler(SVC, {
        "Setup": grpc.unary_unary_rpc_method_handler(setup),
        "Push": grpc.stream_unary_rpc_method_handler(push),
        "Pull": grpc.unary_stream_rpc_method_handler(pull),
        "Stop": grpc.unary_unary_rpc_method_handler(stop_rpc),
        "Spin": grpc.unary_unary_rpc_method_handler(spin_rpc)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=GRPC_OPTS)
    server.add_generic_rpc_handlers((h,))
    port = server.add_insecure_port(f"{args.host}:{args.grpc_port}")
    server.start()
    print(f"READY {args.host}:{port}", flush=True)
    stop.result()  # passive: only gRPC's threads and the agent's progress thread run (and the spinner, if asked)
    spin.clear()
    server.stop(grace=1).wait()
    rbuf.deregister()
    rsig.deregister()
    agent.close()
    return 0


# ---------------------------------------------------------------------------------------------------
# Client

class Timer:
    def __init__(self):
        self.samples = []

    def run(self, fn, iters):
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            self.samples.append(time.perf_counter() - t0)
        return self


def client(args, target):
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ch = grpc.insecure_channel(target, options=GRPC_OPTS)
    grpc.channel_ready_future(ch).result(timeout=30)
    setup = ch.unary_unary(f"/{SVC}/Setup")
    push = ch.stream_unary(f"/{SVC}/Push")
    pull = ch.unary_stream(f"/{SVC}/Pull")
    spin = ch.unary_unary(f"/{SVC}/Spin")
    info = json.loads(setup(b"", timeout=30))
    kw = {"ib_device": args.ib_device} if args.ib_device else {}

    # first-use connection set-up: fresh agents, each one's first import_region connects
    setups, first_puts = [], []
    probe = np.zeros(8, np.uint8)
    for _ in range(args.setup_trials):
        with rwin.Agent(listen=f"{args.host}:0", transport=args.transport, op_timeout=60, **kw) as a:
            t0 = time.perf_counter()
            r = a.import_region(bytes.fromhex(info["data"]))
            t1 = time.perf_counter()
            a.put(r, 0, probe)
            a.flush()
            t2 = time.perf_counter()
            setups.append(t1 - t0)
            first_puts.append(t2 - t1)

    agent = rwin.Agent(listen=f"{args.host}:0", transport=args.transport, op_timeout=120, keepalive_timeout=KEEPALIVE,
                       **kw)
    remote = agent.import_region(bytes.fromhex(info["data"]))
    rsig = agent.import_region(bytes.fromhex(info["sig"]))
    rows = []

    def grpc_push(src):
        views = [src[o:o + CHUNK] for o in range(0, len(src), CHUNK)]
        return lambda: push(iter([v.tobytes() for v in views]), timeout=300)

    def grpc_pull(dst):
        def f():
            off = 0
            for c in pull(len(dst).to_bytes(8, "little"), timeout=300):
                dst[off:off + len(c)] = np.frombuffer(c, np.uint8)
                off += len(c)
        return f

    for n in sizes:
        src = pattern(n, n % 97)
        dst = np.zeros(n, np.uint8)
        small = n < (1 << 20)
        lat_iters = lambda base: base if small else 0  # noqa: E731
        bw_iters = max(3, min(200, (args.bw_bytes + n - 1) // n))
        ops = [
            ("grpc", "push", grpc_push(src), args.grpc_lat_iters),
            ("grpc", "pull", grpc_pull(dst), args.grpc_lat_iters),
            ("rwin", "put+flush", lambda: (agent.put(remote, 0, src), agent.flush()), args.rwin_lat_iters),
            ("rwin", "put_notify+flush", lambda: (agent.put_notify(remote, 0, src, rsig, 0, 1), agent.flush()),
             args.rwin_lat_iters),
            ("rwin", "get", lambda: agent.get(dst, remote, 0), args.rwin_lat_iters),
        ]
        for path, op, fn, li in ops:
            if path == "rwin" and args.server_progress == "spin":
                spin(b"\x01", timeout=30)
            fn()  # warm-up (and, for a pull/get, the check's data)
            lat = Timer().run(fn, lat_iters(li)).samples
            t0 = time.perf_counter()
            for _ in range(bw_iters):
                fn()
            el = time.perf_counter() - t0
            # check: what went out arrived, what came back is the server's tensor
            if op in ("push", "put+flush", "put_notify+flush"):
                dst[:] = 0
                agent.get(dst, remote, 0)
            ok = bool(np.array_equal(dst, src))
            if path == "rwin" and args.server_progress == "spin":
                spin(b"\x00", timeout=30)
            row = dict(label=args.label, path=path, op=op, size=n, lat_iters=len(lat),
                       p50_us=statistics.median(lat) * 1e6 if lat else float("nan"),
                       mean_us=statistics.fmean(lat) * 1e6 if lat else float("nan"),
                       bw_iters=bw_iters, MiB_s=n * bw_iters / el / 2**20, ok=ok)
            rows.append(row)
            print(f"{args.label:10s} {path:4s} {op:17s} {size_text(n):>5s} p50 {row['p50_us']:10.1f} us  "
                  f"{row['MiB_s']:9.1f} MiB/s  {'ok' if ok else 'WRONG DATA'}", flush=True)
            if not ok:
                raise SystemExit(f"agent_vs_grpc: {path} {op} of {n} bytes moved wrong data")
    agent.close()
    ch.unary_unary(f"/{SVC}/Stop")(b"", timeout=30)
    ch.close()
    return rows, setups, first_puts


def report(args, rows, setups, first_puts, setup_line=None, heading=None):
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, args.label)
    cols = ["label", "path", "op", "size", "lat_iters", "p50_us", "mean_us", "bw_iters", "MiB_s", "ok"]
    with open(base + ".csv", "w") as f:
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n")
    by = {(r["op"], r["size"]): r for r in rows}
    sizes = sorted({r["size"] for r in rows})
    # verbs ignores UCX_TLS: name the device instead
    where = (f"ib_device={args.ib_device or '(first)'}" if args.transport == "verbs"
             else f"UCX_TLS={os.environ.get('UCX_TLS', '(unset)')}")
    lines = [heading or f"### {args.label}: {where} transport={args.transport} "
             f"server progress={args.server_progress}", "",
             "| size | gRPC push MiB/s | rwin put+flush | put_notify+flush | ratio put/push | gRPC pull | rwin get | "
             "ratio get/pull | gRPC push p50 us | rwin put p50 | gRPC pull p50 | rwin get p50 |", "|" + "---|" * 12]
    def bw(r):  # MiB/s; under 10 with 2 significant digits (a TCG guest's gRPC moves 0.1 MiB/s at 4 KiB, not 0)
        return f"{r['MiB_s']:.0f}" if r["MiB_s"] >= 10 else f"{r['MiB_s']:.2g}"

    for n in sizes:
        p, q, pn, g, gg = (by.get((o, n)) for o in ("push", "put+flush", "put_notify+flush", "pull", "get"))
        lines.append(f"| {size_text(n)} | {bw(p)} | {bw(q)} | {bw(pn)} | "
                     f"{q['MiB_s'] / p['MiB_s']:.1f}x | {bw(g)} | {bw(gg)} | "
                     f"{gg['MiB_s'] / g['MiB_s']:.1f}x | {p['p50_us']:.0f} | {q['p50_us']:.0f} | {g['p50_us']:.0f} | "
                     f"{gg['p50_us']:.0f} |")
    big = [n for n in sizes if n >= 1 << 20]
    bw_put = min(by[("put+flush", n)]["MiB_s"] / by[("push", n)]["MiB_s"] for n in big) if big else float("nan")
    bw_get = min(by[("get", n)]["MiB_s"] / by[("pull", n)]["MiB_s"] for n in big) if big else float("nan")
    l4 = 4096 if ("push", 4096) in by else sizes[0]
    lat_put = by[("put+flush", l4)]["p50_us"] / by[("push", l4)]["p50_us"]
    lat_get = by[("get", l4)]["p50_us"] / by[("pull", l4)]["p50_us"]
    verdict = lambda ok: "**met**" if ok else "**missed**"  # noqa: E731
    if setup_line is None:
        setup_line = [
            f"- first-use connection set-up (fresh agent's first import_region: connect + handshake), "
            f"{len(setups)} trials: median {statistics.median(setups) * 1e3:.2f} ms "
            f"(min {min(setups) * 1e3:.2f}, max {max(setups) * 1e3:.2f}); the first put + flush after it: median "
            f"{statistics.median(first_puts) * 1e3:.2f} ms -> <= 5 ms goal "
            f"{'**met**' if statistics.median(setups) + statistics.median(first_puts) <= 0.005 else '**missed**'} "
            f"(import + first put)"]
    lines += ["",
              f"- bandwidth >= 10x gRPC streaming at >= 1 MiB: put/push min {bw_put:.1f}x, get/pull min {bw_get:.1f}x "
              f"-> {verdict(bw_put >= 10 and bw_get >= 10)}",
              f"- latency <= 0.1x gRPC at {size_text(l4)} (p50): put/push {lat_put:.3f}x, get/pull {lat_get:.3f}x -> "
              f"{verdict(lat_put <= 0.1 and lat_get <= 0.1)}",
             ] + setup_line
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    ops = ["push", "pull", "put+flush", "put_notify+flush", "get"]
    with open(base + ".dat", "w") as f:  # one gnuplot data block per op: size MiB/s p50_us
        for op in ops:
            f.write(f"# {op}\n")
            for r in rows:
                if r["op"] == op:
                    f.write(f"{r['size']} {r['MiB_s']:.3f} {r['p50_us'] if r['lat_iters'] else 'NaN'}\n")
            f.write("\n\n")
    titles = ["gRPC push", "gRPC pull", "rwin put+flush", "rwin put_notify+flush", "rwin get"]
    bw = ", ".join(f'"{base}.dat" index {i} using 1:2 with linespoints title "{t}"' for i, t in enumerate(titles))
    lat = ", ".join(f'"{base}.dat" index {i} using 1:3 with linespoints title "{t}"' for i, t in enumerate(titles))
    gp = f"""set terminal pngcairo size 1400,600 font ",10" noenhanced
set output "{base}.png"
set datafile missing "NaN"
set logscale xy
set format x "%.0s%cB"
set xlabel "tensor size (bytes)"
set grid
set key left top
set multiplot layout 1,2 title "{args.label}: rwin agent vs gRPC streaming (1 MiB chunks)"
set ylabel "bandwidth (MiB/s)"
plot {bw}
set ylabel "p50 latency (us)"
plot {lat}
unset multiplot
"""
    with open(base + ".gp", "w") as f:
        f.write(gp)
    r = subprocess.run(["gnuplot", base + ".gp"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"agent_vs_grpc: gnuplot failed: {r.stderr}", file=sys.stderr)


def replot(args):
    import csv
    rows = []
    with open(args.replot) as f:
        for r in csv.DictReader(f):
            rows.append(dict(r, size=int(r["size"]), lat_iters=int(r["lat_iters"]), p50_us=float(r["p50_us"]),
                             mean_us=float(r["mean_us"]), bw_iters=int(r["bw_iters"]), MiB_s=float(r["MiB_s"])))
    prev = open(os.path.join(args.out, args.label + ".md")).read().splitlines()
    setup_line = [l for l in prev if l.startswith("- first-use")]
    report(args, rows, None, None, setup_line, heading=prev[0])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=("both", "server", "client"), default="both")
    ap.add_argument("--host", default="127.0.0.1", help="address this side's agent (and the server's gRPC) binds")
    ap.add_argument("--grpc-port", type=int, default=0)
    ap.add_argument("--server", help="client: the server's gRPC host:port")
    ap.add_argument("--sizes", default="4K,64K,1M,16M,64M,256M")
    ap.add_argument("--transport", default="ucx")
    ap.add_argument("--ib-device", default=None)
    ap.add_argument("--label", default="loopback")
    ap.add_argument("--out", default="bench/results/agent-grpc")
    ap.add_argument("--grpc-lat-iters", type=int, default=300)
    ap.add_argument("--rwin-lat-iters", type=int, default=2000)
    ap.add_argument("--bw-bytes", type=int, default=512 << 20, help="bytes per bandwidth loop (3..200 transfers)")
    ap.add_argument("--setup-trials", type=int, default=7)
    ap.add_argument("--server-progress", choices=("thread", "spin"), default="thread",
                    help="how the server's agent is driven during rwin ops: its progress thread alone (passive "
                         "server, sleeps up to 250 us when idle), or also a server thread spinning agent.progress()")
    ap.add_argument("--replot", metavar="CSV", help="only redo OUT/LABEL.{md,dat,gp,png} from an earlier CSV")
    args = ap.parse_args()
    if args.replot:
        return replot(args)
    if args.role == "server":
        return serve(args)
    srv = None
    target = args.server
    if args.role == "both":
        cmd = [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), "--role", "server", "--host", args.host, "--sizes", args.sizes,
               "--transport", args.transport] + (["--ib-device", args.ib_device] if args.ib_device else [])
        srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = srv.stdout.readline()
        if not line.startswith("READY "):
            raise SystemExit(f"agent_vs_grpc: the server did not start (status {srv.wait()})")
        target = line.split()[1]
    if not target:
        raise SystemExit("agent_vs_grpc: --role client needs --server HOST:PORT")
    try:
        rows, setups, first_puts = client(args, target)
    finally:
        if srv:
            try:
                rc = srv.wait(timeout=30)
                if rc != 0:
                    print(f"agent_vs_grpc: the server exited with status {rc}", file=sys.stderr)
            except subprocess.TimeoutExpired:
                srv.kill()
    report(args, rows, setups, first_puts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
